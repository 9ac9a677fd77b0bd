"""OPA's default evaluation (a builtin's error makes its call undefined) beside OPA's evaluator
(tests/opa_oracle.py): the classes the fuzzer's default mode found (`python3 -m bench.rego_fuzz
--builtin-errors default`). Every case answered otherwise than OPA, or answered where OPA errs, on the code before."""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.engine.extensions import INTERNAL
from regokite.engine.extensions.common import Refusal
from regokite.engine.extensions.internal import LENIENT


def _in_turn(text: str, inputs: list[Any]) -> list[tuple[Any, Any]]:
    """(regokite's answer, OPA's) for each input in turn, on one engine each: the first input makes a call
    err, so the place is lenient from then on."""
    bundle = Bundle((Module("p.rego", text),))
    mine = EmbeddedEngine(bundle, strict_builtin_errors=False)
    opa = opa_oracle.OracleEngine(bundle, strict_builtin_errors=False)
    return [(opa_oracle.answer(mine, "data.p.x", i), opa_oracle.answer(opa, "data.p.x", i)) for i in inputs]


def test_a_lenient_call_never_loses_its_value() -> None:
    """bits.lsh(1, 64) after its place was made lenient (a call erred there before): undefined, OPA's
    18446744073709551616 (regorus's value reached Python as an error, "not an i64")."""
    first, second = _in_turn("package p\n\nx := bits.lsh(1, input)\n", ["a", 64])
    assert first == ("<undefined>", "<undefined>")
    assert second[0] == second[1] == 2**64


@pytest.mark.parametrize(
    ("builtin", "operands"),
    [
        ("abs", [-1e20]),  # regorus's value reached Python as an error: the call was undefined
        ("to_number", ["18446744073709551616"]),  # ... or as 18446744073709551615, u64's largest
    ],
)
def test_a_value_python_cannot_receive_from_regorus_is_a_refusal_not_undefined(
    builtin: str, operands: list[Any]
) -> None:
    """The lenient call (rewrite.lenient) runs a builtin of regorus's on an engine of its own and hands its
    value back through Python, which receives no number from 2**64 up."""
    with pytest.raises(Refusal, match="beyond 64-bit integers"):
        INTERNAL[LENIENT].function(builtin, operands, "p.rego:3:6")
    assert INTERNAL[LENIENT].function(builtin, ["x"], "p.rego:3:6") == []  # its error: undefined


@pytest.mark.parametrize("strict", [True, False])
def test_bits_lsh_beyond_64_bits_is_held_exactly_or_refused(strict: bool) -> None:
    """regorus shifted into a double, rounded: bits.lsh(12345678901234567, 20) was 1.2945382599540938e+22."""
    for operands, held in [([12345678901234567, 20], False), ([-3, 70], True), ([1, 63], True), ([5, 2], True)]:
        mine, opa = opa_oracle.both("package p\n\nx := bits.lsh(input[0], input[1])\n", operands, strict=strict)
        assert (mine == opa) if held else (mine, opa != "<error>") == ("<error>", True), operands
    for operands in [[1.5, 2], [1, -1], ["a", 1]]:  # OPA's errors: undefined by default
        assert opa_oracle.both("package p\n\nx := bits.lsh(input[0], input[1])\n", operands, strict=strict) == (
            ("<error>",) * 2 if strict else ("<undefined>",) * 2
        )


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    ("document", "schema"),
    [
        ([1, "a"], '{"type": "array"}'),
        ([1, "a"], '{"type": "array", "items": {"type": "integer"}}'),
        ([], '{"type": "object"}'),
        ([{"a": [1]}], '{"type": "array", "items": {"type": "object"}}'),
    ],
)
def test_json_match_schema_validates_an_array_document(document: Any, schema: str, strict: bool) -> None:
    """OPA validates an array document that reaches it at evaluation (its type check refuses only one written
    as the operand); regokite erred, so OPA's default evaluation made the call undefined where OPA answers."""
    rule = f"package p\n\nx := json.match_schema(input, {schema})\n"
    mine, opa = opa_oracle.both(rule, document, strict=strict)
    assert mine == opa != "<error>"


@pytest.mark.parametrize("strict", [True, False])
def test_substring_whose_end_wraps_go_int_is_an_error_in_every_mode(strict: bool) -> None:
    """OPA's substring slices up to start + length, which wraps negative past Go's largest int: OPA panics (an
    error, whatever the mode); regorus answered the rest of the string. The fuzzer's form under `not`."""
    for start, length in [(3, 2**63 - 1), (1, 2**63 - 1), (3, 2**63 - 5), (0, 2**63 - 1), (1, 2**63 - 2)]:
        for rule in ['x := substring("<b>&amp;", input[0], input[1])', 'x if not substring("<b>", input[0], input[1])']:
            mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", [start, length], strict=strict)
            assert mine == opa, (rule, start, length)


HEADS = [
    "x contains o.name if {\n\tsome o in input\n}",
    "x contains o.name if { some o in input }",
    "x contains input[_].name",
    'x contains {"m": o.name} if {\n\to := input[_]\n}',
    "x[o.name] := 1 if {\n\tsome o in input\n}\n\nx.b := 2",
    "x[o] := o.name if {\n\tsome o in input\n}",
    'x[o.name] := {\n\t"v": o.v,\n} if {\n\to := input[_]\n\to.v\n}',
    "x contains ceil(o.name) if {\n\tsome o in input\n}",
]


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("head", HEADS)
def test_a_head_term_undefined_for_one_answer_leaves_out_only_that_answer(head: str, strict: bool) -> None:
    """regorus dropped every value of the rule's definition (`x contains o.name if { some o in input }`, one
    object without a name: set()); OPA leaves out that answer. In OPA's default evaluation a call in the
    head that errs for one answer is undefined there too (the fuzzer's `x[ceil(x0)] := true`)."""
    document = [{"name": "a", "v": 1}, {"v": 2}, {"name": 3.5, "v": 3}, {"name": "s"}]
    mine, opa = opa_oracle.both(f"package p\n\n{head}\n", document, strict=strict)
    assert mine == opa


