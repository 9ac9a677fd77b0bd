"""A CompositeController at run time: caches -> hook -> decisions -> writes.

Reads parents and children from the shared informers, asks the pure layer
(`regokite.controllers`) what to do, and carries it out with the actuator.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from regokite.controllers import composite, rolling
from regokite.controllers.definitions import CompositeController
from regokite.controllers.hooks import HookError, ResolvedHook, group_children, run_hook, sync_request
from regokite.engine import Engine
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer
from regokite.kube.manager import Manager
from regokite.kube.related import RelatedResources
from regokite.kube.rolling import RollingUpdates
from regokite.ops import controller_metrics as metrics
from regokite.resources import controller_ref, owner_reference, refers_to

log = logging.getLogger("regokite.controller")


class CompositeRunner:
    def __init__(
        self,
        definition: CompositeController,
        *,
        manager: Manager,
        engine: Engine,
        actuator: Actuator,
        sync_hook: ResolvedHook,
        finalize_hook: ResolvedHook | None,
        discovery: Discovery,
        discovery_wait: float = 30.0,
        customize_hook: ResolvedHook | None = None,
    ) -> None:
        self.definition = definition
        self.name = definition.name
        self.manager = manager
        self.engine = engine
        self.actuator = actuator
        self.sync_hook = sync_hook
        self.finalize_hook = finalize_hook
        p = definition.parent
        self.parent_type = discovery.resolve(p.api_version, p.resource, wait=discovery_wait)
        self.child_types = [
            discovery.resolve(c.api_version, c.resource, wait=discovery_wait) for c in definition.children
        ]
        if self.parent_type.namespaced and any(not t.namespaced for t in self.child_types):
            bad = next(t for t in self.child_types if not t.namespaced)
            raise HookError(
                self.name, None, f"a namespaced parent cannot have cluster-scoped children ({bad.kind})", "InvalidSpec"
            )
        selector = None
        if p.label_selector:
            selector = composite.parse_selector(p.label_selector).query()
        factory = manager.informers
        self.parents: Informer = factory.informer(
            p.api_version, p.resource, namespaced=self.parent_type.namespaced, label_selector=selector
        )
        self.children: dict[str, Informer] = {
            t.key: factory.informer(t.api_version, t.resource, namespaced=t.namespaced) for t in self.child_types
        }
        self.parents.add_handler(self._on_parent)
        for inf in self.children.values():
            inf.add_handler(self._on_child)
        self.related = (
            RelatedResources(
                manager=manager,
                engine=engine,
                hook=customize_hook,
                discovery=discovery,
                controller=definition.raw,
                parent_namespaced=self.parent_type.namespaced,
                enqueue=lambda ns, name: manager.enqueue(self.name, ns, name),
            )
            if customize_hook is not None
            else None
        )
        rolls = any(c.update_method in rolling.ROLLING_METHODS for c in definition.children)
        self.rolling = RollingUpdates(self, manager=manager, actuator=actuator, discovery=discovery) if rolls else None
        manager.register(self)
        if definition.resync_period_seconds:
            manager.every(definition.resync_period_seconds, self.resync_all)

    # -- event handlers (informer threads: cheap, enqueue only)

    def _enqueue(self, obj: Mapping[str, Any], after: float = 0.0) -> None:
        meta = obj["metadata"]
        self.manager.enqueue(self.name, meta.get("namespace") or "", meta["name"], after)

    def _on_parent(self, event: str, new: dict | None, old: dict | None) -> None:
        if event == "MODIFIED" and new is not None and old is not None:
            if new["metadata"].get("resourceVersion") == old["metadata"].get("resourceVersion"):
                return
            if self.definition.parent.ignore_status_changes and _only_status_changed(new, old):
                return
        self._enqueue(new or old)

    def _on_child(self, event: str, new: dict | None, old: dict | None) -> None:
        seen: set[tuple[str, str]] = set()
        for obj in (new, old):
            if obj is None:
                continue
            ref = controller_ref(obj)
            ns = (obj["metadata"].get("namespace") or "") if self.parent_type.namespaced else ""
            if ref is not None:
                if refers_to(ref, self.parent_type):
                    seen.add((ns, ref["name"]))
                continue
            for parent in self.parents.list(ns if self.parent_type.namespaced else None):
                try:
                    selector = composite.parent_selector(self.definition, parent)
                except composite.SelectorError:
                    continue
                if selector.matches(obj["metadata"].get("labels")):
                    seen.add((parent["metadata"].get("namespace") or "", parent["metadata"]["name"]))
        for ns, name in seen:
            self.manager.enqueue(self.name, ns, name)

    def resync_all(self) -> None:
        for parent in self.parents.list():
            self._enqueue(parent)

    # -- one sync

    def reconcile(self, namespace: str, name: str) -> float | None:
        parent = self.parents.get(namespace, name)
        if parent is None:
            if self.related is not None:
                self.related.forget(namespace, name)
            return None  # deleted: the garbage collector removes the children
        meta = parent["metadata"]
        finalizer = self.definition.finalizer
        finalizers = list(meta.get("finalizers") or ())
        deleting = bool(meta.get("deletionTimestamp"))
        if deleting:
            if self.finalize_hook is None or finalizer not in finalizers:
                return None
            hook = self.finalize_hook
        else:
            hook = self.sync_hook
            if self.finalize_hook is not None and finalizer not in finalizers:
                parent = self.actuator.set_finalizers(self.parent_type, parent, [*finalizers, finalizer])
                metrics.applies.labels(self.name, self.parent_type.kind, "add-finalizer").inc()
            elif self.finalize_hook is None and finalizer in finalizers:
                kept = [f for f in finalizers if f != finalizer]
                parent = self.actuator.set_finalizers(self.parent_type, parent, kept)
        try:
            selector = composite.parent_selector(self.definition, parent)
        except composite.SelectorError as exc:
            self._warn(parent, "InvalidSelector", str(exc))
            raise HookError(self.name, None, str(exc), "InvalidSelector") from None

        observed = self._claim(parent, selector)
        request = sync_request(
            self.definition.raw,
            parent,
            group_children(self.child_types, observed, self.parent_type.namespaced),
            related=self.related.gather(parent) if self.related is not None else None,
            finalizing=deleting,
        )
        try:
            response = run_hook(
                self.engine,
                hook,
                request,
                types=self.child_types,
                parent=parent,
                parent_namespaced=self.parent_type.namespaced,
            )
        except HookError as exc:
            self._warn(parent, exc.reason, str(exc))
            raise
        metrics.evaluation_latency.labels(self.name, hook.package).observe(response.evaluation_seconds)

        desired = response.children
        if self.rolling is not None and not deleting:
            at = lambda then: self._children_for(hook, then, request)  # noqa: E731
            desired = self.rolling.desired(parent, observed, desired, at)
        actions = composite.plan_children(self.definition, parent, self.child_types, observed, desired)
        try:
            for action in actions:
                self._execute(action)
            status = composite.desired_status(parent, response.status)
            if status is not None:
                parent = self.actuator.set_status(self.parent_type, parent, status)
                metrics.applies.labels(self.name, self.parent_type.kind, "status").inc()
        except ApiError as exc:
            self._warn(parent, "SyncError", str(exc))
            raise
        self.actuator.finish(
            self.parent_type,
            parent,
            response.events,
            finalizer=finalizer,
            release=deleting and response.finalized,
            controller=self.name,
        )
        if actions:
            log.info(
                "synced",
                extra={
                    "controller": self.name,
                    "parent": f"{namespace}/{name}" if namespace else name,
                    "actions": [a.describe() for a in actions],
                },
            )
        return response.resync_after_seconds

    def _children_for(self, hook: ResolvedHook, parent: dict[str, Any], request: dict[str, Any]) -> tuple[dict, ...]:
        """The sync hook's children for the parent as it was at an older revision (rolling updates)."""
        response = run_hook(
            self.engine,
            hook,
            {**request, "parent": parent},
            types=self.child_types,
            parent=parent,
            parent_namespaced=self.parent_type.namespaced,
        )
        return response.children

    def _claim(self, parent: dict[str, Any], selector: composite.Selector) -> dict[str, list[dict[str, Any]]]:
        uid = parent["metadata"]["uid"]
        scope = parent["metadata"].get("namespace") if self.parent_type.namespaced else None
        observed: dict[str, list[dict[str, Any]]] = {}
        for t in self.child_types:
            inf = self.children[t.key]
            candidates = inf.owned_by(uid) + inf.orphans(scope)
            claims = composite.claim(parent, selector, candidates)
            owned = list(claims.owned)
            ours = owner_reference(parent)
            for obj in claims.adopt:
                refs = [*(obj["metadata"].get("ownerReferences") or ()), ours]
                try:
                    owned.append(self.actuator.set_owner_references(t, obj, refs))
                    metrics.applies.labels(self.name, t.kind, "adopt").inc()
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise
            for obj in claims.release:
                refs = [r for r in obj["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
                try:
                    self.actuator.set_owner_references(t, obj, refs)
                    metrics.applies.labels(self.name, t.kind, "release").inc()
                except ApiError as exc:
                    if exc.status not in (404, 409):
                        raise
            observed[t.key] = owned
        return observed

    def _execute(self, action: composite.Action) -> None:
        t = action.type
        if action.verb in ("create", "update"):
            self.actuator.apply(t, action.body)
        elif action.verb in ("delete", "recreate"):
            self.actuator.delete(t, action.namespace, action.name, action.uid)
        metrics.applies.labels(self.name, t.kind, action.verb).inc()

    def _warn(self, parent: dict[str, Any], reason: str, message: str) -> None:
        self.actuator.event(parent, "Warning", reason, message)


def _only_status_changed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    nm, om = new["metadata"], old["metadata"]
    if nm.get("generation") is not None and nm.get("generation") != om.get("generation"):
        return False
    for key in ("labels", "annotations", "finalizers", "deletionTimestamp", "ownerReferences"):
        if nm.get(key) != om.get(key):
            return False
    if nm.get("generation") is None:  # no generation: compare everything but status
        return {k: v for k, v in new.items() if k not in ("status", "metadata")} == {
            k: v for k, v in old.items() if k not in ("status", "metadata")
        }
    return True


def wait_settled(runner: CompositeRunner, timeout: float) -> bool:  # pragma: no cover - used by bench
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(runner.manager.queue) == 0 and runner.manager.in_flight == 0:
            return True
        time.sleep(0.05)
    return False
