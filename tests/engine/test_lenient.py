"""OPA's default builtin errors (not strict) on the embedded engine (engine.lenient, used by
`regokite test` and by OPA's conformance cases that are not strict): a builtin's error is
undefined, for rules and for queries, and an error OPA's compiler would raise (a call with the
wrong number of operands) is never made undefined.

On the code before: the lenient evaluation answered rules only (no queries), and `regokite test`
reported FAIL (the call made undefined) for `max(xs, m)` where OPA passes and the embedded engine
cannot evaluate the form (now an ERROR).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from regokite.bundle import Bundle, Module
from regokite.engine import UNDEFINED, EngineSettings, open_engine
from regokite.engine.lenient import Lenient
from regokite.errors import EvaluationError
from regokite.testing import Outcome, run_tests

RULES = """package p

bad_regex := regex.match("[", "a")

bad_uuid := uuid.parse(123)

fine := regex.match("^a$", "a")
"""


@pytest.mark.parametrize(("ref", "value"), [("bad_regex", UNDEFINED), ("bad_uuid", UNDEFINED), ("fine", True)])
def test_a_builtin_error_is_undefined_as_in_opa(ref: str, value: Any) -> None:
    bundle = Bundle((Module("p.rego", RULES),))
    lenient = Lenient(bundle, EngineSettings())
    assert lenient.evaluate(f"data.p.{ref}") == value
    answers = lenient.query(f"x := data.p.{ref}")
    assert [a["bindings"]["x"] for a in answers] == ([] if value is UNDEFINED else [value])


def test_strict_the_builtin_error_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="error parsing regexp"):
        open_engine(Bundle((Module("p.rego", RULES),))).evaluate("data.p.bad_regex")


def test_an_arity_error_is_an_error_not_undefined(tmp_path: Path) -> None:
    """max(xs, m) is the output-operand form (it passes, as in OPA); max(xs, m, 5) has an operand too many."""
    (tmp_path / "p_test.rego").write_text(
        "package p_test\n\ntest_max if {\n\tm := 4\n\tmax([1, 2, 3, 4], m)\n}\n\n"
        "test_arity if {\n\tm := 4\n\tmax([1, 2, 3, 4], m, 5)\n}\n"
    )
    output_form, arity = run_tests([str(tmp_path)])
    assert output_form.outcome is Outcome.PASS, output_form
    assert arity.outcome is Outcome.ERROR, arity
    assert "expects 1 argument" in (arity.error or "")
