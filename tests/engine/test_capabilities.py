"""A bundle the embedded engine cannot evaluate as OPA would refuses to load.

regorus fails on a builtin it lacks only when a rule calling it is evaluated,
and evaluates `http.send` to undefined; both must be load errors with
file:line:col for every command, never a ready server deciding on errors.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from regokite.bundle import Bundle, Module, load_bundle
from regokite.engine.catalog import regorus_builtins
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import Location, PolicyLoadError

ROOT = Path(__file__).resolve().parents[2]

HTTP_SEND = """\
package p

deny contains "lookup failed" if {
	r := http.send({"method": "GET", "url": "http://127.0.0.1:1/"})
	r.status_code != 200
}
"""


def bundle(*texts: str) -> Bundle:
    return Bundle(tuple(Module(f"m{i}.rego", t) for i, t in enumerate(texts)))


def refusal(*texts: str) -> PolicyLoadError:
    with pytest.raises(PolicyLoadError) as caught:
        EmbeddedEngine(bundle(*texts))
    return caught.value


def test_http_send_is_refused_with_its_location_not_silently_undefined() -> None:
    error = refusal(HTTP_SEND)
    assert error.location == Location("m0.rego", 4, 7)
    assert error.message.startswith("undefined function http.send: not enabled in the embedded engine")
    assert "--engine opa" in error.message
    assert "http.send" in (error.source_line or "")


@pytest.mark.parametrize(
    "call",
    [
        'crypto.parse_private_keys("")',
        'crypto.x509.parse_certificate_request("")',
        'rego.parse_module("x.rego", "package x")',
        'crypto.x509.parse_and_verify_certificates_with_options("", {})',
    ],
)
def test_a_builtin_regorus_lacks_is_refused_at_load(call: str) -> None:
    name = call.split("(")[0]
    if name in regorus_builtins():
        pytest.skip(f"this regorus build has {name}")
    error = refusal(f"package p\n\nx := {call}\n")
    assert error.location == Location("m0.rego", 3, 6)
    assert f"builtin {name} is not available in the embedded engine" in error.message


def test_every_problem_is_named_not_only_the_first() -> None:
    error = refusal(HTTP_SEND, 'package q\n\nh := crypto.x509.parse_certificate_request("")\n')
    text = str(error)
    assert text.startswith("m0.rego:4:7: undefined function http.send")
    assert "m1.rego:3:6: builtin crypto.x509.parse_certificate_request" in text


def test_an_undefined_function_of_the_bundle_is_refused_as_opa_refuses_it() -> None:
    lib = "package lib.k8s\n\nf(x) := x\n"
    error = refusal(lib, "package p\n\nimport data.lib.k8s as kk\n\nx := kk.nope(1)\n")
    assert error.message == "undefined function data.lib.k8s.nope"
    assert error.location == Location("m1.rego", 5, 6)


@pytest.mark.parametrize("name", ["data", "input"])
def test_a_function_argument_named_data_or_input_is_refused_as_opa_refuses_it(name: str) -> None:
    """regorus binds such an argument and evaluates; OPA's compiler refuses the module."""
    error = refusal(f'package p\n\ncopy(ns, {name}) := {{"ns": ns, "data": {name}}}\n')
    assert error.message == f"args must not shadow {name} (OPA refuses the module): rename the argument"
    assert error.location == Location("m0.rego", 3, 10)
    EmbeddedEngine(bundle('package p\n\ncopy(ns, content) := {"ns": ns, "data": content}\n'))


def test_functions_of_the_bundle_and_builtins_it_has_load() -> None:
    lib = "package lib.k8s\n\nf(x) := x\n\ng.h(x) := x\n"
    policy = """\
package p

import data.lib.k8s
import data.lib.k8s as alias

local(x) := x + 1

a := k8s.f(1)

b := alias.g.h(2)

c := data.lib.k8s.f(3)

d := local(count([1, 2]))

e := {1 | print("printing is fine")}
"""
    engine = EmbeddedEngine(bundle(lib, policy))
    assert engine.evaluate("data.p") == {"a": 1, "b": 2, "c": 3, "d": 3, "e": [1]}


def test_test_modules_are_checked_too(tmp_path: Path) -> None:
    (tmp_path / "p.rego").write_text("package p\n\nx := 1\n")
    (tmp_path / "p_test.rego").write_text('package p_test\n\ntest_t if crypto.x509.parse_certificate_request("")\n')
    with pytest.raises(PolicyLoadError, match=r"builtin crypto\.x509\.parse_certificate_request"):
        EmbeddedEngine(load_bundle([tmp_path]))


@pytest.mark.parametrize(("command", "code"), [("test", 1), ("eval", 2)])  # opa test: what does not load is exit 1
def test_commands_exit_naming_the_builtin(tmp_path: Path, command: str, code: int) -> None:
    (tmp_path / "p.rego").write_text(HTTP_SEND)
    argv = [sys.executable, "-m", "regokite.cli", command, str(tmp_path)]
    if command == "eval":
        argv[-1:] = ["-d", str(tmp_path), "data.p.deny"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == code, done.stdout + done.stderr
    assert "p.rego:4:7: undefined function http.send: not enabled" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_reference_and_a_parenthesis_on_the_next_line_in_brackets_are_refused_not_called() -> None:
    """OPA refuses it (a parse error), regorus reads a call. In a rule body it is two expressions,
    as OPA reads them (tests/engine/rewrite/test_opa_syntax.py, test_rewrite_stages.py)."""
    error = refusal("package p\n\nok(hpa) := [hpa.spread\n\t(hpa.max - hpa.min)]\n")
    assert error.location == Location("m0.rego", 3, 13)
    assert "followed by a parenthesised expression on the next line" in error.message


def test_a_function_from_another_file_of_the_same_package_is_local() -> None:
    lib = "package p\n\nhelper(x) := x * 2\n"
    user = "package p\n\ny := helper(21)\n"
    assert EmbeddedEngine(bundle(lib, user)).evaluate("data.p.y") == 42


def test_a_name_no_engine_knows_is_an_unknown_function() -> None:
    assert refusal("package p\n\nx := no_such_builtin(1)\n").message == "unknown function no_such_builtin"
