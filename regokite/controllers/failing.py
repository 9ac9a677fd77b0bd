"""A parent (or decorator target) whose sync keeps failing says why in a status condition, pure.

Metacontroller records a Warning Event on every failed sync and leaves the
status as the hook last wrote it; its contract is that the parent's status is
the hook's. regokite records the same Events and, after `REPEATED` failures
in a row, adds one condition of its own, `regokite.dev/SyncFailing`, to
`status.conditions`, so `kubectl get`/`describe` say why a parent is stuck
long after its Events expired. So that the hook's contract holds:

* the hook never observes it: `hidden` takes it out of the object a hook is
  given, so the hook sees exactly what Metacontroller would show it and
  cannot carry the condition forward;
* it never replaces a field of the hook's: the rest of the status, the
  hook's own conditions included, is written back as read;
* a sync that succeeds writes the hook's status, which the condition is not
  part of, so it disappears (`cleared` removes it where the hook left the
  status alone: a decorator whose hook answers no status).

A decorator target's status often belongs to another controller (a
Deployment's, a Service's): the condition is written only where the
controller writes the status itself (every composite parent; a decorator's
target when its sync hook defines `status`), elsewhere the Event alone
reports the failure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

CONDITION = "regokite.dev/SyncFailing"
REPEATED = 3  # failed syncs in a row before the condition is written (one failure may be a blip)
MESSAGE_LIMIT = 1024


def _conditions(obj: Mapping[str, Any]) -> list[Any] | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return conditions if isinstance(conditions, list) else None


def current(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object's SyncFailing condition, or None."""
    for c in _conditions(obj) or ():
        if isinstance(c, Mapping) and c.get("type") == CONDITION:
            return dict(c)
    return None


def hidden(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` as its hook sees it: without the SyncFailing condition (`obj` itself when it has none)."""
    if current(obj) is None:
        return obj
    seen = dict(obj)
    status = dict(obj["status"])
    status["conditions"] = [c for c in status["conditions"] if not _ours(c)]
    if not status["conditions"]:
        del status["conditions"]
    seen["status"] = status
    return seen


def failing(obj: Mapping[str, Any], reason: str, message: str, now: str) -> dict[str, Any] | None:
    """`obj`'s status with the condition saying the sync fails for `reason`; None when it already says
    so (same reason and message) or the status has a `conditions` field that is not a list (the
    hook's own shape, left alone)."""
    status = obj.get("status")
    status = copy.deepcopy(status) if isinstance(status, Mapping) else {}
    conditions = status.get("conditions", [])
    if not isinstance(conditions, list):
        return None
    message = message[:MESSAGE_LIMIT]
    was = current(obj)
    if was is not None and (was.get("reason"), was.get("message")) == (reason, message):
        return None
    condition = {
        "type": CONDITION,
        "status": "True",
        "reason": reason if reason.isidentifier() else "SyncError",
        "message": message,
        "lastTransitionTime": (was or {}).get("lastTransitionTime") or now,
    }
    generation = obj.get("metadata", {}).get("generation")
    if generation is not None:
        condition["observedGeneration"] = generation
    status["conditions"] = [c for c in conditions if not _ours(c)] + [condition]
    return status


def cleared(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """`obj`'s status without the condition; None when it has none."""
    if current(obj) is None:
        return None
    return copy.deepcopy(dict(hidden(obj).get("status") or {}))


def _ours(condition: Any) -> bool:
    return isinstance(condition, Mapping) and condition.get("type") == CONDITION
