"""A DecoratorController at run time: one reconciler per target resource.

Reads targets and attachments from the shared informers, runs the (customize
and) sync or finalize hook, applies labels and annotations with server-side
apply under the decorator's own field manager, replaces status when the hook
sets it, and converges attachments like a composite's children.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from regokite.controllers import composite, decorator
from regokite.controllers.decorator import DecoratorController, TargetResource
from regokite.controllers.hooks import HookError, ResolvedHook, evaluate_hook, group_children
from regokite.engine import Engine
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer
from regokite.kube.manager import Manager
from regokite.kube.related import RelatedResources
from regokite.ops import controller_metrics as metrics
from regokite.resources import ChildType, controller_ref, refers_to

log = logging.getLogger("regokite.controller")


class DecoratorRunner:
    """Builds one `DecoratorTarget` reconciler for each rule of `spec.resources`."""

    def __init__(
        self,
        definition: DecoratorController,
        *,
        manager: Manager,
        engine: Engine,
        actuator: Actuator,
        sync_hook: ResolvedHook,
        finalize_hook: ResolvedHook | None,
        customize_hook: ResolvedHook | None,
        discovery: Discovery,
        discovery_wait: float = 30.0,
    ) -> None:
        self.definition = definition
        self.name = definition.name
        self.sync_hook = sync_hook
        self.finalize_hook = finalize_hook
        self.attachment_types = [
            discovery.resolve(a.api_version, a.resource, wait=discovery_wait) for a in definition.attachments
        ]
        factory = manager.informers
        self.attachments: dict[str, Informer] = {
            t.key: factory.informer(t.api_version, t.resource, namespaced=t.namespaced) for t in self.attachment_types
        }
        self.targets = [
            DecoratorTarget(
                self,
                rule,
                discovery.resolve(rule.api_version, rule.resource, wait=discovery_wait),
                manager=manager,
                engine=engine,
                actuator=actuator,
                customize_hook=customize_hook,
                discovery=discovery,
            )
            for rule in definition.resources
        ]
        for inf in self.attachments.values():
            inf.add_handler(self._on_attachment)

    def _on_attachment(self, event: str, new: dict | None, old: dict | None) -> None:
        for obj in (new, old):
            if obj is None:
                continue
            if ((obj["metadata"].get("annotations") or {}).get(decorator.DECORATOR_ANNOTATION)) != self.name:
                continue
            ref = controller_ref(obj)
            if ref is None:
                continue
            for target in self.targets:
                if refers_to(ref, target.type):
                    ns = (obj["metadata"].get("namespace") or "") if target.type.namespaced else ""
                    target.manager.enqueue(target.name, ns, ref["name"])


class DecoratorTarget:
    def __init__(
        self,
        runner: DecoratorRunner,
        rule: TargetResource,
        t: ChildType,
        *,
        manager: Manager,
        engine: Engine,
        actuator: Actuator,
        customize_hook: ResolvedHook | None,
        discovery: Discovery,
    ) -> None:
        d = runner.definition
        self.runner = runner
        self.definition = d
        self.rule = rule
        self.type = t
        self.name = f"{d.name}/{t.resource}.{t.api_version}"
        self.manager = manager
        self.engine = engine
        self.actuator = actuator
        if t.namespaced and any(not a.namespaced for a in runner.attachment_types):
            bad = next(a for a in runner.attachment_types if not a.namespaced)
            raise HookError(d.name, None, f"a namespaced target cannot have cluster-scoped attachments ({bad.kind})")
        selector = composite.parse_selector(rule.label_selector).query() if rule.label_selector else None
        # With a finalize hook, targets that stop matching the label selector must still be seen to finalize.
        if runner.finalize_hook is not None:
            selector = None
        self.informer = manager.informers.informer(
            t.api_version, t.resource, namespaced=t.namespaced, label_selector=selector
        )
        self.informer.add_handler(self._on_target)
        self.related = (
            RelatedResources(
                manager=manager,
                engine=engine,
                hook=customize_hook,
                discovery=discovery,
                controller=d.raw,
                parent_namespaced=t.namespaced,
                enqueue=lambda ns, name: manager.enqueue(self.name, ns, name),
            )
            if customize_hook is not None
            else None
        )
        self._applied: dict[str, str] = {}  # uid -> hash of the last labels/annotations apply
        self._lock = threading.Lock()
        manager.register(self)
        if d.resync_period_seconds:
            manager.every(d.resync_period_seconds, self.resync_all)

    def _on_target(self, event: str, new: dict | None, old: dict | None) -> None:
        same = (
            new is not None
            and old is not None
            and new["metadata"].get("resourceVersion") == old["metadata"].get("resourceVersion")
        )
        if same:
            return
        obj = new or old
        meta = obj["metadata"]
        if new is None:
            with self._lock:
                self._applied.pop(meta.get("uid", ""), None)
            if self.related is not None:
                self.related.forget(meta.get("namespace") or "", meta["name"])
        self.manager.enqueue(self.name, meta.get("namespace") or "", meta["name"])

    def resync_all(self) -> None:
        for obj in self.informer.list():
            meta = obj["metadata"]
            self.manager.enqueue(self.name, meta.get("namespace") or "", meta["name"])

    # -- one sync

    def reconcile(self, namespace: str, name: str) -> float | None:
        obj = self.informer.get(namespace, name)
        if obj is None:
            return None
        d = self.definition
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or ())
        has_finalizer = d.finalizer in finalizers
        selected = self.rule.selects(obj)
        if not selected and not has_finalizer:
            return None  # not ours (and nothing to clean up)
        deleting = bool(meta.get("deletionTimestamp"))
        finalize_hook = self.runner.finalize_hook
        if deleting:
            if finalize_hook is None or not has_finalizer:
                return None
            hook = finalize_hook
        elif not selected:  # stopped matching: clean up (with a finalize hook), then let go
            if finalize_hook is None:
                self.actuator.set_finalizers(self.type, obj, [f for f in finalizers if f != d.finalizer])
                return None
            hook = finalize_hook
        else:
            hook = self.runner.sync_hook
            if finalize_hook is not None and not has_finalizer:
                obj = self.actuator.set_finalizers(self.type, obj, [*finalizers, d.finalizer])
                metrics.applies.labels(d.name, self.type.kind, "add-finalizer").inc()
            elif finalize_hook is None and has_finalizer:
                obj = self.actuator.set_finalizers(self.type, obj, [f for f in finalizers if f != d.finalizer])
        finalizing = hook is finalize_hook

        observed = {
            t.key: decorator.owned_attachments(d, obj, self._candidates(t, obj)) for t in self.runner.attachment_types
        }
        related = self.related.gather(obj) if self.related is not None else {}
        request = decorator.sync_request(
            d.raw,
            obj,
            group_children(self.runner.attachment_types, observed, self.type.namespaced),
            related=related,
            finalizing=finalizing,
        )
        try:
            raw = evaluate_hook(self.engine, hook, request)
            response = decorator.translate_response(
                hook.package, raw, types=self.runner.attachment_types, obj=obj, namespaced=self.type.namespaced
            )
        except HookError as exc:
            self.actuator.event(obj, "Warning", exc.reason, str(exc))
            raise

        desired = decorator.mark_attachments(d, response.attachments)
        actions = composite.plan_children(d, obj, self.runner.attachment_types, observed, desired)
        try:
            for action in actions:
                if action.verb in ("create", "update"):
                    self.actuator.apply(action.type, action.body)
                elif action.verb in ("delete", "recreate"):
                    self.actuator.delete(action.type, action.namespace, action.name, action.uid)
                metrics.applies.labels(d.name, action.type.kind, action.verb).inc()
            obj = self._apply_metadata(obj, response.labels, response.annotations)
            if response.status is not None and response.status != obj.get("status"):
                obj = self.actuator.set_status(self.type, obj, response.status)
                metrics.applies.labels(d.name, self.type.kind, "status").inc()
        except ApiError as exc:
            if exc.status == 409:
                raise HookError(d.name, None, f"{exc} (retrying)", "Conflict") from None
            self.actuator.event(obj, "Warning", "SyncError", str(exc))
            raise
        self.actuator.finish(
            self.type,
            obj,
            response.events,
            finalizer=d.finalizer,
            release=finalizing and response.finalized,
            controller=d.name,
        )
        if actions:
            log.info(
                "decorated",
                extra={
                    "controller": d.name,
                    "object": f"{namespace}/{name}" if namespace else name,
                    "actions": [a.describe() for a in actions],
                },
            )
        return response.resync_after_seconds

    def _candidates(self, t: ChildType, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self.runner.attachments[t.key].owned_by(obj["metadata"]["uid"])

    def _apply_metadata(
        self, obj: dict[str, Any], labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
    ) -> dict[str, Any]:
        body = decorator.metadata_apply(self.type, obj, labels, annotations)
        fingerprint = composite.content_hash({k: v for k, v in body["metadata"].items() if k != "resourceVersion"})
        uid = obj["metadata"].get("uid", "")
        with self._lock:
            unchanged = self._applied.get(uid) == fingerprint
        if unchanged and decorator.metadata_settled(obj, labels, annotations):
            return obj
        meta = obj["metadata"]
        path = self.actuator.path(self.type, meta.get("namespace"), meta["name"])
        result = self.actuator.client.apply(path, body, self.definition.field_manager, force=True)
        metrics.applies.labels(self.definition.name, self.type.kind, "labels").inc()
        with self._lock:
            self._applied[uid] = fingerprint
        return result
