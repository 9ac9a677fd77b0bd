"""One sync at run time, shared by CompositeControllers and DecoratorControllers.

`SyncReconciler.reconcile` carries out `regokite.controllers.sync`: begin
(finalizer), observe, call the hook, plan, write through the actuator. A
runner says only what differs: how it reads its object and observes its
children, the request and response shapes, and what it writes beside the
children (a decorator's labels).

One conflict policy, Metacontroller's: a 409 on a child or a finalizer means
the object changed since it was read (or a write raced another); the sync is
retried with backoff and no Event is recorded. The hook's status is written
on the version of the object the sync read; when that changed since (409,
most often a cache that has not yet brought the previous sync's status), a
composite's status is written again over the object read afresh, up to
`STATUS_REREADS` times, the hook not asked again and no child written again
(Metacontroller's AtomicStatusUpdate); a decorator's is not (Metacontroller's
UpdateStatus on the cached version). Either way the watch brings the newer
version and its sync. Any other failure (an API error, a request the API
server did not answer, a hook error) becomes a Warning Event on the object,
and is retried with backoff too; once an object's sync has failed
`failing.REPEATED` times in a row, its status also gets the condition
`regokite.dev/SyncFailing` (`regokite.controllers.failing`: the hook never
sees it, and the next successful sync removes it). Both are best effort:
while the server cannot be reached they cannot be written (the worker's log
line and `regokite_controller_reconcile_errors_total{reason="connection"}`
say it), and the failures counted meanwhile still count once it answers.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from regokite.controllers import failing, sync
from regokite.controllers.composite import rolling
from regokite.controllers.composite.rolling_runner import RollingUpdates
from regokite.controllers.hooks import (
    HookEvaluator,
    HookResponse,
    ResolvedHook,
    group_children,
    run_hook,
    sync_request,
    translate_response,
)
from regokite.controllers.related_resources import RelatedResources
from regokite.errors import HookError
from regokite.kube.actuator import Actuator, utc_now
from regokite.kube.client import UNANSWERED, ApiError, NotLeader, resource_path
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer
from regokite.ops import controller_metrics as metrics
from regokite.resources import ChildType, where
from regokite.runtime.manager import Manager
from regokite.runtime.reconcile import Result

log = logging.getLogger("regokite.controller")
Observed = dict[str, list[dict[str, Any]]]
CONDITION_REWRITE_SECONDS = 60.0  # a failing object's condition is rewritten (a new reason) at most this often
STATUS_REREADS = 5  # a composite's status writes over the object read afresh (Metacontroller: retry.DefaultBackoff)
STATUS_REREAD_PAUSE = 0.01  # seconds between them (DefaultBackoff's step)


class SyncReconciler:
    """The steps every sync takes; subclasses set the attributes below and override the hooks."""

    name: str  # the work queue's reconciler name
    definition: Any  # CompositeController or DecoratorController
    type: ChildType  # the parent's (target's) type
    child_types: Sequence[ChildType]
    actuator: Actuator
    evaluator: HookEvaluator
    sync_hook: ResolvedHook
    finalize_hook: ResolvedHook | None
    manager: Manager
    related: RelatedResources | None = None
    rolling: RollingUpdates | None = None
    request_names = ("parent", "children")
    observed_generation = True  # a composite's status says which generation it describes
    writes_failing_condition = True  # the status is this controller's: a failing sync may say so there
    status_rereads = STATUS_REREADS  # after a 409 on the status: writes of it over the object read afresh
    translate = staticmethod(translate_response)

    def __init__(
        self,
        definition: Any,
        name: str,
        t: ChildType,
        child_types: Sequence[ChildType],
        sync_hook: ResolvedHook,
        finalize_hook: ResolvedHook | None,
        manager: Manager,
    ) -> None:
        """Refuses a namespaced object with cluster-scoped children: its owner references could not hold."""
        self.definition, self.name, self.type, self.child_types = definition, name, t, child_types
        self.sync_hook, self.finalize_hook, self.manager = sync_hook, finalize_hook, manager
        self._failing: dict[tuple[str, str], _Failing] = {}  # objects whose last sync failed
        self._failing_lock = threading.Lock()
        bad = [c.kind for c in child_types if t.namespaced and not c.namespaced]
        if bad:
            raise HookError(
                definition.name,
                None,
                f"a namespaced {t.kind} cannot have cluster-scoped children ({bad[0]})",
                "InvalidSpec",
            )

    def _related(
        self, manager: Manager, evaluator: HookEvaluator, hook: ResolvedHook | None, discovery: Discovery
    ) -> RelatedResources | None:
        """The related resources of a customize hook, whose changes re-queue this reconciler's objects."""
        if hook is None:
            return None
        return RelatedResources(
            manager=manager,
            evaluator=evaluator,
            hook=hook,
            discovery=discovery,
            controller=self.definition.raw,
            parent_namespaced=self.type.namespaced,
            enqueue=lambda ns, name: manager.enqueue(self.name, ns, name),
        )

    # -- what differs between kinds

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def selects(self, obj: Mapping[str, Any]) -> bool:
        return True

    def observe(self, obj: dict[str, Any]) -> Observed:
        raise NotImplementedError

    def cache_informers(self) -> list[Informer]:
        """The informers this reconciler reads its object and children from."""
        return []

    def parent_confirmed(self, obj: Mapping[str, Any]) -> bool:
        """Whether `obj` (read from a cache) still exists as read, before children are created for it.

        After a watch failure an informer may hold an object deleted during the outage until it
        lists again (the child informer relisting first re-queues the parents of children the garbage
        collector removed): while any informer read here is so, the object's uid is confirmed with a
        GET, else creates would recreate children of a deleted parent. A current cache costs nothing."""
        if all(informer.confirmed for informer in self.cache_informers()):
            return True
        meta = obj["metadata"]
        path = resource_path(self.type.api_version, self.type.resource, meta.get("namespace"), meta["name"])
        started = time.monotonic()
        try:
            current = self.actuator.client.get(path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            current = None
        finally:
            metrics.parent_confirmation_seconds.labels(self.name).observe(time.monotonic() - started)
        gone = current is None or current["metadata"].get("uid") != meta.get("uid")
        metrics.parent_confirmations.labels(self.name, "gone" if gone else "current").inc()
        if gone:
            log.info("not creating children: the object is gone", extra={"controller": self.name, "object": where(obj)})
        return not gone

    def write_beside(self, obj: dict[str, Any], response: HookResponse) -> dict[str, Any]:
        """Writes of the object itself other than status (a decorator's labels); returns the object after them."""
        return obj

    # -- one sync

    def reconcile(self, namespace: str, name: str) -> Result:
        obj = self.get(namespace, name)
        if obj is None:
            if self.related is not None:
                self.related.forget(namespace, name)
            with self._failing_lock:
                self._failing.pop((namespace, name), None)
            return Result()  # deleted: the garbage collector removes the children
        try:
            plan, obj = self._sync(obj)
        except _FailedOn as failed:
            exc, obj = failed.error, failed.obj
            # a conflict is optimistic concurrency at work, a standby may not write: retried, not reported
            if not isinstance(exc, ApiError) or (exc.status != 409 and not isinstance(exc, NotLeader)):
                reason = exc.reason if isinstance(exc, HookError) else "SyncError"
                message = str(exc) if not isinstance(exc, UNANSWERED) else f"the API server did not answer: {exc}"
                self.actuator.event(obj, "Warning", reason, message)
                self._failed(obj, reason, message)
            raise exc from None
        with self._failing_lock:
            self._failing.pop((namespace, name), None)
        if plan is None:
            return Result()
        if plan.actions:
            log.info("synced", extra={"controller": self.name, "object": where(obj), "actions": plan.describe()})
        return Result(requeue_after=plan.resync_after_seconds)

    def _sync(self, obj: dict[str, Any]) -> tuple[sync.SyncPlan | None, dict[str, Any]]:
        """One sync of `obj`: the plan carried out (None: nothing to do) and the object as last written.
        A hook or API error, or a request unanswered, comes wrapped with the object as last written
        (`_FailedOn`)."""
        d = self.definition
        start = sync.begin(obj, d.finalizer, finalize_hook=self.finalize_hook is not None, selected=self.selects(obj))
        try:
            if start.finalizers is not None:
                obj = self.actuator.set_finalizers(self.type, obj, start.finalizers, controller=d.name)
            if start.hook is None:
                return None, obj
            hook = self.finalize_hook if start.finalizing else self.sync_hook
            assert hook is not None
            observed = self.observe(obj)
            seen = failing.hidden(obj)  # what Metacontroller would show the hook
            request = sync_request(
                d.raw,
                seen,
                group_children(self.child_types, observed, self.type.namespaced, hook.target.uniform),
                related=self.related.gather(seen, uniform=hook.target.uniform) if self.related is not None else None,
                finalizing=start.finalizing,
                names=self.request_names,
            )
            response = self._run(hook, request, seen)
            metrics.evaluation_latency.labels(d.name, hook.package).observe(response.evaluation_seconds)

            desired = None
            if self.rolling is not None and not start.finalizing:  # children at older revisions stay as they were

                def children_at(then: dict[str, Any]) -> tuple[dict[str, Any], ...]:
                    return self._run(hook, {**request, self.request_names[0]: then}, then).children

                desired, updated = self.rolling.desired(obj, observed, response.children, children_at)
                try:
                    response = replace(response, status=rolling.with_condition(response.status, updated))
                except ValueError as exc:
                    raise HookError(hook.package, "status", str(exc)) from exc
            plan = sync.plan(
                d,
                obj,
                self.child_types,
                observed,
                response,
                finalizing=start.finalizing,
                desired=desired,
                observed_generation=self.observed_generation,
            )
            if any(a.verb == "create" for a in plan.actions) and not self.parent_confirmed(obj):
                return None, obj  # deleted while the caches were away: its deletion is on its way
            self.actuator.execute_all(plan.actions, controller=d.name)
            obj = self.write_beside(obj, response)
            if plan.status is not None:
                written = self._write_status(obj, plan.status)
                if written is None:  # left to the sync the newer version's watch event brings (or gone);
                    # the hook's events are recorded all the same (that sync's hook may not answer them again)
                    self.actuator.finish(
                        self.type, obj, plan.events, finalizer=d.finalizer, release=False, controller=d.name
                    )
                    return plan, obj
                obj = written
            obj = self._recovered(obj, response)
            self.actuator.finish(
                self.type, obj, plan.events, finalizer=d.finalizer, release=plan.release, controller=d.name
            )
        except (HookError, ApiError, *UNANSWERED) as exc:
            raise _FailedOn(exc, obj) from exc
        return plan, obj

    def _write_status(self, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        """The hook's `status`, written on the version of `obj` the hook saw; when that changed since
        (409), written again over the object read afresh up to `status_rereads` times, as Metacontroller
        writes a composite's (its AtomicStatusUpdate: a GET, then the write, again on a conflict): the
        hook is not asked again, no child is written again. The object as written; None when the
        write was left to the next sync (the object still changing, or gone or replaced)."""
        controller = self.definition.name
        current = obj
        for attempt in range(self.status_rereads + 1):
            if attempt:
                if attempt > 1:
                    time.sleep(STATUS_REREAD_PAUSE)
                fresh = self._read_again(obj)
                if fresh is None:
                    return None
                if (fresh.get("status") or {}) == status:
                    return fresh  # already so: nothing to write
                current = fresh
            try:
                written = self.actuator.set_status(self.type, current, status, controller=controller, as_read=True)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                continue
            if attempt:
                metrics.stale_retries.labels(self.name, "retried").inc()
            return written
        metrics.stale_retries.labels(self.name, "left").inc()
        log.info(
            "status left to the next sync: the object changed since it was read",
            extra={"controller": self.name, "object": where(obj), "writes": self.status_rereads + 1},
        )
        return None

    def _read_again(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """`obj` as the API server has it now (not the cache), for a status write after its first met a
        newer version; None when it is gone or is another object by that name."""
        meta = obj["metadata"]
        fresh = self.actuator.read(self.type, meta.get("namespace"), meta["name"])
        if fresh is not None and fresh["metadata"].get("uid") == meta.get("uid"):
            return fresh
        metrics.stale_retries.labels(self.name, "gone").inc()
        return None

    # -- a sync that keeps failing says so in the status (regokite.controllers.failing)

    def _failed(self, obj: dict[str, Any], reason: str, message: str) -> None:
        """Count a failed sync of `obj`; from the REPEATED-th in a row on, its status says why (rewritten at
        most every CONDITION_REWRITE_SECONDS, so a message that changes on every try cannot loop through
        the status watch). Best effort: the failure itself is what the caller raises."""
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        now = time.monotonic()
        with self._failing_lock:
            state = self._failing.setdefault(key, _Failing())
            state.count += 1
            due = state.count >= failing.REPEATED and now - state.written_at >= CONDITION_REWRITE_SECONDS
        status = failing.failing(obj, reason, message, utc_now()) if due and self.writes_failing_condition else None
        if status is None:
            return
        try:
            written = self.actuator.set_status(
                self.type, obj, status, controller=self.definition.name, as_read=True, verb="condition"
            )
        except Exception as exc:  # a status the API server refuses (its schema, RBAC, a race): the Event says it
            log.info(
                "could not write the SyncFailing condition",
                extra={"controller": self.name, "object": where(obj), "error": str(exc)[:300]},
            )
            return
        with self._failing_lock:
            state.written_at = now
        kept = failing.current(written) is not None  # a status schema without `conditions` prunes it
        log.info(
            "sync failing: condition written" if kept else "sync failing: the status schema dropped the condition",
            extra={"controller": self.name, "object": where(obj), "reason": reason, "failures": state.count},
        )

    def _recovered(self, obj: dict[str, Any], response: HookResponse) -> dict[str, Any]:
        """After a sync that succeeded: remove the condition where the hook's status write did not (a
        decorator's hook that answered no status). A condition the hook itself answered is the hook's."""
        status = failing.cleared(obj)
        if status is None or failing.current({"status": response.status or {}}) is not None:
            return obj
        return self.actuator.set_status(
            self.type, obj, status, controller=self.definition.name, as_read=True, verb="condition"
        )

    def _run(self, hook: ResolvedHook, request: dict[str, Any], obj: Mapping[str, Any]) -> HookResponse:
        return run_hook(
            self.evaluator,
            hook,
            request,
            types=self.child_types,
            parent=obj,
            parent_namespaced=self.type.namespaced,
            translate=self.translate,
        )


@dataclass
class _Failing:
    """An object whose syncs fail: how many in a row, when its condition was last written (monotonic)."""

    count: int = 0
    written_at: float = -math.inf


class _FailedOn(Exception):
    """A sync's hook or API error, or a request unanswered, with the object as last written (the Event
    and condition go on it)."""

    def __init__(self, error: Exception, obj: dict[str, Any]) -> None:
        super().__init__(str(error))
        self.error, self.obj = error, obj
