"""Rego that regorus reads otherwise than OPA, rewritten before it parses: the same answers as OPA.

Each case is evaluated by the embedded engine (which applies
`regokite.engine.rewrite`) and by OPA's own evaluator (tests/opa_oracle.py);
each fails on regorus as it parses the text itself, which the `raw` check
shows. v0 cases, which OPA's library cannot parse, are compared with the same
rules written in v1 and evaluated by OPA. The cases whose one check is OPA's
answer are in ../same_as_opa.yaml (`syntax/`).
"""

from __future__ import annotations

import json
from typing import Any

import opa_oracle
import pytest
import regorus
from opa_oracle import OracleEngine

from regokite.bundle import Bundle, Module
from regokite.engine import Engine
from regokite.engine.embedded import EmbeddedEngine
from regokite.engine.rewrite import rewrite
from regokite.errors import EvaluationError, Location, PolicyLoadError

INPUT = {"arr": [1, 2], "obj": {"a": 2}, "s": ["x"]}


def answer(engine: Engine, ref: str = "data.p", input: Any = INPUT) -> Any:
    return opa_oracle.answer(engine, ref, input)


def raw(text: str, ref: str = "data.p", *, v0: bool = False) -> Any:
    """What regorus answers on the module as written (no rewrite): the bug each case pins."""
    engine = regorus.Engine()
    engine.set_rego_v0(v0)
    try:
        engine.add_policy("p.rego", text)
        engine.set_input(INPUT)
        results = json.loads(engine.eval_query_as_json(ref))["result"]
    except RuntimeError:
        return "<error>"
    return results[0]["expressions"][0]["value"] if results else "<undefined>"


def embedded(text: str, *, v0: bool = False) -> EmbeddedEngine:
    return EmbeddedEngine(Bundle((Module("p.rego", text, v0),)))


def oracle(text: str) -> OracleEngine:
    return OracleEngine(Bundle((Module("p.rego", text),)))


# ------------------------------------------------------------------ several bodies

BODIES_V1 = {
    "partial set": "package p\n\nq contains x if { x := 1 } { x := 2 }\n",
    "complete rule": "package p\n\nq := 5 if { false } { true }\n",
    "partial object": 'package p\n\nq[k] := v if { k := "a"; v := 1 } { k := "b"; v := 2 }\n',
    "across lines": "package p\n\nq contains x if {\n\tx := 1\n} {\n\tx := 2 # a comment { }\n}\n\nr := 1\n",
}


@pytest.mark.parametrize("name", BODIES_V1)
def test_several_bodies_are_one_rule_each_as_opa(name: str) -> None:
    text = BODIES_V1[name]
    expected = answer(oracle(text))
    assert answer(embedded(text)) == expected
    if name != "partial object":  # the one form regorus already reads as OPA
        assert raw(text) != expected


BODIES_V0 = {
    # v0 text -> the same rules in v1 (OPA's library parses only v1)
    "partial set": (
        "package p\n\nq[x] { x := 1 } { x := 2 }\n",
        "package p\n\nq contains x if { x := 1 } { x := 2 }\n",
    ),
    "complete": ("package p\n\nq = 5 { false } { true }\n", "package p\n\nq := 5 if { false } { true }\n"),
    "gatekeeper's noupdateserviceaccount": (
        'package p\n\nviolation[{"msg": msg}] {\n\tinput.arr[0] == 9\n\tmsg := "a"\n} {\n\tinput.arr[1] == 2\n'
        '\tmsg := "b"\n} {\n\tinput.obj.a == 2\n\tmsg := "c"\n}\n',
        'package p\n\nviolation contains {"msg": msg} if {\n\tinput.arr[0] == 9\n\tmsg := "a"\n} {\n'
        '\tinput.arr[1] == 2\n\tmsg := "b"\n} {\n\tinput.obj.a == 2\n\tmsg := "c"\n}\n',
    ),
}