NAMED = [{"k": True, "name": "a"}, {"k": True}, {"k": False, "name": "b"}]
COMPLETE = [
    ("x := strings.any_suffix_match(y, y) if {\n\tsome y in input.xs\n}", {"xs": ["ß", [" x "], None, {"n": True}]}),
    ("x := o.name if {\n\tsome o in input\n\to.k\n}", NAMED),
    ("x := o.name if { some o in input; o.k }", NAMED),
    ("x := o.name if o := input[_]", [{"name": "a"}, {}]),
    ("x := o.name if {\n\tsome o in input\n\to.k\n}", [{"k": True, "name": "a"}, {"k": True, "name": "c"}]),  # conflict
    ("x.b := o.name if {\n\tsome o in input\n\to.k\n}", NAMED),
    ("x := input.a.b", {"a": {"b": 1}}),
    ("x := input.a.b", {"a": 1}),
    ('x := input[c] if c := "a"', {"a": 1}),  # the query's span leaves out its closing quote
    ('x contains input[c] if c := "a"', {"a": 1}),
    ('x := [input.a] if "a" in object.keys(input)', {"a": 1}),  # ... and its opening quote
    ("x := {k: v |\n\tsome k, v in input\n\tv != 2\n} if count(input) > 0", {"a": 1, "b": 2}),  # lines stay
    ("x contains {k: v |\n\tsome k, v in input\n\tv != 2\n} if count(input) > 0", {"a": 1, "b": 2}),
]


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(("rule", "document"), COMPLETE)
def test_a_complete_rules_value_undefined_for_one_answer_leaves_out_only_that_answer(
    rule: str, document: Any, strict: bool
) -> None:
    """regorus made a complete rule undefined when its value was undefined for one of the body's answers
    (`r := o.name if { some o in input }`, one object without a name); OPA leaves out that answer, and two
    answers of different values are still its conflict error. The fuzzer's `r0 := strings.any_suffix_match(x0,
    x0) if { some x0 in input.xs }`: an erring call is undefined in OPA's default evaluation, true elsewhere."""
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", document, strict=strict)
    assert mine == opa


ELSE_CHAINS = [
    ("x := o.name if {\n\tsome o in input\n\to.k\n} else := 5", NAMED),
    ("x := o.name if { some o in input; o.k; not o.name } else := 5", NAMED),
    ("x := input[1].name if input[1].k else := input[2].name if input[2] else := 0", NAMED),
    ("x := input[1].name if {\n\tinput[1].k\n} else := input[0].name if {\n\tinput[0]\n}", NAMED),
    ('x := substring("abc", input[1], 1) if { input[1] } else := upper(input[0].name)', NAMED),
    ("x = input[1].name if { true } else = input[2].name", NAMED),
    ("f(o) := o.name if { o.k } else := 5\n\nx := [f(o) | some o in input]", NAMED),
    ("f(o) if { o.name } else := o.zz\n\nx := [y | some o in input; y := f(o)]", NAMED),
    ("f(o) := o.name if { o.k } else := 5\n\ng(o) := 6\n\nx := [y | some o in input; y := f(o) with f as g]", NAMED),
    ('q := o.name if {\n\tsome o in input\n\to.k\n} else := 5\n\nx := y if y := q with input as [{"k": true}]', NAMED),
    ("default q := 9\n\nq := input[1].name if { input[1].k } else := input[7]\n\nx := q", NAMED),
    ("a.b := o.name if { some o in input; o.k; not o.name } else := 4\n\nx := a", NAMED),
]
REFERENCE_HEADS = [
    ("a.b[y] := o.name if { some o in input; y := o.k }\n\nx := a", NAMED),
    ("a.b[o.k] := o.name if { some o in input }\n\nx := a", NAMED),
    ("a[o.k][y] := o.name if { some y, o in input }\n\nx := a", NAMED),
    ("a.b contains o.name if { some o in input }\n\nx := a", NAMED),
    ('q contains o.name if { some o in input }\n\nx := y if y := q with input as [{"k": true}, {"name": "z"}]', NAMED),
    ('q[o.k] := o.name if { some o in input }\n\nx := y if y := q with input as [{"k": 1}, {"k": 2, "name": "z"}]', 0),
]


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(("rule", "document"), ELSE_CHAINS + REFERENCE_HEADS)
def test_an_else_or_a_reference_heads_value_undefined_for_one_answer_leaves_out_only_that_answer(
    rule: str, document: Any, strict: bool
) -> None:
    """An `else` chain: OPA goes on to the `else` when the first value is undefined for every answer
    (regorus: undefined; a function's call undefined, or `true` for `f(o) if {...} else := o.zz`); a rule
    whose reference holds a variable (`a.b[y] := o.name`): regorus erred ("not an object"). The others
    (an `else` whose body fails, `if expr` bodies, partial sets and objects under `with`) guard."""
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", document, strict=strict)
    assert mine == opa
