"""net.cidr_contains_matches and graph.reachable(_paths) beside OPA's evaluator (tests/opa_oracle.py), on every
operand shape OPA reads: strings, arrays (of strings or of [cidr, ...] tuples), sets and objects, members that
are no strings, graphs whose edges are no arrays or sets. On the code before, 9 cases of CASES differed from OPA
in each mode (the fuzzer's two among them) and the random cidr test failed; the rest guard the shapes around."""

from __future__ import annotations

import random
from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

MATCHES = "x := net.cidr_contains_matches(input[0], input[1])"
PATHS = "x := graph.reachable_paths(input[0], input[1])"
CASES = [
    # the first operand's array members are read for their first element, whatever its type: no pair, no check
    (MATCHES, [[[1], [2]], 0]),
    (MATCHES, [[[1], [2]], []]),
    (MATCHES, [[[1], [2]], ["10.0.0.1"]]),  # a pair: its CIDR is no string, an error
    (MATCHES, [{"a": ["10.0.0.0/8", 1], "b": "fd00::/8"}, {"x": ["10.1.2.3", None], "y": "fd00::1"}]),
    (MATCHES, [[], [[]]]),  # the second operand is never read: no error
    (MATCHES, [["10.0.0.0/8"], [[]]]),  # ... unless there is a first CIDR
    (MATCHES, [["10.0.0.0/8"], [{"a": 1}]]),
    (MATCHES, [["10.0.0.0/8"], 5]),  # no members: nothing compared
    (MATCHES, [["10.0.0.0/8"], ["x"]]),  # neither an address nor a CIDR
    (MATCHES, [["10.0.0.1"], ["10.0.0.1"]]),  # the first must be a CIDR: an address is an error
    (MATCHES, [["10.0.0.0/255.0.0.0"], ["10.0.0.1"]]),  # Go reads no netmask after the slash
    (MATCHES, [["::ffff:10.0.0.0/104"], ["10.1.2.3", "10.0.0.0/8", "::ffff:10.1.2.3"]]),  # IPv4-mapped: as IPv4
    (MATCHES, [["10.0.0.0/8"], ["::ffff:10.1.2.3", "fe80::1%eth0"]]),
    (MATCHES, [["fd00::/8"], {"a": ["fd00::1"], "b": ["fd00::/7"]}]),
    ('x := net.cidr_contains_matches({"10.0.0.0/8", "fd00::/8"}, {"10.1.2.3", "fd00::2", "fd01::/16"})', None),
    (MATCHES, [{"a": 1}, 0]),  # an object's values as an array's members: 1 is no string nor array
    # graph.reachable_paths: edges neither an array nor a set end the path at their node; nodes of any type
    (PATHS, [{"a": {"b": [1, 2]}, "c": "d"}, ["a", "b"]]),
    (PATHS, [{"a": ["b", 1], "b": "x", "1": [None]}, ["a"]]),
    (PATHS, [{"a": [1, "b"], "b": None}, ["a"]]),
    (PATHS, [{"a": [["a"], {"b": 1}, "a"]}, ["a"]]),  # an array or object node outside the graph; a cycle
    (PATHS, [{"a": ["b"], "b": ["c"], "c": ["a", "d"]}, ["a", "c", "z"]]),
    (PATHS, [{"a": []}, ["a", "a"]]),
    ('x := graph.reachable_paths({1: [null], null: ["t", 1.0], "t": []}, {1, null})', None),
    ('x := graph.reachable_paths({"a": {"b", "c"}, "b": {"c"}}, {"a"})', None),
    (PATHS, [{"a": ["b"]}, "a"]),  # the second operand must be an array or a set
    (PATHS, [["a"], ["a"]]),
    ("x := graph.reachable(input[0], input[1])", [{"a": {"b": [1, 2]}, "c": "d", "1": ["a"]}, ["a", "c", 1]]),
    ('x := graph.reachable({1: [null], null: ["t", 1.0], "t": []}, {1, null})', None),
]


@pytest.mark.parametrize(("rule", "input"), CASES, ids=str)
@pytest.mark.parametrize("strict", [True, False], ids=["strict", "default"])
def test_answers_as_opa(rule: str, input: Any, strict: bool) -> None:
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", input, strict=strict)
    assert mine == opa


def _value(rng: random.Random, leaves: list[str], depth: int = 0) -> str:
    """A Rego literal: leaves, arrays, objects, and sets of leaves (regorus's binding hands Python no set
    holding a collection: "unhashable type", an error where OPA may answer)."""
    roll = rng.random()
    if depth > 2 or roll < 0.4:
        return rng.choice(leaves)
    items = [_value(rng, leaves, depth + 1) for _ in range(rng.randint(0, 3))]
    if roll < 0.65:
        return f"[{', '.join(items)}]"
    if roll < 0.8:
        members = [i for i in items if i in leaves]
        return f"{{{', '.join(members)}}}" if members else "set()"
    return "{" + ", ".join(f"{rng.choice(leaves)}: {item}" for item in items if not item.startswith("[")) + "}"


def _differences(builtin: str, leaves: list[str], typed: str, seed: int) -> list[tuple[str, Any, Any]]:
    """Random operand pairs for `builtin` (strict builtin errors; CASES hold the default mode), each picked
    by the input from an array that also holds `typed` (operands the checker accepts: it refuses a module
    whose operands can never fit)."""
    rng = random.Random(seed)
    rules = [
        f"r{n} := {builtin}(p[input.i], p[input.j]) if p := [{_value(rng, leaves)}, {_value(rng, leaves)}, {typed}]"
        for n in range(150)
    ]
    bundle = Bundle((Module("p.rego", "package p\n\n" + "\n\n".join(rules) + "\n"),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    return [
        (rule, ours, theirs)
        for n, rule in enumerate(rules)
        if (ours := opa_oracle.answer(mine, f"data.p.r{n}", {"i": 0, "j": 1}))
        != (theirs := opa_oracle.answer(opa, f"data.p.r{n}", {"i": 0, "j": 1}))
    ]


def test_cidr_contains_matches_answers_as_opa_on_random_operands() -> None:
    cidrs = ['"10.0.0.0/8"', '"10.1.2.3"', '"::1"', '"fd00::/8"', '"x"', '"1.2.3.4/33"', '"::ffff:10.0.0.1"']
    assert not _differences("net.cidr_contains_matches", [*cidrs, "1", "null", "true"], '"x"', 1)


@pytest.mark.parametrize("builtin", ["graph.reachable", "graph.reachable_paths"])
def test_graphs_answer_as_opa_on_random_graphs(builtin: str) -> None:
    assert not _differences(builtin, ['"a"', '"b"', '"c"', "1", "null"], '{"a": ["b"]}, ["a"]', 2)
