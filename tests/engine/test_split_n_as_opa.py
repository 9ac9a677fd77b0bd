"""strings.split_n beside OPA's evaluator (tests/opa_oracle.py); refused at load on the code before."""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

OPERANDS = [
    ["a.b.c.d", ".", 2],
    ["a.b.c.d", ".", -2],
    ["a.b.c.d", ".", 0],
    ["a.b.c.d", ".", 10],
    ["a.b.c.d", ".", -10],
    ["a..b", ".", -9],
    ["", ".", 2],
    ["", "", 1],
    ["abc", "", 2],
    ["a😀bé", "", -3],
    ["abc", "abc", 5],
    ["a.b", ".", 1.5],
    ["a.b", 1, 1],
    [1, ".", 1],
]


@pytest.mark.parametrize("operands", OPERANDS, ids=str)
def test_split_n_answers_as_opa(operands: list[Any]) -> None:
    mine, opa = opa_oracle.both("package p\n\nx := strings.split_n(input[0], input[1], input[2])\n", operands)
    assert mine == opa
