"""Builtins beside OPA's evaluator (tests/opa_oracle.py): trace, indexof_n, time.add_date,
time.parse_duration_ns, sprintf, json.marshal, json.unmarshal, semver, base64.is_valid, net.cidr_is_valid,
net.cidr_contains_matches, object.subset, json.patch and format_int. Every case of CASES differed from OPA, or
answered where OPA errs, on the code before."""

from __future__ import annotations

import random
from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

SUBSET = "x := object.subset(input[0], input[1])"
CASES = [
    ('x := trace("note")', None),  # true, regorus's value was the note
    ("x := trace(input)", 1),
    ('x := indexof_n("a,b", "")', None),  # an error in OPA, regorus answered every index
    ('x := indexof_n("aaa", "aa")', None),
    ('x := indexof_n("日本日本", "本")', None),
    # time.add_date: Go's AddDate normalises the fields
    ("x := time.add_date(-1, 2, -1, 3)", None),
    ("x := time.add_date(input, 0, 1, 0)", 1706659200000000000),  # January 31 + 1 month: March 2
    ("x := time.add_date(input, 1, 0, 0)", 1709164800000000000),  # February 29 + 1 year: March 1
    ("x := time.add_date(input, 0, 0, 1)", [1711846800000000000, "Europe/Paris"]),  # over a DST change
    ("x := time.add_date(input, 300, 0, 0)", 0),  # past 2262: outside int64 nanoseconds, an error
    ("x := time.add_date(input, 0, 0, 0)", 1.5),
    # sprintf: a bad verb prints the operand under the directive's flags, width and precision (Go's badVerb)
    ('x := sprintf("%.2f", [{"a": 1}, {"b": 2}])', None),
    ('x := sprintf("%5d|%-6.1s|%+s", ["ab", 2.5, 3])', None),
    ('x := sprintf("%.2d", [3.14159])', None),
    # %+v and %#v are Go's plusV and sharpV: no sign, a string quoted
    ('x := sprintf("%+v|%+.2v|%#v|%#v", [3, 3.14159, "a", [1]])', None),
    # an integer with a precision is padded with spaces, a string's %x precision counts bytes
    ('x := sprintf("%05.0d|%09.5d|%.1x|%-6.2X", [0, 12345678, "é", "é日"])', None),
    # %q escapes the runes Go does not print: C1 controls, format characters, spaces, private use (regokite refused)
    ('x := sprintf("%q|%#v", [input, input])', "\x85\xa0\u200b\u2028\ue000\U000e0001é"),
    # semver: a leading v, leading zeros, empty pre-release or metadata; is_valid of a non-string is false
    ("x := semver.is_valid(input)", "v1.2.3"),
    ("x := semver.is_valid(input)", 1),
    ("x := [semver.is_valid(input)]", []),
    ('x := semver.compare(input, "1.2.3")', "v1.2.3"),
    # time.parse_duration_ns: OPA 1.20 reads days, weeks and 365-day years too (regorus: "unknown unit")
    ("x := time.parse_duration_ns(input)", "1.5d2h"),
    ("x := time.parse_duration_ns(input)", "-1y1w"),
    # json.marshal: a key that is no string is ordered by its JSON text, as Go's map[string] (regorus: as values)
    ('x := json.marshal({9: "a", 10: "b", "a": {{}: 1, {"name": null}: 2}})', None),
    ('x := json.marshal_with_options({true: 1, "a": 2, null: 3, 1: 4, [1]: 5}, {"pretty": true})', None),
    # base64.is_valid and net.cidr_is_valid of a non-string are false (regorus erred)
    ("x := base64.is_valid(input)", 1),
    ("x := [base64.is_valid(input), base64.is_valid(input.a)]", {"a": "YQ=="}),
    ("x := net.cidr_is_valid(input)", ["10.0.0.0/8"]),
    ('x := [net.cidr_is_valid(input.a), net.cidr_is_valid("10.0.0.0/33")]', {"a": "10.0.0.0/8"}),
    # net.cidr_contains_matches parses CIDRs only when there is a pair to compare (regokite erred first)
    ("x := net.cidr_contains_matches(input[0], input[1])", ["", -0.5]),
    ("x := net.cidr_contains_matches(input[0], input[1])", [["x"], []]),
    ("x := net.cidr_contains_matches(input[0], input[1])", [-1, [[1], [2]]]),
    # object.subset: two objects, sets, arrays, or an array and a set; anything else an error
    (SUBSET, [-2.25, "a"]),
    (SUBSET, [{"a": 1}, [1]]),
    ("x := object.subset([], set())", None),  # OPA counts the array's members: none holds nothing
    ("x := object.subset([1, 1], {1, 2})", None),  # ... duplicates included
    ("x := object.subset([], [])", None),  # regorus panicked
    ("x := object.subset([1], [])", None),
    ('x := object.subset({"a": [1, 2]}, {"a": {1}})', None),  # no array-and-set inside objects
    ('x := object.subset({"a": {"b": [1, 2, 3], "c": {1, 2}}}, {"a": {"b": [2, 3], "c": {2}}})', None),
    ("x := object.subset([1, 2, 3], [3, 2])", None),
    (SUBSET, [[True], [1]]),
    ("x := object.subset({true, 1}, {1})", None),
    ('x := object.subset({"a": {[1], {"b": {2}}}}, {"a": {{"b": {2}}}})', None),  # a set of composites
    # json.patch: every patch that does not apply is OPA's error (regorus: undefined)
    ('x := json.patch(null, [{"op": "bad"}])', None),
    ('x := json.patch(input, [{"op": "remove", "path": "/x"}])', {"a": 1}),
    ('x := json.patch(input, [{"op": "test", "path": "/a", "value": 2}])', {"a": 1}),
    ('x := json.patch(input, [{"op": "add", "path": "/b/c", "value": 1}])', {"a": 1}),
    ('x := json.patch({"s": {[1], 2}}, [{"op": "add", "path": "/t", "value": false}])', None),
    ('x := json.patch(input, [{"op": "replace", "path": "", "value": false}])', {"a": 1}),
    # format_int truncates toward zero: a number between -1 and 0 is "0" (regorus wrote "-0")
    ("x := format_int(input, 2)", -0.5),
    ("x := [format_int(-0.9, 10), format_int(-1e-300, 16), format_int(-1.5, 2), format_int(-255.9, 16)]", None),
    ("x := format_int(input, 3)", -0.5),
    ("x := format_int(input, 10)", "1"),
]


