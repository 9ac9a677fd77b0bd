"""OPA's whole conformance suite through regokite (tests/engine/opa_conformance.py runs and judges it).

The rules: no case may answer otherwise than OPA, nor answer where OPA errs; a case may fail
closed (refuse where OPA answers) only when opa_conformance_listed.yaml lists it, under a group
whose `refusal` pattern its refusal matches; a listed case that passes fails the run, so the list
shrinks as fixes land. The per-class counts print with the run.
"""

from __future__ import annotations

import pytest

from engine import opa_conformance as conformance
from engine.opa_conformance import ANSWERED, DIFFERENT, FAIL_CLOSED, PASS, Verdict

# Differences found when the harness landed, each owned by a branch that is fixing it (see
# the branch notes). Only ever shrinks: a case here that passes fails the run (strict xfail).
UNTIL_FIXED: dict[str, str] = {}


@pytest.fixture(scope="module")
def verdicts() -> dict[str, Verdict]:
    assert conformance.CASES.is_dir(), f"OPA's conformance cases are not at {conformance.CASES}"
    return {v.case.id: v for v in conformance.run_all()}


def test_print_the_counts_per_class(verdicts: dict[str, Verdict], capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print("\nOPA conformance, " + conformance.summary(list(verdicts.values())).replace("\n", "; "))


def _lines(verdicts: list[Verdict]) -> str:
    return "\n".join(f"{v.kind}: {v.case.id} {v.case.note}\n    {v.detail[:300]}" for v in verdicts)


def test_no_case_answers_otherwise_than_opa(verdicts: dict[str, Verdict]) -> None:
    wrong = [v for v in verdicts.values() if v.kind in (DIFFERENT, ANSWERED) and v.case.id not in UNTIL_FIXED]
    assert not wrong, f"{len(wrong)} cases answer otherwise than OPA (never allowed):\n{_lines(wrong)}"


@pytest.mark.xfail(strict=True, reason="a difference being fixed (UNTIL_FIXED): remove it once it passes")
@pytest.mark.parametrize("case_id", sorted(UNTIL_FIXED))
def test_differences_being_fixed(verdicts: dict[str, Verdict], case_id: str) -> None:
    assert verdicts[case_id].kind == PASS, verdicts[case_id].detail


def test_a_case_fails_closed_only_where_listed(verdicts: dict[str, Verdict]) -> None:
    listed = conformance.listed_ids(conformance.read_listed())
    refused = [v for v in verdicts.values() if v.kind == FAIL_CLOSED]
    unlisted = [v for v in refused if v.case.id not in listed]
    assert not unlisted, (
        f"{len(unlisted)} cases fail closed without being listed in {conformance.LISTED.name} (fix them, or list "
        f"them with the reason: python3 -m tests.engine.opa_conformance --update):\n{_lines(unlisted)}"
    )
    otherwise = [v for v in refused if not listed[v.case.id].matches(v.detail)]
    assert not otherwise, f"{len(otherwise)} listed cases fail closed for another reason:\n{_lines(otherwise)}"


def test_every_listed_case_still_fails_closed(verdicts: dict[str, Verdict]) -> None:
    listed = conformance.listed_ids(conformance.read_listed())
    unknown = sorted(set(listed) - set(verdicts))
    assert not unknown, f"listed cases the suite does not have: {unknown}"
    passing = [verdicts[i] for i in listed if verdicts[i].kind == PASS]
    assert not passing, (
        f"{len(passing)} listed cases pass now: delete them from {conformance.LISTED.name} "
        f"(python3 -m tests.engine.opa_conformance --update):\n{_lines(passing)}"
    )
