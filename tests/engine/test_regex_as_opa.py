"""The regex.* builtins beside OPA's evaluator (tests/opa_oracle.py): Go's regexp, where regorus read
patterns as Rust's regex crate. Every case of CASES differed (or answered where OPA errs) on the code before."""

from __future__ import annotations

import random
from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

MATCH = "x := regex.match(input[0], input[1])"
CASES = [
    # Go's \d, \w, \s and \b are ASCII; Rust's Unicode
    (MATCH, ["\\d", "٣"]),
    (MATCH, ["\\w", "é"]),
    ("x := regex.split(input[0], input[1])", ["\\s", "a\u00a0b"]),
    ("x := regex.template_match(input[0], input[1], `{`, `}`)", ["urn:{\\d+}", "urn:٣"]),
    # syntax Go reads otherwise: (?x) and a{1001} refused, \Q...\E and a `[` inside a class taken
    (MATCH, ["(?x)a b", "ab"]),
    ("x := regex.is_valid(input)", "a{1001}"),
    ("x := regex.is_valid(input)", "\\Qa.b\\E"),
    (MATCH, ["[[a]", "["]),
    ("x := regex.is_valid(input)", "\\C"),
    ("x := regex.is_valid(input)", "(?P<é>a)"),
    # \p{...} as Go 1.25 looks names up: any case, `_` dropped, one-word scripts only, long category names
    ("x := regex.is_valid(input)", "\\p{Old_Italic}"),
    (MATCH, ["\\p{latin}", "é"]),
    (MATCH, ["\\p{Uppercase_Letter}", "É"]),
    (MATCH, ["[\\p{ascii}]", "~"]),
    # an invalid pattern is an error in OPA (regex.replace was undefined), so is a longer delimiter
    ("x := regex.replace(input[0], input[1], input[2])", ["a,b", "[", "a"]),
    ('x := regex.template_match("urn:foo:<<.*>>", "urn:foo:bar", "<<", ">>")', None),
    ('x := regex.template_match("urn:{x}", "urn:x", "é", "}")', None),
    # Go's loops: no empty match inside a character (RE2 reads bytes), `$name` expansion
    ("x := regex.find_n(input[0], input[1], -1)", ["\\B", "b😀a"]),
    ("x := regex.replace(input[0], input[1], input[2])", ["xab", "(?P<g>a)(b)", "[${g}|$2|$gx|$$|$]"]),
]


@pytest.mark.parametrize(("rule", "input"), CASES, ids=str)
def test_regex_builtins_answer_as_opa(rule: str, input: Any) -> None:
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", input)
    assert mine == opa


REFUSED = [
    # Go's \p{C} and \p{Cn} hold the unassigned characters, which RE2 has no class for
    (MATCH, ["\\p{Cn}", "\u0378"]),
    (MATCH, ["\\p{Other}", "\u0378"]),
    # nesting Go's height check may take or refuse
    ("x := regex.is_valid(input)", "(" * 400 + ")" * 400),
]


@pytest.mark.parametrize(("rule", "input"), REFUSED, ids=str)
def test_what_re2_cannot_read_as_go_fails_closed(rule: str, input: Any) -> None:
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", input)
    assert mine == "<error>" != opa


ATOMS = ["a", "é", "日", "😀", ".", "\\d", "\\w", "\\s", "\\b", "\\B", "^", "$", "[a-c]", "[^a]", "[[:alpha:]]"]
ATOMS += ["\\pL", "\\p{Greek}", "\\PL", "\\p{^L}", "\\z", "x", " ", "\\n", "\\p{lu}", "\\Q.*\\E", "[]a]", "("]
QUANTIFIERS = ["", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,2}", "{2,1}"]
TEXTS = ["", "a", "ab", "abc", "é", "aé b", "日本", "a\nb", "Ab", "x-y", "😀a", "12 34", "a.b", "ǅ", "K", "\u212a"]
CALLS = {
    "regex.is_valid(input[0])": [],
    "regex.match(input[0], input[1])": [],
    "regex.find_n(input[0], input[1], input[2])": [-1, 0, 1],
    "regex.find_all_string_submatch_n(input[0], input[1], input[2])": [-1, 2],
    "regex.split(input[0], input[1])": [],
    "regex.replace(input[1], input[0], input[2])": ["x", "$1", "${g1}", "$$", "$", "$01", "[$0]", "${"],
}


def _pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(0, 4)):
        if depth < 2 and rng.random() < 0.2:
            kind = rng.choice(["(", "(?:", "(?P<g1>", "(?i:"])
            parts.append(kind + _pattern(rng, depth + 1) + ")" + rng.choice(QUANTIFIERS))
        elif depth < 2 and rng.random() < 0.1:
            parts.append(_pattern(rng, depth + 1) + "|" + _pattern(rng, depth + 1))
        else:
            parts.append(rng.choice(ATOMS) + rng.choice(QUANTIFIERS))
    return "".join(parts)


def test_random_patterns_answer_as_opa() -> None:
    """Random patterns of Go's syntax (classes, anchors, groups, lazy and bounded repeats, malformed ones)
    on text beyond ASCII, through every regex builtin but template_match (below)."""
    rng = random.Random(41)
    module = "package p\n\n" + "".join(f"r{i} := {call}\n" for i, call in enumerate(CALLS))
    bundle = Bundle((Module("p.rego", module),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    different = []
    for _ in range(250):
        i = rng.randrange(len(CALLS))
        third = list(CALLS.values())[i]
        text = "".join(rng.choice(TEXTS) for _ in range(rng.randint(0, 3)))
        input = [_pattern(rng), text, rng.choice(third) if third else None]
        ours, theirs = (opa_oracle.answer(engine, f"data.p.r{i}", input) for engine in (mine, opa))
        if ours != theirs:
            different.append((list(CALLS)[i], input, ours, theirs))
    assert not different


def test_random_templates_answer_as_opa() -> None:
    """OPA caches a template's regexp under the template's text alone, in the cache regex.match uses too:
    a template seen before (with other delimiters, or as a pattern) answers as it was compiled then (an
    OPA bug; regokite answers as a fresh OPA). Each template here is new to the process."""
    rng = random.Random(43)
    pieces = ["a", "{", "}", "<", ">", "x:", "{\\d+}", "<.*>", "{[a-z]}", "é", "<\\w>", "{a|b}", "{(x)}", "{[}"]
    rule = "x := regex.template_match(input[0], input[1], input[2], input[3])"
    bundle = Bundle((Module("p.rego", f"package p\n\n{rule}\n"),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    different = []
    for n in range(250):
        tag = f"#{n}-{rng.random()}"
        template = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) + tag
        text = "".join(rng.choice([*TEXTS, "x:b", "12"]) for _ in range(rng.randint(0, 3))) + tag
        input = [template, text, rng.choice(["{", "<", "é", "{{"]), rng.choice(["}", ">", "}}"])]
        ours, theirs = (opa_oracle.answer(engine, "data.p.x", input) for engine in (mine, opa))
        if ours != theirs:
            different.append((input, ours, theirs))
    assert not different
