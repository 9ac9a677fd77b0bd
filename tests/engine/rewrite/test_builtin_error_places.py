"""A builtin regokite answers through a function appended to the module names the call's place when it
errs, as OPA does, beside OPA's evaluator (tests/opa_oracle.py).

The embedded engine routes some builtins (`count`, `sort`, `regex.split`, ... and any extension a `with`
replaces) through a function appended to the module; each call gets one of its own, whose lines map to
the call. Before, one function per package answered every call, and an error of the builtin named that
function's line (`p.rego:9:27` for a `count(5)` on line 4): every location test here failed so.
OPA's library gives the line only; the column asserted is where the call's name starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import opa_oracle
import pytest

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.bundle import Bundle, Module
from regokite.cli import main
from regokite.engine import EngineSettings
from regokite.engine.embedded import EmbeddedEngine
from regokite.engine.rewrite import ALWAYS_ROUTED
from regokite.errors import EvaluationError, Location
from tests.admission.reviews import deployment, review

# builtin -> (its call, an input on which OPA's builtin errs)
OPA_ERRS: dict[str, tuple[str, Any]] = {
    "count": ("count(input.a)", {"a": 5}),
    "to_number": ("to_number(input.a)", {"a": "x"}),
    "to_number of a spaced string": ("to_number(input.a)", {"a": " 1"}),
    "json.marshal_with_options": ("json.marshal_with_options(input.a, input.b)", {"a": 1, "b": "x"}),
    "sort": ("sort(input.a)", {"a": 5}),
    "min": ("min(input.a)", {"a": 5}),
    "max": ("max(input.a)", {"a": 5}),
    "replace": ('replace(input.a, input.b, "x")', {"a": 5, "b": "y"}),
    "replace of an empty string": ('replace(input.a, input.b, "x")', {"a": 5, "b": ""}),
    "regex.split": ('regex.split(input.a, "x")', {"a": "["}),
    "json.patch": ("json.patch(input.a, input.b)", {"a": {"k": 1}, "b": [{"op": "remove", "path": "/j"}]}),
    "object.subset": ("object.subset(input.a, input.b)", {"a": 1, "b": "x"}),
    "yaml.unmarshal": ("yaml.unmarshal(input.a)", {"a": "a: b: c"}),
    "format_int": ("format_int(input.a, 3)", {"a": -0.5}),
}
# builtins OPA never fails, whose calls the embedded engine refuses where it cannot answer as OPA
REFUSED: dict[str, tuple[str, Any]] = {
    "yaml.marshal": ("yaml.marshal(input.a)", {"a": "a: b"}),
    "sort of a set inside an object": ("sort([[{1}], [input.a]])", {"a": {"k": 1}}),
}
NEVER_ERRS = {"json.marshal", "base64.is_valid", "net.cidr_is_valid"}  # in OPA and through the routed function


def module(call: str, before: str = "") -> str:
    """The call on line 5, column 10, of p.rego's rule x."""
    return f"package p\n{before}\nx := y if {{\n    z := 1\n    y := {call}\n    z == 1\n}}\n"


def test_every_routed_builtin_has_a_case() -> None:
    cases = {name.split(" ")[0] for name in (*OPA_ERRS, *REFUSED)} | NEVER_ERRS
    assert cases >= ALWAYS_ROUTED


@pytest.mark.parametrize("name", OPA_ERRS)
def test_a_routed_builtins_error_names_the_call_as_opa(name: str) -> None:
    call, input = OPA_ERRS[name]
    assert_fails_at_the_call_as_opa(Bundle((Module("p.rego", module(call)),)), input)


def assert_fails_at_the_call_as_opa(bundle: Bundle, input: Any) -> None:
    """data.p.x errs in both engines: OPA names line 5 (the call's), regokite line 5, column 10."""
    with pytest.raises(EvaluationError) as ours:
        EmbeddedEngine(bundle).evaluate("data.p.x", input)
    with pytest.raises(EvaluationError) as opas:
        opa_oracle.OracleEngine(bundle).evaluate("data.p.x", input)
    assert opas.value.location is not None and opas.value.location.line == 5
    assert ours.value.location == Location("p.rego", 5, 10)


@pytest.mark.parametrize("name", REFUSED)
def test_a_routed_builtins_refusal_names_the_call(name: str) -> None:
    call, input = REFUSED[name]
    with pytest.raises(EvaluationError, match="--engine opa") as ours:
        EmbeddedEngine(Bundle((Module("p.rego", module(call)),))).evaluate("data.p.x", input)
    assert ours.value.location == Location("p.rego", 5, 10)


