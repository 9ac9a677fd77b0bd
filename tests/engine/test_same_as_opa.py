"""Rego that must answer as OPA, as data: each case of same_as_opa.yaml evaluated by the embedded engine and
by OPA's own evaluator (tests/opa_oracle.py), the two answers equal.

The cases are written as OPA's conformance cases (a note, modules, a query, an input), but the answer wanted
is whatever OPA answers, computed when the test runs. A group's cases differ in one place: `{case}` in its
first module stands for each case's text in turn (a case is that text, or a mapping of `case` and its own
`input`); `defined: x` asks more, that OPA's answer holds the rule x (the form under test is evaluated, not
undefined on both sides). Cases checked otherwise (refusals with their messages, fails-closed answers, the
regorus answer a rewrite fixes) stay beside their code's tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from opa_oracle import OracleEngine, answer

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

CASES = Path(__file__).with_name("same_as_opa.yaml")


@dataclass(frozen=True)
class Case:
    note: str
    modules: tuple[str, ...]
    query: str
    input: Any
    defined: str | None


GROUP_KEYS = {"note", "modules", "query", "input", "defined", "cases"}
CASE_KEYS = {"case", "input"}


def read_cases(path: Path = CASES) -> list[Case]:
    """Each group's cases, its first module's `{case}` replaced by the case's text. A key misspelt, or a
    case's text with no `{case}` to go to (or the reverse), is an error: such a case would test nothing."""
    cases = []
    for group in yaml.safe_load(path.read_text())["groups"]:
        assert set(group) <= GROUP_KEYS, f"{group['note']}: unknown keys {set(group) - GROUP_KEYS}"
        first, *others = group["modules"]
        for each in group["cases"]:
            one = each if isinstance(each, dict) else {"case": each}
            assert set(one) <= CASE_KEYS, f"{group['note']}: a case's unknown keys {set(one) - CASE_KEYS}"
            assert ("case" in one) == ("{case}" in first), f"{group['note']}: {one} and its module disagree"
            module = first.replace("{case}", one["case"]) if "case" in one else first
            cases.append(
                Case(
                    group["note"],
                    (module, *others),
                    group.get("query", "data.p"),
                    one.get("input", group.get("input")),
                    group.get("defined"),
                )
            )
    return cases


@pytest.mark.parametrize("case", read_cases(), ids=lambda case: case.note)
def test_answers_as_opa(case: Case) -> None:
    bundle = Bundle(tuple(Module("p.rego" if i == 0 else f"o{i}.rego", text) for i, text in enumerate(case.modules)))
    expected = answer(OracleEngine(bundle), case.query, case.input)
    assert answer(EmbeddedEngine(bundle), case.query, case.input) == expected
    if case.defined:
        assert isinstance(expected, dict) and case.defined in expected, expected
