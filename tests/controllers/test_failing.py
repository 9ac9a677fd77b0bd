"""The SyncFailing condition, pure: added beside the hook's own status, hidden from the hook, removed."""

from __future__ import annotations

from regokite.controllers import failing

NOW = "2026-11-26T12:00:00Z"


def parent(status: dict | None = None) -> dict:
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p", "generation": 4}}
    if status is not None:
        obj["status"] = status
    return obj


def test_the_condition_joins_the_hooks_own_conditions_and_leaves_every_other_field_as_read() -> None:
    hooks = {"replicas": 2, "conditions": [{"type": "Ready", "status": "False", "reason": "Waiting"}]}
    status = failing.failing(parent(hooks), "PolicyError", "policy things: division by zero", NOW)
    assert status is not None
    assert status["replicas"] == 2
    assert status["conditions"][0] == hooks["conditions"][0]
    assert status["conditions"][1] == {
        "type": "regokite.dev/SyncFailing",
        "status": "True",
        "reason": "PolicyError",
        "message": "policy things: division by zero",
        "lastTransitionTime": NOW,
        "observedGeneration": 4,
    }
    assert hooks == {"replicas": 2, "conditions": [{"type": "Ready", "status": "False", "reason": "Waiting"}]}


def test_an_unchanged_failure_writes_nothing_a_new_one_keeps_the_time_it_started() -> None:
    first = parent(failing.failing(parent(), "PolicyError", "boom", NOW))
    assert failing.failing(first, "PolicyError", "boom", "2026-11-26T12:05:00Z") is None
    second = failing.failing(first, "HookTimeout", "slow", "2026-11-26T12:05:00Z")
    assert second is not None
    [condition] = second["conditions"]
    assert (condition["reason"], condition["lastTransitionTime"]) == ("HookTimeout", NOW)


def test_the_hook_never_sees_the_condition_and_a_status_without_it_is_what_the_hook_wrote() -> None:
    hooks = {"replicas": 2, "conditions": [{"type": "Ready", "status": "True"}]}
    stuck = parent(failing.failing(parent(hooks), "PolicyError", "boom", NOW))
    assert failing.hidden(stuck)["status"] == hooks
    assert failing.cleared(stuck) == hooks
    alone = parent(failing.failing(parent({"replicas": 2}), "PolicyError", "boom", NOW))
    assert failing.hidden(alone)["status"] == {"replicas": 2}  # the list it needed goes too
    plain = parent(hooks)
    assert failing.hidden(plain) is plain and failing.cleared(plain) is None


def test_a_conditions_field_of_another_shape_is_the_hooks_and_left_alone() -> None:
    assert failing.failing(parent({"conditions": {"ready": True}}), "PolicyError", "boom", NOW) is None
    assert failing.current(parent({"conditions": {"ready": True}})) is None


def test_a_reason_that_is_no_condition_reason_is_reported_as_a_sync_error() -> None:
    status = failing.failing(parent(), "not a reason", "x" * 5000, NOW)
    assert status is not None
    [condition] = status["conditions"]
    assert condition["reason"] == "SyncError" and len(condition["message"]) == failing.MESSAGE_LIMIT