def test_a_comparison_the_engine_cannot_order_as_opa_names_its_operator() -> None:
    """`<` of values holding a set and an object (OPA's `lt`) goes through a helper placed at it too."""
    text = "package p\n\nx if {\n    z := 1\n    [{1}] < [input.a]\n}\n"
    with pytest.raises(EvaluationError, match="--engine opa") as caught:
        EmbeddedEngine(Bundle((Module("p.rego", text),))).evaluate("data.p.x", {"a": {"k": 1}})
    assert caught.value.location == Location("p.rego", 5, 11)


def test_each_call_of_a_builtin_names_its_own_line() -> None:
    text = "package p\n\na := count(input.a)\n\nb := count(input.b)\n\nc := [sort(input.c)]\n"
    engine = EmbeddedEngine(Bundle((Module("p.rego", text),)))
    assert engine.evaluate("data.p.a", {"a": "x"}) == 1
    for rule, line, col in (("b", 5, 6), ("c", 7, 7)):
        with pytest.raises(EvaluationError) as caught:
            engine.evaluate(f"data.p.{rule}", {"a": "x", "b": 5, "c": 5})
        assert caught.value.location == Location("p.rego", line, col)


def test_a_v0_modules_routed_builtin_names_the_call() -> None:
    text = "package p\n\nx = y {\n    z := 1\n    y := count(input.a)\n    z == 1\n}\n"
    with pytest.raises(EvaluationError) as caught:
        EmbeddedEngine(Bundle((Module("p.rego", text, v0=True),))).evaluate("data.p.x", {"a": 5})
    assert caught.value.location == Location("p.rego", 5, 10)


def test_two_modules_of_one_package_name_their_own_calls() -> None:
    first = Module("a.rego", "package p\n\na := count(input.a)\n")
    second = Module("b.rego", "package p\n\n\n\nb := count(input.b)\n")
    engine = EmbeddedEngine(Bundle((first, second)))
    for rule, where in (("a", Location("a.rego", 3, 6)), ("b", Location("b.rego", 5, 6))):
        with pytest.raises(EvaluationError) as caught:
            engine.evaluate(f"data.p.{rule}", {"a": 5, "b": 5})
        assert caught.value.location == where


# builtins routed because a `with` of the bundle replaces them (regorus's `with` does not reach them)
MOCKED: dict[str, tuple[str, Any, str]] = {
    "an extension builtin": ("crypto.md5(input.a)", {"a": 5}, 'crypto.md5("a") with crypto.md5 as "m"'),
    "sprintf": ("sprintf(input.a, [])", {"a": 5}, 'sprintf("a", []) with sprintf as "m"'),
}


@pytest.mark.parametrize("name", MOCKED)
def test_a_builtin_routed_for_a_with_names_the_call_as_opa(name: str) -> None:
    call, input, mocking = MOCKED[name]
    test = Module("p_test.rego", f'package p_test\n\ntest_mocked if {{\n    {mocking} == "m"\n}}\n')
    bundle = Bundle((Module("p.rego", module(call)), test))
    assert EmbeddedEngine(bundle).evaluate("data.p_test.test_mocked") is True
    assert_fails_at_the_call_as_opa(bundle, input)


def test_http_send_left_by_the_tests_that_replace_it_names_the_call() -> None:
    test = 'package p_test\n\ntest_mocked if {\n    data.p.x == 1 with http.send as {"status_code": 1}\n}\n'
    bundle = Bundle((Module("p.rego", module("http.send(input.a).status_code")), Module("p_test.rego", test)))
    engine = EmbeddedEngine(bundle)
    assert engine.evaluate("data.p_test.test_mocked", {"a": {}}) is True
    with pytest.raises(EvaluationError, match="--allow-http-send") as caught:
        engine.evaluate("data.p.x", {"a": {}})
    assert caught.value.location == Location("p.rego", 5, 10)