@pytest.mark.parametrize(("rule", "input"), CASES, ids=str)
def test_builtin_answers_as_opa(rule: str, input: Any) -> None:
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", input)
    assert mine == opa


def test_add_date_answers_as_opa_on_random_instants_and_zones() -> None:
    rng = random.Random(5)
    bundle = Bundle((Module("p.rego", "package p\n\nx := time.add_date(input[0], input[1], input[2], input[3])\n"),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    zones = ["", "UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "Nope/Zone", 3]
    different = []
    for _ in range(400):
        instant: Any = rng.choice([0, -1, 1700000000000000000, rng.randint(-(2**63), 2**63 - 1), 1e18, 0.5, "x"])
        if rng.random() < 0.4:
            instant = [instant, rng.choice(zones)]
        added = [rng.choice([0, 1, -1, 12, -13, 31, -400, rng.randint(-1000, 1000), 0.5]) for _ in range(3)]
        ours, theirs = (opa_oracle.answer(engine, "data.p.x", [instant, *added]) for engine in (mine, opa))
        if ours != theirs:
            different.append(([instant, *added], ours, theirs))
    assert not different


def test_sprintf_with_flags_widths_and_precisions_answers_as_opa() -> None:
    """Random directives over numbers, strings and collections; a directive regokite refuses (`%x` of a
    fraction) is an error, never a guess."""
    rng = random.Random(11)
    bundle = Bundle((Module("p.rego", "package p\n\nx := sprintf(input[0], input[1])\n"),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    values = [0, 0.5, 3.14159, 123456.789, 9.995, 0.000123456, 100, -7, "abcdef", "é日本", [1, "a"], {"a": 1}, None]
    directives = ["%.{p}v", "%.{p}g", "%.{p}d", "%{w}.{p}s", "%-{w}.{p}x", "%+.{p}v", "%0{w}.{p}d", "%{w}.{p}q"]
    different = []
    for _ in range(300):
        directive = rng.choice(directives).format(p=rng.randint(0, 8), w=rng.randint(1, 12))
        operands = [directive, [rng.choice(values), rng.choice(["ab", 5])]]
        ours, theirs = (opa_oracle.answer(engine, "data.p.x", operands) for engine in (mine, opa))
        if ours != theirs and ours != "<error>":
            different.append((operands, ours, theirs))
    assert not different


def test_sprintf_plain_directives_answer_as_opa() -> None:
    """%s, %d and %v without flags (formatting.sprintf's path without padding, a template read once) over
    every kind of operand, the 64-bit edges, missing and extra operands, a template used twice."""
    twice = "package p\n\nx := [sprintf(input[0], input[1]), sprintf(input[0], input[1])]\n"
    bundle = Bundle((Module("p.rego", twice),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    values = ["ab", "é日", "", 0, -7, 2**63 - 1, -(2**63), 0.5, -1.0, 1.5e-7, True, None, [1, "a"], {"a": [1]}]
    different = []
    for template in ["%s", "%d", "%v", "%s-%d", "x%vy%sz", "%v%v", "%%%s%", "%d %s %v"]:
        for value in values:
            for operands in ([value], [value, value], [value, "t", 3], []):
                ours, theirs = (opa_oracle.answer(engine, "data.p.x", [template, operands]) for engine in (mine, opa))
                if ours != theirs:
                    different.append((template, operands, ours, theirs))
    assert not different


def _value(rng: random.Random, depth: int = 0) -> str:
    """A Rego literal: scalars (`true` beside `1`, `1.0`), arrays, sets and objects, nested."""
    roll = rng.random()
    if depth > 2 or roll < 0.35:
        return rng.choice(["1", "1.0", "2", '"a"', '"b"', "true", "false", "null", "0"])
    items = [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.55:
        return f"[{', '.join(items)}]"
    if roll < 0.75:
        return f"{{{', '.join(items)}}}" if items else "set()"
    return "{" + ", ".join(f'"{rng.choice("abc")}": {item}' for item in items) + "}"


def test_object_subset_answers_as_opa_on_random_values() -> None:
    """Nested objects, sets (of composites too: Python could not receive them) and arrays, every pair of types
    (indexed by the input: OPA's type checker would refuse a literal pair of the wrong types)."""
    rng = random.Random(17)
    rules: list[str] = []
    while len(rules) < 150:
        n, first = len(rules), _value(rng)
        second = _value(rng) if rng.random() < 0.6 else first.replace("1", "2", 1)
        if not all(value[0] in "[{s" for value in (first, second)):
            continue  # a scalar: OPA's type checker refuses the module (the input's scalars are in CASES)
        rules.append(f"r{n} := object.subset(p[input.i], p[input.j]) if p := [{first}, {second}]")
    bundle = Bundle((Module("p.rego", "package p\n\n" + "\n\n".join(rules) + "\n"),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    different = [
        (rule, ours, theirs)
        for n, rule in enumerate(rules)
        if (ours := opa_oracle.answer(mine, f"data.p.r{n}", {"i": 0, "j": 1}))
        != (theirs := opa_oracle.answer(opa, f"data.p.r{n}", {"i": 0, "j": 1}))
    ]
    assert not different


def test_semver_answers_as_opa_on_random_versions() -> None:
    """(the leading zeros and empty sections: tests/engine/test_opa_conformance.py's semver-strict cases)"""
    rng = random.Random(3)
    bundle = Bundle(
        (Module("p.rego", "package p\n\nv := semver.is_valid(input[0])\n\nc := semver.compare(input[0], input[1])\n"),)
    )
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    # no leading zero nor empty section: OPA's conformance suite pins them invalid, OPA 1.20.2 took them
    parts = ["0", "1", "10", "v1", "+1", "-1", "", "a", "9223372036854775808", "2"]
    labels = ["", "-a", "-1", "-0a", "-a.1", "-1.a", "-a..b", "+b", "+01", "+b.c", "-rc.1+m", "-é", "-a-b", "-1.2.3"]
    different = []
    for _ in range(300):
        versions = [
            rng.choice(["", "v"])
            + ".".join(rng.choice(parts) for _ in range(rng.choice([2, 3, 3, 3, 4])))
            + rng.choice(labels)
            for _ in range(2)
        ]
        operands: list[Any] = versions if rng.random() < 0.9 else [rng.choice([1, None, ["1.2.3"]]), versions[1]]
        for ref in ("data.p.v", "data.p.c"):
            ours, theirs = (opa_oracle.answer(engine, ref, operands) for engine in (mine, opa))
            if ours != theirs:
                different.append((ref, operands, ours, theirs))
    assert not different


def test_parse_duration_answers_as_opa_on_random_durations() -> None:
    rng = random.Random(7)
    bundle = Bundle((Module("p.rego", "package p\n\nx := time.parse_duration_ns(input)\n"),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    numbers = [
        "0",
        "1",
        "1.5",
        ".5",
        "5.",
        ".",
        "",
        "9223372036854775807",
        "106751",
        "0.000000001",
        "1.99999999999999999999",
    ]
    units = ["ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h", "d", "w", "y", "D", "", "x", "mo"]
    different = []
    for _ in range(400):
        text = rng.choice(["", "", "-", "+"]) + "".join(
            rng.choice(numbers) + rng.choice(units) for _ in range(rng.randint(1, 3))
        )
        ours, theirs = (opa_oracle.answer(engine, "data.p.x", text) for engine in (mine, opa))
        if ours != theirs:
            different.append((text, ours, theirs))
    assert not different


@pytest.mark.parametrize("rule", ["x := yaml.unmarshal(input)", "x := [yaml.unmarshal(input)]"])
def test_yaml_unmarshal_of_several_documents_stays_an_error_in_opas_default_mode(rule: str) -> None:
    """OPA answers the first document, regorus erred (so OPA's default evaluation made it undefined): a refusal."""
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", "a: 1\n---\nb: 2", strict=False)
    assert (mine, opa != "<error>") == ("<error>", True)


@pytest.mark.parametrize("text", ["1e400", "[1, 123456789012345678901234567890]", '"\\ud800"'])
def test_json_unmarshal_of_what_only_go_reads_stays_an_error_in_opas_default_mode(text: str) -> None:
    """OPA answers; regokite cannot hold the value: a refusal, never the undefined of a builtin error (OPA's
    default evaluation), nor a rounded number (regorus read 123456789012345678901234567890 as a double)."""
    mine, opa = opa_oracle.both("package p\n\nx := json.unmarshal(input)\n", text, strict=False)
    assert (mine, opa != "<error>") == ("<error>", True)


def test_json_unmarshal_answers_as_opa() -> None:
    for text in ['{"a": [1, 2.5, null, "\\u00e9"], "b": 9223372036854775808}', "-0", "tru", "[1,]"]:
        for strict in (True, False):
            mine, opa = opa_oracle.both("package p\n\nx := json.unmarshal(input)\n", text, strict=strict)
            assert mine == opa, (text, strict)


@pytest.mark.parametrize(("template", "operands"), [("%q", [1, 2]), ("%*d", [3, 1]), ("%q", ["\U0001f6dc"])])
def test_sprintf_of_what_regokite_does_not_format_stays_an_error_in_opas_default_mode(
    template: str, operands: list[Any]
) -> None:
    """A refusal (was a builtin error, so OPA's default evaluation made it undefined where OPA answers). U+1F6DC is
    unassigned in Python 3.11's Unicode tables (14.0), printable in Go 1.24's (15.0)."""
    mine, opa = opa_oracle.both("package p\n\nx := sprintf(input[0], input[1])\n", [template, operands], strict=False)
    assert (mine, opa != "<error>") == ("<error>", True)