@pytest.mark.parametrize("name", BODIES_V0)
def test_v0_rules_with_several_bodies_answer_as_opa_on_their_v1_form(name: str) -> None:
    v0, v1 = BODIES_V0[name]
    expected = answer(oracle(v1))
    assert answer(embedded(v0, v0=True)) == expected
    assert raw(v0, v0=True) != expected


def test_an_error_after_a_copied_head_points_at_the_file_as_written() -> None:
    text = "package p\n\nq contains x if { x := 1 } { x := 1 / 0 }\n"
    with pytest.raises(EvaluationError) as caught:
        embedded(text).evaluate("data.p.q")
    assert caught.value.location == Location("p.rego", 3, 37)  # the `/` of `1 / 0`, where it is written


# ------------------------------------------------------------------ a reference, then ( on the next line


def test_a_reference_then_a_parenthesis_on_the_next_line_are_two_expressions_as_opa() -> None:
    """gatekeeper-library's horizontalpodautoscaler."""
    text = (
        "package p\n\nok if {\n\tinput.obj.a\n\t(input.arr[1] - input.arr[0]) >= input.obj.a\n}\n\n"
        "spread if {\n\tx := input.obj.a\n\t(x + 1) > 100\n}\n"
    )
    expected = answer(oracle(text))
    assert expected == {}  # neither rule holds: (2 - 1) >= 2 and (2 + 1) > 100 are false
    assert answer(embedded(text)) == expected
    assert raw(text) != expected


def test_a_parenthesis_on_the_next_line_inside_brackets_is_still_refused() -> None:
    """OPA refuses it (a parse error); regorus would read a call."""
    with pytest.raises(PolicyLoadError, match="parenthesised expression on the next line"):
        embedded("package p\n\nf(x) := x\n\nr := [f\n(1)]\n")


# ------------------------------------------------------------------ not


FUNCTIONS = "f(x) if { [x][0] == 2 }\n\ng(_) := 1\n\nh(_) := false\n\nundefined_rule if false\n"


def test_the_gatekeeper_users_case_fails_on_regorus_as_written() -> None:
    """gatekeeper-library's users template: `not f(x)` with `x` undefined, true in regorus, undefined in OPA."""
    text = f"package p\n\n{FUNCTIONS}\nr if {{\n\tnot f(input.nope)\n}}\n"
    assert answer(oracle(text)) == {} == answer(embedded(text))
    assert raw(text) == {"r": True}


def test_an_error_in_a_bound_operand_points_at_the_negation_as_written() -> None:
    text = f"package p\n\n{FUNCTIONS}\nr if {{\n\tnot f(1 / input.arr[0] - 1)\n}}\n"
    with pytest.raises(EvaluationError) as caught:
        embedded(text).evaluate("data.p.r", {"arr": [0]})
    assert caught.value.location is not None
    assert (caught.value.location.line, caught.value.location.col) == (
        12,
        5,
    )  # the `not`: the operand is bound before it


# ------------------------------------------------------------------ sprintf


def test_sprintf_of_a_missing_argument_fails_on_regorus_as_written() -> None:
    text = 'package p\n\nx := sprintf("%v %v", [1])\n'
    assert answer(embedded(text)) == answer(oracle(text)) == {"x": "1 %!v(MISSING)"}
    assert raw(text) == "<error>"


# ------------------------------------------------------------------ lines and columns


def test_rewrites_keep_every_line() -> None:
    text = (
        "package p\n\nimport rego.v1\n\nq contains x if { x := 1 } { x := 2 }\n\n"
        'r if {\n\tnot startswith(input.a, "b")\n\tinput.b\n\t(1) == 1\n\tm := sprintf("%v", [\n\t\t1,\n\t])\n}\n'
    )
    (module,), _ = rewrite([Module("p.rego", text)])
    kept, _, helper = module.text.partition("\n__rk_text_")  # sprintf's operand helper, appended
    assert kept.count("\n") == text.count("\n")
    assert module.text != text and helper


def test_lines_over_1024_columns_load() -> None:
    text = 'package p\n\nx := "' + "a" * 5000 + '"\n'
    assert embedded(text).evaluate("data.p.x") == "a" * 5000
