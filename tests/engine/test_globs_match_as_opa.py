"""regex.globs_match beside OPA's evaluator (tests/opa_oracle.py) on random glob pairs of its language
(sets, ranges, escapes, `+`, `*`, malformed ones); refused at load on the code before."""

from __future__ import annotations

import random

import opa_oracle

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

ATOMS = ["a", "b", "c", ".", "[ab]", "[a-c]", "[0-9]", "\\.", "\\[", "?", "[]", "[b-]", "]", "\\", "["]
RULE = "package p\n\nx := regex.globs_match(input[0], input[1])\n"


def _glob(rng: random.Random) -> str:
    return "".join(rng.choice(ATOMS) + rng.choice(["", "", "+", "*", "**", "+*"]) for _ in range(rng.randint(0, 5)))


def test_globs_match_answers_as_opa() -> None:
    rng = random.Random(7)
    pairs = [[_glob(rng), _glob(rng)] for _ in range(300)] + [["", ""], ["a", ""], ["[a-z]+", "[0-9]*"]]
    bundle = Bundle((Module("p.rego", RULE),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    different = [
        (pair, mine_answer, opa_answer)
        for pair in pairs
        if (mine_answer := opa_oracle.answer(mine, "data.p.x", pair))
        != (opa_answer := opa_oracle.answer(opa, "data.p.x", pair))
    ]
    assert not different
