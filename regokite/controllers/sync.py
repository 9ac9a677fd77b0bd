"""One sync, pure: the steps a CompositeController and a DecoratorController share.

Metacontroller runs both kinds through one finalizer manager and one
`ManageChildren`; so does regokite. A sync is

1. `begin`: which hook runs (sync, finalize, or none) and whether our
   finalizer must be added or removed first;
2. the hook call (the runtime or `regokite plan` evaluates it);
3. `plan`: the child (attachment) writes, the new status, the Events, and
   whether the finalizer is released at the end.

`regokite.kube` carries out what these return; `regokite plan` prints it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from regokite.controllers.children import desired_status, plan_children
from regokite.controllers.hooks import HookResponse
from regokite.resources import Action, ChildType, HookEvent

Hook = Literal["sync", "finalize"]


@dataclass(frozen=True)
class Begin:
    """What a sync starts with: the hook to run (None: nothing to do) and the finalizers to write first."""

    hook: Hook | None
    finalizers: list[str] | None = None  # the object's new finalizer list, when ours must be added or removed

    @property
    def finalizing(self) -> bool:
        return self.hook == "finalize"


def begin(obj: Mapping[str, Any], finalizer: str, *, finalize_hook: bool, selected: bool = True) -> Begin:
    """The finalizer state machine. With a finalize hook our finalizer is kept on the object, so a
    deletion (or, for a decorator, the object no longer being `selected`) runs the finalize hook
    before the object may go; without one, a finalizer left by an earlier definition is removed."""
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or ())
    ours = finalizer in finalizers
    without = [f for f in finalizers if f != finalizer]
    if not selected and not ours:
        return Begin(None)  # not ours, and nothing to clean up
    if meta.get("deletionTimestamp"):
        return Begin("finalize" if finalize_hook and ours else None)
    if not selected:  # stopped matching: clean up with the finalize hook, then let go
        return Begin("finalize") if finalize_hook else Begin(None, without)
    if finalize_hook and not ours:
        return Begin("sync", [*finalizers, finalizer])
    if not finalize_hook and ours:
        return Begin("sync", without)
    return Begin("sync")


@dataclass(frozen=True)
class SyncPlan:
    """Everything one sync writes, in order: child actions, status, then Events and the finalizer release."""

    actions: tuple[Action, ...]
    status: dict[str, Any] | None  # the object's new status; None when it is already right
    events: tuple[HookEvent, ...]
    release: bool  # remove our finalizer: the finalize hook answered `finalized`
    resync_after_seconds: float | None

    def describe(self) -> list[str]:
        out = [a.describe() for a in self.actions]
        if self.status is not None:
            out.append("status")
        if self.release:
            out.append("remove finalizer")
        return out


def plan(
    definition: Any,
    obj: Mapping[str, Any],
    types: Sequence[ChildType],
    observed: Mapping[str, Sequence[Mapping[str, Any]]],
    response: HookResponse,
    *,
    finalizing: bool,
    desired: Sequence[Mapping[str, Any]] | None = None,
    observed_generation: bool = True,
) -> SyncPlan:
    """The writes that make `observed` (by type key) what the hook answered.

    `desired` replaces the response's children when a rolling update holds some back;
    a composite's status gains `observedGeneration`, a decorator's is the hook's as is."""
    children = response.children if desired is None else desired
    actions = plan_children(definition, obj, types, observed, children)
    if observed_generation:
        status = desired_status(obj, response.status)
    else:
        status = response.status if response.status is not None and response.status != obj.get("status") else None
    return SyncPlan(
        actions=tuple(actions),
        status=status,
        events=response.events,
        release=finalizing and response.finalized,
        resync_after_seconds=response.resync_after_seconds,
    )