def test_a_with_replaces_every_call_of_a_routed_builtin() -> None:
    """Each call has a function of its own: a `with count as` replaces all of them, in every package."""
    helper = Module("lib.rego", "package lib\n\nn(v) := count(v)\n\nm(v) := count(v) + 1\n")
    policy = Module("p.rego", "package p\n\nx := [count(input.a), data.lib.n(input.a), data.lib.m(input.a)]\n")
    test = Module(
        "t.rego", 'package t\n\ntest_all if {\n    data.p.x == [7, 7, 8] with count as 7 with input as {"a": "ab"}\n}\n'
    )
    bundle = Bundle((helper, policy, test))
    assert EmbeddedEngine(bundle).evaluate("data.t.test_all") is True
    assert opa_oracle.OracleEngine(bundle).evaluate("data.t.test_all") is True


# ------------------------------------------------------------------ regokite test (opa test's non-strict errors)

POLICY = "package p\n\nf(v) := y if {\n    z := 1\n    y := {call}\n    z == 1\n}\n"
TESTS = """package p_test

test_erring_call_is_undefined if {
    not data.p.f(%s)
}

test_other_values_answer if {
    data.p.f(%s) == %s
}
"""


@pytest.mark.parametrize(
    ("call", "erring", "other", "value"),
    [
        ("count(v)", "5", '"a😀"', "2"),
        ("to_number(v)", '" 1"', '"12"', "12"),
        ("sort(v)", "5", "[2, 1]", "[1, 2]"),
        ("max(v)", "5", "{1, 3}", "3"),
        ('replace(v, "", "-")', "5", '"ab"', '"-a-b-"'),
        ('regex.split(v, "xay")', '"["', '"a"', '["x", "y"]'),
    ],
)
def test_a_routed_builtins_error_is_undefined_under_test_and_named_under_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], call: str, erring: str, other: str, value: str
) -> None:
    """As `opa test`: undefined, and the other calls of the same place answer as before (the guards of
    the function placed there are not made lenient); with --strict-builtin-errors, an error at the call."""
    (tmp_path / "p.rego").write_text(POLICY.replace("{call}", call))
    (tmp_path / "p_test.rego").write_text(TESTS % (erring, other, value))
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["test", "--strict-builtin-errors", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "test_erring_call_is_undefined: ERROR" in out and "p.rego:5:10" in out


def test_under_test_a_place_that_erred_still_takes_what_python_cannot_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The call made undefined where it errs is not made through Python, which cannot receive a set of
    objects: sort's own type errors are undefined by indexing its operand by its type."""
    (tmp_path / "p.rego").write_text("package p\n\nf(v) := sort(v)\n\ng(v) := count(v)\n")
    tests = (
        "package p_test\n\ntest_sort_errs if {\n    not data.p.f(5)\n}\n\n"
        'test_sort_of_objects if {\n    data.p.f({{"a": 1}, {"b": 1}}) == [{"a": 1}, {"b": 1}]\n}\n\n'
        "test_count_errs if {\n    not data.p.g(5)\n}\n\n"
        'test_count_of_objects if {\n    data.p.g({{"a": 1}, {"b": 1}}) == 2\n}\n'
    )
    (tmp_path / "p_test.rego").write_text(tests)
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out


def test_a_builtin_put_in_by_a_with_names_that_with() -> None:
    """`with f as count`: the function answering for count serves every call of f the `with` reaches,
    so its error names the `with`'s `count`."""
    policy = Module("p.rego", "package p\n\ng(x) := x\n")
    test = Module("t.rego", "package t\n\nx if {\n    data.p.g(5) == 5 with data.p.g as count\n}\n")
    with pytest.raises(EvaluationError) as caught:
        EmbeddedEngine(Bundle((policy, test))).evaluate("data.t.x")
    assert caught.value.location == Location("t.rego", 4, 39)


# ------------------------------------------------------------------ admission


def test_an_admission_policys_routed_builtin_error_fails_closed_naming_the_call(tmp_path: Path) -> None:
    """Under --strict-builtin-errors (by default the call is undefined: tests/admission/test_builtin_errors.py)."""
    rego = "package admission.p\n\ndeny contains msg if {\n    n := count(input.request.object.spec.replicas)\n"
    (tmp_path / "p.rego").write_text(rego + '    msg := sprintf("%d", [n])\n}\n')
    policies = load_policy_set([str(tmp_path)], EngineSettings(strict_builtin_errors=True))
    decision = decide(policies, parse_review(json.dumps(review(deployment())).encode()), mode="validate")
    assert not decision.verdict.allowed and decision.outcomes[0].decision == "error"
    assert "p.rego:4:10" in decision.verdict.messages[0]
