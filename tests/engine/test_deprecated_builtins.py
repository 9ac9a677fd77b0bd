"""OPA 1.x's deprecated builtins: evaluated under v0 (as OPA's v0 compatibility), refused under v1
with OPA's message. On the code before each was refused at load in either version.

OPA's library in the oracle reads v1 only, so each v0 answer is checked beside OPA's answer for the
v1 builtin or expression the deprecated one stands for (re_match is regex.match, ...).
"""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import EvaluationError, PolicyLoadError

ANY = "count([v | some v in x; v == true]) > 0"
ALL = "count([v | some v in x; v != true]) == 0"

# (a v0 expression of x, the v1 expression OPA evaluates alike, operands)
SAME = [
    ("re_match(x[0], x[1])", "regex.match(x[0], x[1])", ["^a+$", "aaa"]),
    ("re_match(x[0], x[1])", "regex.match(x[0], x[1])", ["^a+$", "b"]),
    ("net.cidr_overlap(x[0], x[1])", "net.cidr_contains(x[0], x[1])", ["10.0.0.0/8", "10.1.2.3"]),
    ("net.cidr_overlap(x[0], x[1])", "net.cidr_contains(x[0], x[1])", ["10.0.0.0/8", "11.1.2.3"]),
    ("any(x)", ANY, [False, 1, "true"]),
    ("any(x)", ANY, [False, True]),
    ("any(x)", ANY, []),
    ("any({v | v := x[_]})", ANY, [1, True]),
    ("all(x)", ALL, [True, 1]),
    ("all(x)", ALL, [True, True]),
    ("all(x)", ALL, []),
    (
        "set_diff({v | v := x[0][_]}, {v | v := x[1][_]})",
        "{v | some v in x[0]} - {v | some v in x[1]}",
        [["a", 2], [2]],
    ),
    ("cast_array({v | v := x[_]})", "sort({v | some v in x})", ["b", "a", 3, None]),
    ("cast_array(x)", "x", [3, "a"]),
    ("cast_set(x)", "{v | some v in x}", ["b", "a", "b"]),
    ("cast_set(x)", "{v | some v in x}", [1, 0, 2, "1"]),
    ("cast_array({v | v := x[_]})", "sort({v | some v in x})", [1, 0, 2]),
    ("set_diff({v | v := x[0][_]}, {v | v := x[1][_]})", "{v | some v in x[0]} - {v | some v in x[1]}", [[0, 1], [1]]),
    ("cast_string(x)", "x", "s"),
    ("cast_boolean(x)", "x", False),
    ("cast_null(x)", "x", None),
    ("cast_object(x)", "x", {"a": 1}),
]


def _v0(expression: str, value: Any) -> Any:
    module = Module("p.rego", f"package p\n\ny = r {{ x := input.v; r := {expression} }}\n", v0=True)
    return EmbeddedEngine(Bundle((module,))).evaluate("data.p.y", {"v": value})


@pytest.mark.parametrize(("v0", "v1", "value"), SAME)
def test_a_deprecated_builtin_under_v0_answers_as_opa_its_v1_form(v0: str, v1: str, value: Any) -> None:
    mine = _v0(v0, value)
    _, opa = opa_oracle.both(f"package p\n\ny := r if {{ x := input.v; r := {v1} }}\n", {"v": value}, ref="data.p.y")
    assert mine == opa


@pytest.mark.parametrize(
    ("expression", "value"),
    [("cast_string(x)", 1), ("cast_boolean(x)", "t"), ("cast_null(x)", 0), ("cast_object(x)", []), ("any(x)", 1)],
)
def test_a_deprecated_builtin_errs_on_a_wrong_type(expression: str, value: Any) -> None:
    with pytest.raises(EvaluationError, match="operand 1 must be"):
        _v0(expression, value)


@pytest.mark.parametrize(
    "expression",
    ["all({v | v := x[_]})", "set_diff({v | v := x[_]}, set())", "cast_set(x)", "cast_array({v | v := x[_]})"],
)
def test_a_set_whose_members_python_could_merge_is_refused(expression: str) -> None:
    with pytest.raises(EvaluationError, match="`true` and `1`"):
        _v0(expression, [True, 1])


@pytest.mark.parametrize(
    ("name", "call"), [("re_match", 're_match("a", "a")'), ("any", "any([true])"), ("cast_array", "cast_array([1])")]
)
def test_a_deprecated_builtin_under_v1_is_refused_with_opas_message(name: str, call: str) -> None:
    text = f"package p\n\nx := {call}\n"
    with pytest.raises(PolicyLoadError) as mine:
        EmbeddedEngine(Bundle((Module("p.rego", text),)))
    with pytest.raises(PolicyLoadError) as opa:
        opa_oracle.OracleEngine(Bundle((Module("p.rego", text),)))
    assert f"deprecated built-in function calls in expression: {name}" in mine.value.message
    assert f"deprecated built-in function calls in expression: {name}" in str(opa.value)
    assert mine.value.location is not None and mine.value.location.line == 3
