"""A DecoratorController at run time: one reconciler per target resource.

Reads targets and attachments from the shared informers, runs the (customize
and) sync or finalize hook, applies labels and annotations with server-side
apply under the decorator's own field manager, replaces status when the hook
sets it, and converges attachments like a composite's children.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from regokite.controllers import children
from regokite.controllers.decorator import decisions
from regokite.controllers.decorator.decisions import DecoratorController, TargetResource
from regokite.controllers.hooks import HookEvaluator, HookResponse, ResolvedHook
from regokite.controllers.sync_reconciler import Observed, SyncReconciler
from regokite.kube.actuator import Actuator
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer
from regokite.resources import ChildType, controller_ref, refers_to, same_version
from regokite.runtime import shard_cache
from regokite.runtime.manager import Manager
from regokite.selectors import parse_selector


class DecoratorRunner:
    """Builds one `DecoratorTarget` reconciler for each rule of `spec.resources`."""

    def __init__(
        self,
        definition: DecoratorController,
        *,
        manager: Manager,
        evaluator: HookEvaluator,
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
        target_types = [discovery.resolve(r.api_version, r.resource, wait=discovery_wait) for r in definition.resources]
        share = shard_cache.owner_role({t.namespaced for t in target_types})
        self.attachments: dict[str, Informer] = {
            t.key: factory.informer(t.api_version, t.resource, namespaced=t.namespaced, share=share)
            for t in self.attachment_types
        }
        self.targets = [
            DecoratorTarget(
                self,
                rule,
                t,
                manager=manager,
                evaluator=evaluator,
                actuator=actuator,
                customize_hook=customize_hook,
                discovery=discovery,
            )
            for rule, t in zip(definition.resources, target_types, strict=True)
        ]
        for inf in self.attachments.values():
            inf.add_handler(self._on_attachment)

    def _on_attachment(self, event: str, new: dict | None, old: dict | None) -> None:
        for obj in (new, old):
            if obj is None:
                continue
            if ((obj["metadata"].get("annotations") or {}).get(decisions.DECORATOR_ANNOTATION)) != self.name:
                continue
            ref = controller_ref(obj)
            if ref is None:
                continue
            for target in self.targets:
                if refers_to(ref, target.type):
                    ns = (obj["metadata"].get("namespace") or "") if target.type.namespaced else ""
                    target.manager.enqueue(target.name, ns, ref["name"])


class DecoratorTarget(SyncReconciler):
    request_names = ("object", "attachments")
    observed_generation = False  # a decorator's status is the hook's, as it answered
    status_rereads = 0  # Metacontroller's UpdateStatus on the cached version: a 409 leaves it to the next sync
    translate = staticmethod(decisions.translate_response)

    def __init__(
        self,
        runner: DecoratorRunner,
        rule: TargetResource,
        t: ChildType,
        *,
        manager: Manager,
        evaluator: HookEvaluator,
        actuator: Actuator,
        customize_hook: ResolvedHook | None,
        discovery: Discovery,
    ) -> None:
        d = runner.definition
        hooks = (runner.sync_hook, runner.finalize_hook)
        super().__init__(d, f"{d.name}/{t.resource}.{t.api_version}", t, runner.attachment_types, *hooks, manager)
        self.runner, self.rule, self.evaluator, self.actuator = runner, rule, evaluator, actuator
        # a target's status is often another controller's (a Deployment's): a failing sync is reported
        # there only when this decorator's hook writes the status itself
        self.writes_failing_condition = "status" in runner.sync_hook.rules
        selector = parse_selector(rule.label_selector).query() if rule.label_selector else None
        # With a finalize hook, targets that stop matching the label selector must still be seen to finalize.
        if runner.finalize_hook is not None:
            selector = None
        self.informer = manager.informers.informer(
            t.api_version, t.resource, namespaced=t.namespaced, label_selector=selector, share=shard_cache.SELF
        )
        self.informer.add_handler(self._on_target)
        self.related = self._related(manager, evaluator, customize_hook, discovery)
        self._applied: dict[str, str] = {}  # uid -> hash of the last labels/annotations apply
        self._lock = threading.Lock()
        manager.register(self)
        if d.resync_period_seconds:
            manager.every(d.resync_period_seconds, self.resync_all)

    def _on_target(self, event: str, new: dict | None, old: dict | None) -> None:
        if same_version(new, old):
            return
        obj = new or old
        meta = obj["metadata"]
        if new is None:
            with self._lock:
                self._applied.pop(meta.get("uid", ""), None)
            if self.related is not None:
                self.related.forget(meta.get("namespace") or "", meta["name"])
        self.manager.enqueue(self.name, meta.get("namespace") or "", meta["name"])

    def keys(self) -> list[tuple[str, str]]:
        return self.informer.keys()

    def resync_all(self, only: Callable[[str, str], bool] | None = None) -> None:
        for obj in self.informer.list():
            meta = obj["metadata"]
            if only is None or only(meta.get("namespace") or "", meta["name"]):
                self.manager.enqueue(self.name, meta.get("namespace") or "", meta["name"])

    # -- one sync (the steps are SyncReconciler's)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.informer.get(namespace, name)

    def cache_informers(self) -> list[Informer]:
        return [self.informer, *self.runner.attachments.values()]

    def selects(self, obj: Mapping[str, Any]) -> bool:
        return self.rule.selects(obj)

    def observe(self, obj: dict[str, Any]) -> Observed:
        uid = obj["metadata"]["uid"]
        return {
            t.key: decisions.owned_attachments(self.definition, obj, self.runner.attachments[t.key].owned_by(uid))
            for t in self.child_types
        }

    def write_beside(self, obj: dict[str, Any], response: HookResponse) -> dict[str, Any]:
        """Labels and annotations, applied under the decorator's own field manager when they changed."""
        labels, annotations = response.labels, response.annotations
        body = decisions.metadata_apply(self.type, obj, labels, annotations)
        fingerprint = children.content_hash({k: v for k, v in body["metadata"].items() if k != "resourceVersion"})
        uid = obj["metadata"].get("uid", "")
        with self._lock:
            unchanged = self._applied.get(uid) == fingerprint
        if unchanged and decisions.metadata_settled(obj, labels, annotations):
            return obj
        d = self.definition
        result = self.actuator.apply(self.type, body, controller=d.name, verb="labels", field_manager=d.field_manager)
        with self._lock:
            self._applied[uid] = fingerprint
        return result
