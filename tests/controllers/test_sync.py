"""The one sync both controller kinds share: the finalizer state machine and the plan."""

from __future__ import annotations

import pytest

from regokite.controllers import sync
from regokite.controllers.hooks import HookResponse
from regokite.resources import HookEvent
from tests.controllers.test_children import CM, PARENT, cm, definition, owned

F = "metacontroller.io/compositecontroller-things"


def obj(*finalizers: str, deleting: bool = False) -> dict:
    meta = {"name": "p", "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize(
    ("state", "finalize_hook", "selected", "want"),
    [
        (obj(), False, True, sync.Begin("sync")),
        (obj("other"), True, True, sync.Begin("sync", ["other", F])),  # a finalize hook keeps our finalizer on
        (obj("other", F), False, True, sync.Begin("sync", ["other"])),  # a finalizer of an older definition goes
        (obj(F), True, True, sync.Begin("sync")),
        (obj(F, deleting=True), True, True, sync.Begin("finalize")),
        (obj(deleting=True), True, True, sync.Begin(None)),  # deleted before we added it: nothing to finalize
        (obj(F, deleting=True), False, True, sync.Begin(None)),
        (obj(), True, False, sync.Begin(None)),  # a decorator's target that is not selected, and never was
        (obj(F), True, False, sync.Begin("finalize")),  # stopped matching: clean up first
        (obj(F, "x"), False, False, sync.Begin(None, ["x"])),  # stopped matching, nothing to clean: let go
    ],
)
def test_begin_is_one_finalizer_state_machine(state: dict, finalize_hook: bool, selected: bool, want) -> None:
    assert sync.begin(state, F, finalize_hook=finalize_hook, selected=selected) == want


def test_a_plan_holds_the_child_writes_status_events_and_release() -> None:
    d = definition()
    response = HookResponse(
        children=(cm("new", {"k": "v"}),),
        status={"ready": 1},
        finalized=True,
        events=(HookEvent("Normal", "Synced", "ok"),),
        resync_after_seconds=5.0,
    )
    observed = {CM.key: [owned(cm("stale"), d)]}
    plan = sync.plan(d, PARENT, [CM], observed, response, finalizing=True)
    assert [a.describe() for a in plan.actions] == ["create ConfigMap ns/new", "delete ConfigMap ns/stale"]
    assert plan.status == {"ready": 1, "observedGeneration": 3}
    assert plan.release and plan.resync_after_seconds == 5.0 and plan.events == response.events
    assert plan.describe()[-2:] == ["status", "remove finalizer"]
    assert not sync.plan(d, PARENT, [CM], observed, response, finalizing=False).release  # only a finalize call ends


def test_a_decorator_status_is_the_hook_answer_as_is_and_unchanged_is_no_write() -> None:
    d = definition()
    target = {**PARENT, "status": {"x": 1}}
    same = sync.plan(d, target, [CM], {}, HookResponse(status={"x": 1}), finalizing=False, observed_generation=False)
    assert same.status is None
    new = sync.plan(d, target, [CM], {}, HookResponse(status={"x": 2}), finalizing=False, observed_generation=False)
    assert new.status == {"x": 2}
    desired = [cm("held-back")]  # a rolling update (or a decorator's marked attachments) replaces the response's
    plan = sync.plan(d, PARENT, [CM], {}, HookResponse(children=(cm("a"),)), finalizing=False, desired=desired)
    assert [a.name for a in plan.actions] == ["held-back"]
