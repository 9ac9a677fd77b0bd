"""OPA's default builtin errors (not strict) on the embedded engine (engine.lenient, the default of
`open_engine`): a builtin's error is undefined, for rules and for queries, and an error OPA's
compiler would raise (a call with the wrong number of operands) is never made undefined.

On the code before: the lenient evaluation answered rules only (no queries), and `regokite test`
reported FAIL (the call made undefined) for `max(xs, m)` where OPA passes and the embedded engine
cannot evaluate the form (now an ERROR).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from opa_oracle import OracleEngine

from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import ReplicaStore
from regokite.engine import UNDEFINED, EngineSettings, builtin_errors, embedded, open_engine, rewrite
from regokite.errors import EvaluationError, EvaluationRefused
from regokite.testing import Outcome, run_tests

RULES = """package p

bad_regex := regex.match("[", "a")

bad_uuid := uuid.parse(123)

fine := regex.match("^a$", "a")
"""


@pytest.mark.parametrize(("ref", "value"), [("bad_regex", UNDEFINED), ("bad_uuid", UNDEFINED), ("fine", True)])
def test_a_builtin_error_is_undefined_as_in_opa(ref: str, value: Any) -> None:
    bundle = Bundle((Module("p.rego", RULES),))
    lenient = open_engine(bundle, EngineSettings())
    assert lenient.evaluate(f"data.p.{ref}") == value
    answers = lenient.query(f"x := data.p.{ref}")
    assert [a["bindings"]["x"] for a in answers] == ([] if value is UNDEFINED else [value])


def test_strict_the_builtin_error_is_an_error() -> None:
    strict = EngineSettings(strict_builtin_errors=True)
    with pytest.raises(EvaluationError, match="error parsing regexp"):
        open_engine(Bundle((Module("p.rego", RULES),)), strict).evaluate("data.p.bad_regex")


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


# ------------------------------------------------------------------ the places, the data, the reports

NAMESPACED = """package p

labelled contains ns if {
	some ns, o in data.kubernetes.namespaces
	regex.match(input.pattern, o.metadata.labels.team)
}

sizes contains n if {
	some s in input.sizes
	n := units.parse_bytes(s)
}
"""


def namespaces(count: int) -> ReplicaStore:
    store = ReplicaStore()
    for i in range(count):
        store.put("namespaces", {"metadata": {"name": f"ns{i}", "labels": {"team": f"t{i % 3}"}}}, namespaced=False)
    return store


def test_a_new_erring_place_is_undefined_on_the_data_held_not_loaded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine for a new lenient place is a clone of the thread's data engine with new modules: the
    replicated objects are not loaded again (an admission worker holds up to 100,000), and the review that
    met the error is decided on the data it had, as OPA would."""
    engine = open_engine(Bundle((Module("p.rego", NAMESPACED),)))
    engine.follow(namespaces(30))
    assert engine.evaluate("data.p.labelled", {"pattern": "^t1$"}) == [
        f"ns{i}" for i in sorted(range(1, 30, 3), key=str)
    ]
    loads: list[object] = []
    monkeypatch.setattr(embedded, "_add_data", lambda *args: loads.append(args))
    store = namespaces(30)
    oracle = OracleEngine(
        Bundle((Module("p.rego", NAMESPACED),), {"kubernetes": store.document}), strict_builtin_errors=False
    )
    assert (
        engine.evaluate("data.p.labelled", {"pattern": "["})
        == oracle.evaluate("data.p.labelled", {"pattern": "["})
        == []
    )
    assert engine.evaluate("data.p.sizes", {"sizes": ["1KB", "lots", "2KB"]}) == [1000, 2000]
    assert engine.evaluate("data.p.labelled", {"pattern": "^t2$"}) == [
        f"ns{i}" for i in sorted(range(2, 30, 3), key=str)
    ]
    assert loads == []


def test_places_found_on_one_thread_serve_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = open_engine(Bundle((Module("p.rego", NAMESPACED),)))
    engine.follow(namespaces(6))
    assert engine.evaluate("data.p.sizes", {"sizes": ["lots"]}) == []
    rewrites: list[object] = []
    original = rewrite.rewrite
    monkeypatch.setattr(rewrite, "rewrite", lambda *a, **k: rewrites.append(k) or original(*a, **k))
    answers: list[object] = []
    worker = threading.Thread(target=lambda: answers.append(engine.evaluate("data.p.sizes", {"sizes": ["x", "3KB"]})))
    worker.start()
    worker.join()
    assert answers == [[3000]] and rewrites == []  # the other thread's engine took the place found here


def test_each_undefined_call_is_reported_once_an_evaluation_and_logged_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    heard: list[builtin_errors.UndefinedCall] = []
    builtin_errors.listen(heard.append)
    try:
        engine = open_engine(Bundle((Module("pkg/p.rego", NAMESPACED),)))
        for _ in range(3):
            assert engine.evaluate("data.p.sizes", {"sizes": ["lots", "more", "1KB"]}) == [1000]
    finally:
        builtin_errors.unlisten(heard.append)
    assert [(c.policy, c.builtin, c.place.rsplit(":", 1)[0]) for c in heard] == [
        ("p", "units.parse_bytes", "pkg/p.rego:10")
    ] * 3
    lines = [r for r in caplog.records if r.name == "regokite.policy.builtin_error" and "pkg/p.rego" in r.location]
    assert len(lines) == 1 and lines[0].builtin == "units.parse_bytes" and lines[0].levelname == "WARNING"


def test_the_log_line_says_how_many_were_left_out(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = builtin_errors.UndefinedCall("q.rego:3:1", "q", "div", "div: divide by zero")
    clock = iter([1000.0, 1001.0, 1002.0, 1061.0])
    monkeypatch.setattr(builtin_errors.time, "monotonic", lambda: next(clock))
    for _ in range(4):
        builtin_errors.report(call)
    lines = [r for r in caplog.records if getattr(r, "location", "") == "q.rego:3:1"]
    assert [r.left_out for r in lines] == [0, 2]


def test_a_refusal_stays_an_error_and_is_not_reported() -> None:
    heard: list[builtin_errors.UndefinedCall] = []
    builtin_errors.listen(heard.append)
    engine = open_engine(Bundle((Module("p.rego", 'package p\n\nx := sort([[{1}], [{"a": 1}]])\n'),)))
    try:
        with pytest.raises(EvaluationRefused, match="orders otherwise than OPA"):
            engine.evaluate("data.p.x")
    finally:
        builtin_errors.unlisten(heard.append)
    assert heard == []
