"""A regorus engine never outlives the thread that made it through a failure.

PyO3 refuses to drop a regorus engine on another thread ("Engine is
unsendable, but is being dropped on another thread": leaked, or a panic). A
refused bundle's or a failed evaluation's exception, kept in a reference cycle
by its catcher, used to hold the engines of the frames it passed through until
the collector freed the cycle on whatever thread it ran. Each test fails, on
the code before `frames_released`, with that message.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from regokite.bundle import Bundle, Module
from regokite.engine import EngineSettings, open_engine
from regokite.errors import RegokiteError
from regokite.gatekeeper.compile import compile_all
from regokite.gatekeeper.resources import parse_template
from regokite.outline import outline


def dropped_elsewhere(work: Callable[[], Any]) -> list[str]:
    """Run `work` on a thread of its own, then collect garbage on this one: what PyO3 reported meanwhile."""
    reported: list[str] = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: reported.append(str(unraisable.exc_value))
    gc.collect()
    gc.disable()  # cycles made on the worker are freed below, on this thread, not wherever the collector runs
    try:
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        gc.collect()
    finally:
        gc.enable()
        sys.unraisablehook = hook
    return reported


REFUSED = {
    "parse error": "package p\n\nallow if {\n",
    "unknown builtin": "package p\n\nallow if no_such_builtin(1)\n",
    "unsafe variable": "package p\n\nallow if x == 1\n",
}


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_bundle_kept_in_a_cycle_holds_no_engine(text: str) -> None:
    messages: list[str] = []

    def refuse() -> None:
        try:
            open_engine(Bundle((Module("p.rego", text),)))
        except RegokiteError as exc:
            error = exc  # a cycle: error -> traceback -> this frame -> error
            messages.append(str(error))

    assert dropped_elsewhere(refuse) == []
    assert "p.rego:" in messages[0]


def test_an_outline_refused_kept_in_a_cycle_holds_no_parser() -> None:
    """outline() parses controller definitions' and templates' packages on an engine of its own."""
    messages: list[str] = []

    def refuse() -> None:
        try:
            outline([Module("p.rego", REFUSED["parse error"])])
        except RegokiteError as exc:
            error = exc
            messages.append(str(error))

    assert dropped_elsewhere(refuse) == []
    assert "p.rego:4" in messages[0]


FAILING = {
    # a builtin's error, strict
    True: 'package p\n\nx := json.unmarshal("{")\n',
    # OPA's default: the builtin's error met, the call made undefined on an engine of its own (lenient.py),
    # then a conflict, an error there too
    False: 'package p\n\nx := 1 if json.unmarshal("{")\n\nx := 2 if true\n\nx := 3 if true\n',
}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("how", ["evaluate", "query", "bind"])
def test_a_failed_evaluation_kept_in_a_cycle_holds_no_engine(how: str, strict: bool) -> None:
    messages: list[str] = []

    def fail() -> None:
        settings = EngineSettings(strict_builtin_errors=strict)
        engine = open_engine(Bundle((Module("p.rego", FAILING[strict]),)), settings)
        try:
            if how == "evaluate":
                engine.evaluate("data.p.x")
            elif how == "query":
                engine.query("data.p.x")
            else:
                engine.bind({"a": 1}).evaluate("data.p.x")
        except RegokiteError as exc:
            error = exc
            messages.append(str(error))
        engine.close()

    assert dropped_elsewhere(fail) == []
    assert "p.rego:3" in messages[0] if strict else "p.rego:" in messages[0]


def template(rego: str) -> dict[str, Any]:
    return {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": "k8sbroken"},
        "spec": {
            "crd": {"spec": {"names": {"kind": "K8sBroken"}}},
            "targets": [{"target": "admission.k8s.gatekeeper.sh", "rego": rego}],
        },
    }


def test_a_template_refused_on_a_sync_thread_leaves_no_engine_to_the_collector() -> None:
    """compile_all keeps each refusal in a dict of its own frame: the path of the Gatekeeper object syncer."""
    messages: list[str] = []

    def sync() -> None:
        doc = template('package k8sbroken\n\nviolation[{"msg": m}] {\n  m := no_such_builtin(1)\n}\n')
        _, bad = compile_all([parse_template(doc, None, "constrainttemplate/k8sbroken")])
        messages.extend(str(error) for error in bad.values())  # strings out: the cycle compile_all made is garbage

    assert dropped_elsewhere(sync) == []
    assert "unknown function no_such_builtin" in messages[0]
