"""trace, indexof_n, time.add_date, sprintf, object.subset and json.patch beside OPA's evaluator
(tests/opa_oracle.py): every case of CASES differed from OPA, or answered where OPA errs, on the code before."""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

CASES = [
    ('x := trace("note")', None),  # true, regorus's value was the note
    ("x := trace(input)", 1),
    ('x := indexof_n("a,b", "")', None),  # an error in OPA, regorus answered every index
    ('x := indexof_n("aaa", "aa")', None),
    ('x := indexof_n("日本日本", "本")', None),
]


@pytest.mark.parametrize(("rule", "input"), CASES, ids=str)
def test_builtin_answers_as_opa(rule: str, input: Any) -> None:
    mine, opa = opa_oracle.both(f"package p\n\n{rule}\n", input)
    assert mine == opa
