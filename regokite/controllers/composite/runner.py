"""A CompositeController at run time: caches -> hook -> decisions -> writes.

Reads parents and children from the shared informers, asks the pure layer
(`regokite.controllers`) what to do, and carries it out with the actuator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from regokite.controllers.composite import decisions, rolling
from regokite.controllers.composite.rolling_runner import RollingUpdates
from regokite.controllers.definitions import CompositeController
from regokite.controllers.hooks import HookEvaluator, ResolvedHook
from regokite.controllers.sync_reconciler import Observed, SyncReconciler
from regokite.errors import HookError
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer
from regokite.resources import controller_ref, owner_reference, refers_to, same_version
from regokite.runtime import shard_cache
from regokite.runtime.manager import Manager
from regokite.selectors import SelectorError, parse_selector


class CompositeRunner(SyncReconciler):
    def __init__(
        self,
        definition: CompositeController,
        *,
        manager: Manager,
        evaluator: HookEvaluator,
        actuator: Actuator,
        sync_hook: ResolvedHook,
        finalize_hook: ResolvedHook | None,
        discovery: Discovery,
        discovery_wait: float = 30.0,
        customize_hook: ResolvedHook | None = None,
    ) -> None:
        p = definition.parent
        self.parent_type = discovery.resolve(p.api_version, p.resource, wait=discovery_wait)
        children = [discovery.resolve(c.api_version, c.resource, wait=discovery_wait) for c in definition.children]
        super().__init__(definition, definition.name, self.parent_type, children, sync_hook, finalize_hook, manager)
        self.evaluator, self.actuator = evaluator, actuator
        selector = None
        if p.label_selector:
            selector = parse_selector(p.label_selector).query()
        factory = manager.informers
        self.parents: Informer = factory.informer(
            p.api_version,
            p.resource,
            namespaced=self.parent_type.namespaced,
            label_selector=selector,
            share=shard_cache.SELF,
        )
        share = shard_cache.owner_role({self.parent_type.namespaced})
        self.children: dict[str, Informer] = {
            t.key: factory.informer(t.api_version, t.resource, namespaced=t.namespaced, share=share)
            for t in self.child_types
        }
        self.parents.add_handler(self._on_parent)
        for inf in self.children.values():
            inf.add_handler(self._on_child)
        self.related = self._related(manager, evaluator, customize_hook, discovery)
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
        if same_version(new, old):
            return
        ignore_status = self.definition.parent.ignore_status_changes
        if ignore_status and new is not None and old is not None and _only_status_changed(new, old):
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
                    selector = decisions.parent_selector(self.definition, parent)
                except SelectorError:
                    continue
                if selector.matches(obj["metadata"].get("labels")):
                    seen.add((parent["metadata"].get("namespace") or "", parent["metadata"]["name"]))
        for ns, name in seen:
            self.manager.enqueue(self.name, ns, name)

    def keys(self) -> list[tuple[str, str]]:
        return self.parents.keys()

    def resync_all(self, only: Callable[[str, str], bool] | None = None) -> None:
        for parent in self.parents.list():
            if only is None or only(parent["metadata"].get("namespace") or "", parent["metadata"]["name"]):
                self._enqueue(parent)

    # -- one sync (the steps are SyncReconciler's)

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.parents.get(namespace, name)

    def cache_informers(self) -> list[Informer]:
        return [self.parents, *self.children.values()]

    def observe(self, parent: dict[str, Any]) -> Observed:
        """The children this parent owns, after adopting matching orphans and releasing what stopped matching."""
        try:
            selector = decisions.parent_selector(self.definition, parent)
        except SelectorError as exc:
            raise HookError(self.name, None, str(exc), "InvalidSelector") from None
        uid = parent["metadata"]["uid"]
        scope = parent["metadata"].get("namespace") if self.type.namespaced else None
        ours = owner_reference(parent)
        observed: dict[str, list[dict[str, Any]]] = {}
        for t in self.child_types:
            inf = self.children[t.key]
            claims = decisions.claim(parent, selector, inf.owned_by(uid) + inf.orphans(scope))
            owned = list(claims.owned)
            for obj, refs, verb in [
                *((o, [*(o["metadata"].get("ownerReferences") or ()), ours], "adopt") for o in claims.adopt),
                *(
                    (o, [r for r in o["metadata"].get("ownerReferences") or () if r.get("uid") != uid], "release")
                    for o in claims.release
                ),
            ]:
                try:
                    claimed = self.actuator.set_owner_references(t, obj, refs, controller=self.name, verb=verb)
                except ApiError as exc:
                    if exc.status not in (404, 409):  # gone, or changed: the next sync decides again
                        raise
                    continue
                if verb == "adopt":
                    owned.append(claimed)
            observed[t.key] = owned
        return observed


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
