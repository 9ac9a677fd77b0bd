"""Related resources at run time: the customize hook, informers for what it asks, an index.

For each parent the customize hook is evaluated on every sync; the rules it
returns are remembered per parent and indexed by resource, so a change to a
related object re-queues exactly the parents whose rules select it (before or
after the change). Informers for related types are started on first use and
shared through the manager's factory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from regokite.controllers import customize
from regokite.controllers.hooks import HookEvaluator, ResolvedHook
from regokite.errors import HookError
from regokite.kube.discovery import Discovery, DiscoveryError
from regokite.kube.informer import Informer
from regokite.ops import controller_metrics as metrics
from regokite.resources import ChildType, same_version
from regokite.runtime.manager import Manager

ParentKey = tuple[str, str]  # (namespace or "", name)
SYNC_WAIT_SECONDS = 15.0


class RelatedResources:
    def __init__(
        self,
        *,
        manager: Manager,
        evaluator: HookEvaluator,
        hook: ResolvedHook,
        discovery: Discovery,
        controller: Mapping[str, Any],
        parent_namespaced: bool,
        enqueue: Callable[[str, str], None],
    ) -> None:
        self.manager = manager
        self.evaluator = evaluator
        self.hook = hook
        self.discovery = discovery
        self.controller = controller
        self.parent_namespaced = parent_namespaced
        self.enqueue = enqueue
        self._lock = threading.Lock()
        self._rules: dict[ParentKey, tuple[customize.RelatedRule, ...]] = {}
        self._by_resource: dict[tuple[str, str], set[ParentKey]] = {}
        self._informers: dict[tuple[str, str], tuple[Informer, ChildType]] = {}

    def gather(self, parent: Mapping[str, Any], *, uniform: bool = False) -> dict[str, dict[str, Any]]:
        """Run the customize hook for `parent`, index its rules, return the `related` input, keyed as
        the calling hook's version says (`uniform`: v2). Which objects a rule may select follows the
        customize hook's own version, as in Metacontroller."""
        try:
            raw = self.evaluator.evaluate(self.hook, customize.customize_request(self.controller, parent))
        except HookError as exc:
            raise HookError(exc.package, exc.rule, f"customize hook: {exc.message}", exc.reason) from None
        rules = customize.translate_related(
            self.hook.package,
            raw,
            parent=parent,
            parent_namespaced=self.parent_namespaced,
            any_namespace=self.hook.target.uniform,
        )
        meta = parent["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        typed: list[tuple[customize.RelatedRule, ChildType]] = []
        for rule in rules:
            inf, t = self._informer(rule)
            typed.append((rule, t))
        self._index(key, rules)
        objects = {}
        for rule, _ in typed:
            inf, _t = self._informers[(rule.api_version, rule.resource)]
            if not inf.synced.wait(SYNC_WAIT_SECONDS):
                raise HookError(self.hook.package, None, f"related {inf.name} not listed yet", "RelatedNotSynced")
            objects[(rule.api_version, rule.resource)] = inf.list(rule.namespace)
        return customize.group_related(typed, objects, self.parent_namespaced, uniform)

    def forget(self, namespace: str, name: str) -> None:
        self._index((namespace, name), ())

    def watching(self, namespace: str, name: str) -> tuple[customize.RelatedRule, ...]:
        with self._lock:
            return self._rules.get((namespace, name), ())

    # -- internals

    def _informer(self, rule: customize.RelatedRule) -> tuple[Informer, ChildType]:
        k = (rule.api_version, rule.resource)
        with self._lock:
            found = self._informers.get(k)
        if found:
            return found
        try:
            t = self.discovery.resolve(rule.api_version, rule.resource, wait=2.0)
        except DiscoveryError as exc:
            raise HookError(self.hook.package, "relatedResources", str(exc), "InvalidRelatedResource") from None
        inf = self.manager.informers.informer(rule.api_version, rule.resource, namespaced=t.namespaced)
        with self._lock:
            if k in self._informers:
                return self._informers[k]
            self._informers[k] = (inf, t)
        inf.add_handler(lambda event, new, old, k=k: self._on_related(k, new, old))
        return inf, t

    def _index(self, key: ParentKey, rules: tuple[customize.RelatedRule, ...]) -> None:
        with self._lock:
            for r in self._rules.get(key, ()):
                parents = self._by_resource.get((r.api_version, r.resource))
                if parents is not None:
                    parents.discard(key)
            if rules:
                self._rules[key] = rules
                for r in rules:
                    self._by_resource.setdefault((r.api_version, r.resource), set()).add(key)
            else:
                self._rules.pop(key, None)

    def _on_related(self, k: tuple[str, str], new: dict | None, old: dict | None) -> None:
        if same_version(new, old):
            return
        hit: list[ParentKey] = []
        with self._lock:
            for key in self._by_resource.get(k, ()):
                for r in self._rules.get(key, ()):
                    if (r.api_version, r.resource) == k and any(o is not None and r.matches(o) for o in (new, old)):
                        hit.append(key)
                        break
        name = (self.controller.get("metadata") or {}).get("name", "")
        metrics.related_events.labels(name, "requeued" if hit else "ignored").inc()
        for ns, parent in hit:
            self.enqueue(ns, parent)
