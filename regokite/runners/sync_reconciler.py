"""One sync at run time, shared by CompositeControllers and DecoratorControllers.

`SyncReconciler.reconcile` carries out `regokite.controllers.sync`: begin
(finalizer), observe, call the hook, plan, write through the actuator. A
runner says only what differs: how it reads its object and observes its
children, the request and response shapes, and what it writes beside the
children (a decorator's labels).

One conflict policy: a 409 means the object changed since it was read (or a
write raced another); the sync is retried with backoff and no Event is
recorded. Any other API error and every hook error become a Warning Event on
the object, and are retried too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from regokite.controllers import sync
from regokite.controllers.hooks import (
    HookError,
    HookEvaluator,
    HookResponse,
    ResolvedHook,
    group_children,
    run_hook,
    sync_request,
    translate_response,
)
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError, NotLeader, resource_path
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer
from regokite.kube.manager import Manager
from regokite.kube.reconcile import Result
from regokite.ops import controller_metrics as metrics
from regokite.resources import ChildType, where
from regokite.runners.related_resources import RelatedResources
from regokite.runners.rolling_updates import RollingUpdates

log = logging.getLogger("regokite.controller")
Observed = dict[str, list[dict[str, Any]]]


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
        try:
            current = self.actuator.client.get(path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            current = None
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
            return Result()  # deleted: the garbage collector removes the children
        d = self.definition
        start = sync.begin(obj, d.finalizer, finalize_hook=self.finalize_hook is not None, selected=self.selects(obj))
        try:
            if start.finalizers is not None:
                obj = self.actuator.set_finalizers(self.type, obj, start.finalizers, controller=d.name)
            if start.hook is None:
                return Result()
            hook = self.finalize_hook if start.finalizing else self.sync_hook
            assert hook is not None
            observed = self.observe(obj)
            request = sync_request(
                d.raw,
                obj,
                group_children(self.child_types, observed, self.type.namespaced, hook.target.uniform),
                related=self.related.gather(obj, uniform=hook.target.uniform) if self.related is not None else None,
                finalizing=start.finalizing,
                names=self.request_names,
            )
            response = self._run(hook, request, obj)
            metrics.evaluation_latency.labels(d.name, hook.package).observe(response.evaluation_seconds)

            desired = None
            if self.rolling is not None and not start.finalizing:  # children at older revisions stay as they were

                def children_at(then: dict[str, Any]) -> tuple[dict[str, Any], ...]:
                    return self._run(hook, {**request, self.request_names[0]: then}, then).children

                desired = self.rolling.desired(obj, observed, response.children, children_at)
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
                return Result()  # deleted while the caches were away: its deletion is on its way
            self.actuator.execute_all(plan.actions, controller=d.name)
            obj = self.write_beside(obj, response)
            if plan.status is not None:
                obj = self.actuator.set_status(self.type, obj, plan.status, controller=d.name, as_read=True)
            self.actuator.finish(
                self.type, obj, plan.events, finalizer=d.finalizer, release=plan.release, controller=d.name
            )
        except HookError as exc:
            self.actuator.event(obj, "Warning", exc.reason, str(exc))
            raise
        except ApiError as exc:
            # a conflict is optimistic concurrency at work, a standby may not write: retried, not reported
            if exc.status != 409 and not isinstance(exc, NotLeader):
                self.actuator.event(obj, "Warning", "SyncError", str(exc))
            raise
        if plan.actions:
            log.info("synced", extra={"controller": self.name, "object": where(obj), "actions": plan.describe()})
        return Result(requeue_after=plan.resync_after_seconds)

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
