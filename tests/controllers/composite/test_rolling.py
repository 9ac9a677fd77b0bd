"""Rolling updates, pure parts: snapshots, status checks, one step at a time."""

from __future__ import annotations

import pytest

from regokite.controllers.composite import rolling

READY = {"conditions": [{"type": "Ready", "status": "True"}]}
W = "Worker.examples.regokite.dev"


def worker(name: str, ready: str | None = "True", generation: int = 1, observed: int | None = 1) -> dict:
    status: dict = {"conditions": [{"type": "Ready", "status": ready}]} if ready else {}
    if observed is not None:
        status["observedGeneration"] = observed
    return {"metadata": {"name": name, "generation": generation}, "status": status}


def test_parent_patch_and_patched_parent_round_trip() -> None:
    parent = {"metadata": {"name": "p"}, "spec": {"replicas": 3, "template": {"v": 2}}}
    patch = rolling.parent_patch(parent, ["spec.template"])
    assert patch == {"spec": {"template": {"v": 2}}}
    then = rolling.patched_parent(parent, {"spec": {"template": {"v": 1}}}, ["spec.template"])
    assert then["spec"] == {"replicas": 3, "template": {"v": 1}}
    assert rolling.patched_parent(parent, {}, ["spec.template"])["spec"] == {"replicas": 3}


def test_status_checks_conditions_reason_and_generation() -> None:
    assert rolling.passes_status_checks(worker("a"), READY)
    assert not rolling.passes_status_checks(worker("a", "False"), READY)
    assert not rolling.passes_status_checks(worker("a", None), READY)
    assert not rolling.passes_status_checks(worker("a", generation=2, observed=1), READY)  # stale status
    assert rolling.passes_status_checks(worker("a", generation=2, observed=None), READY)
    reason = {"conditions": [{"type": "Ready", "reason": "Done"}]}
    assert not rolling.passes_status_checks(worker("a"), reason)
    assert not rolling.passes_status_checks(None, READY)


def plan(existing, observed, out_of_date, desired=None):
    obs = {(W, o["metadata"]["name"]): o for o in observed}
    return rolling.plan_rollout(
        "new", {"v": 2}, existing, obs, desired if desired is not None else list(obs), {W: READY}, out_of_date
    )


def test_one_child_moves_when_the_updated_ones_are_ready() -> None:
    old = rolling.Revision("old", {"v": 1}, 1, {(W, "a"), (W, "b"), (W, "c")})
    p = plan([old], [worker("a"), worker("b"), worker("c")], {(W, "a"), (W, "b"), (W, "c")})
    assert p.moved == (W, "a") and p.latest.number == 2 and not p.latest.exists
    assert p.assignment == {(W, "a"): "new", (W, "b"): "old", (W, "c"): "old"}
    assert p.changed == {"new", "old"}


def test_the_rollout_pauses_on_a_failing_or_stale_updated_child() -> None:
    old = rolling.Revision("old", {"v": 1}, 1, {(W, "b"), (W, "c")})
    new = rolling.Revision("new", {"v": 2}, 2, {(W, "a")})
    p = plan([old, new], [worker("a", "False"), worker("b"), worker("c")], {(W, "b"), (W, "c")})
    assert p.moved is None and p.paused_by == (W, "a") and not p.changed
    p = plan([old, new], [worker("a", generation=2), worker("b"), worker("c")], {(W, "b"), (W, "c")})
    assert p.moved is None and p.paused_by == (W, "a")


def test_a_recreated_child_that_is_not_back_yet_pauses_too() -> None:
    old = rolling.Revision("old", {"v": 1}, 1, {(W, "b")})
    new = rolling.Revision("new", {"v": 2}, 2, {(W, "a")})
    p = plan([old, new], [worker("b")], {(W, "b")}, desired=[(W, "a"), (W, "b")])
    assert p.paused_by == (W, "a") and p.moved is None


def test_unchanged_children_move_freely_and_empty_revisions_go() -> None:
    old = rolling.Revision("old", {"v": 1}, 1, {(W, "a")})
    p = plan([old], [worker("a")], set())
    assert p.assignment == {(W, "a"): "new"} and [r.name for r in p.obsolete] == ["old"]


def test_revision_children_are_recorded_in_metacontrollers_shape() -> None:
    rev = rolling.Revision("r", {}, 1, {(W, "b"), (W, "a"), ("Pod.", "p")})
    assert (
        rolling.read_revision(
            {"metadata": {"name": "r", "annotations": {rolling.CHILDREN_ANNOTATION: rev.children_annotation()}}}
        ).children
        == rev.children
    )
    assert '{"apiGroup":"","kind":"Pod","names":["p"]}' in rev.children_annotation()


def test_children_move_in_the_hooks_order_and_wait_for_an_updated_child_to_show_it() -> None:
    old = rolling.Revision("old", {"v": 1}, 1, {(W, "w-2"), (W, "w-10")})
    order = [(W, "w-2"), (W, "w-10")]
    p = plan([old], [worker("w-2"), worker("w-10")], set(order), desired=order)
    assert p.moved == (W, "w-2")  # as the hook listed them, not by name
    assert rolling.updated_condition(p)["message"] == "updating Worker w-2"
    new = rolling.Revision("new", {"v": 2}, 2, {(W, "w-2")})
    old = rolling.Revision("old", {"v": 1}, 1, {(W, "w-10")})
    obs = {(W, "w-2"): worker("w-2"), (W, "w-10"): worker("w-10")}
    p = rolling.plan_rollout("new", {"v": 2}, [old, new], obs, order, {W: READY}, {(W, "w-10")}, {(W, "w-2")})
    assert p.moved is None and p.paused_by == (W, "w-2")
    assert rolling.updated_condition(p) == {
        "type": "Updated",
        "status": "False",
        "reason": "RolloutWaiting",
        "message": "child Worker w-2 is not updated yet",
    }
    p = plan([old, new], [worker("w-2", "False"), worker("w-10")], {(W, "w-10")}, desired=order)
    assert rolling.updated_condition(p)["message"] == (
        'child Worker w-2 failed status check: "Ready" condition status is "False" (want "True")'
    )
    p = plan([new], [worker("w-2", "False")], set(), desired=[(W, "w-2")])
    assert rolling.updated_condition(p) == {
        "type": "Updated",
        "status": "True",
        "reason": "OnLatestRevision",
        "message": "latest ControllerRevision: new",
    }


def test_the_updated_condition_replaces_its_own_type_only() -> None:
    cond = {"type": "Updated", "status": "True"}
    hooks = {"replicas": 2, "conditions": [{"type": "Ready", "status": "True"}, {"type": "Updated", "x": 1}]}
    assert rolling.with_condition(hooks, cond)["conditions"] == [{"type": "Ready", "status": "True"}, cond]
    assert rolling.with_condition(None, cond) == {"conditions": [cond]}
    with pytest.raises(ValueError, match=r"status\.conditions is not a list"):
        rolling.with_condition({"conditions": "no"}, cond)
