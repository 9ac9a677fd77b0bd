"""A Watch at run time: informer events -> per-object event log -> Rego -> writes.

The work queue is level-triggered (a key waiting is queued once), so the
events themselves are kept beside it, per object, in order: a key's worker
delivers each recorded change to the policy (ADDED then MODIFIED stay two
events), and a key is never processed by two workers at once, so an
object's events are handled in the order they happened. A failed write
leaves the event at the head of its log and the key is retried with
backoff; a policy whose output is invalid gets a Warning Event and that
event is dropped (the same input would fail the same way).

A patch of the watched object is made "as of" the object the policy saw: it
carries that resourceVersion as a precondition. When the object has changed
since, the write is refused (409), the decision is dropped as stale and the
newer event, already on its way, is decided on the newer state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from regokite import outline
from regokite.controllers.hooks import HookEvaluator, ResolvedHook
from regokite.controllers.watch import decisions as contract
from regokite.errors import HookError, RegokiteError
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError
from regokite.kube.discovery import Discovery
from regokite.kube.informer import Informer, Key, key_of
from regokite.ops import controller_metrics as metrics
from regokite.resources import ChildType, same_version, where
from regokite.runtime import shard_cache
from regokite.runtime.manager import Manager
from regokite.runtime.reconcile import Result

log = logging.getLogger("regokite.watch")
MAX_PENDING = 64  # per object; beyond it consecutive MODIFIED events are merged (old of the first, new of the last)

Event = tuple[str, dict[str, Any], dict[str, Any] | None]  # (event, object, oldObject)


class WatchRunner:
    def __init__(
        self,
        watch: contract.Watch,
        *,
        manager: Manager,
        evaluator: HookEvaluator,
        actuator: Actuator,
        discovery: Discovery,
        hook: ResolvedHook,
        discovery_wait: float = 30.0,
    ) -> None:
        self.watch, self.name, self.hook = watch, f"watch/{watch.name}", hook
        self.manager, self.evaluator, self.actuator, self.discovery = manager, evaluator, actuator, discovery
        r = watch.resource
        if r.resource:
            self.type = discovery.resolve(r.api_version, r.resource, wait=discovery_wait)
        else:
            self.type = discovery.resolve_kind(r.api_version, r.kind or "", wait=discovery_wait)
        if r.kind and r.kind != self.type.kind:
            raise RegokiteError(
                f"{watch.source}: Watch {watch.name}: spec.resource: "
                f"{self.type.resource} are {self.type.kind}, not {r.kind}"
            )
        self.informer: Informer = manager.informers.informer(
            self.type.api_version,
            self.type.resource,
            namespaced=self.type.namespaced,
            label_selector=watch.label_selector,
            field_selector=watch.field_selector,
            namespace=watch.namespace,
            share=shard_cache.SELF,
        )
        self._pending: dict[Key, deque[Event]] = {}
        self._lock = threading.Lock()
        self.informer.add_handler(self._on_event)
        manager.register(self, workers=watch.workers)
        if watch.resync_period_seconds:
            manager.every(watch.resync_period_seconds, self.resync_all)

    # -- recording events (informer threads: cheap)

    def _on_event(self, event: str, new: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
        if not self.manager.leading:
            return  # a standby records nothing; on becoming leader every object gets a RESYNC
        if event == "DELETED":
            assert old is not None
            self._record(("DELETED", old, None))
        elif same_version(new, old):
            return
        elif event == "MODIFIED" and new is not None and old is not None:
            self._record(("MODIFIED", new, old))
        elif new is not None:
            self._record((event, new, old))

    def _record(self, ev: Event) -> None:
        k = key_of(ev[1])
        if not self.manager.owns(*k):
            return  # another shard's object: its owner records the event
        with self._lock:
            q = self._pending.setdefault(k, deque())
            if ev[0] == "RESYNC" and q:
                return  # a change is already waiting: it carries the latest state
            if len(q) >= MAX_PENDING and ev[0] == "MODIFIED" and q[-1][0] == "MODIFIED" and len(q) > 1:
                q[-1] = ("MODIFIED", ev[1], q[-1][2])
            else:
                q.append(ev)
        self.manager.enqueue(self.name, k[0], k[1])

    def resync_all(self, only: Callable[[str, str], bool] | None = None) -> None:
        if not self.manager.leading:
            return
        for obj in self.informer.list():
            if only is None or only(*key_of(obj)):
                self._record(("RESYNC", obj, None))

    def keys(self) -> list[Key]:
        return self.informer.keys()

    def disown(self, namespace: str, name: str) -> None:
        """The object went to another shard: its events here are that replica's to deliver."""
        with self._lock:
            self._pending.pop((namespace, name), None)

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._pending.values())

    # -- delivering (worker threads; one key at a time)

    def reconcile(self, namespace: str, name: str) -> Result:
        k = (namespace, name)
        while True:
            with self._lock:
                q = self._pending.get(k)
                if not q:
                    self._pending.pop(k, None)
                    return Result()
                ev = q[0]
            self._deliver(ev)
            with self._lock:
                q = self._pending.get(k)
                if q and q[0] is ev:
                    q.popleft()

    def _deliver(self, ev: Event) -> None:
        event, obj, old = ev
        metrics.watch_events.labels(self.watch.name, event).inc()
        try:
            decision = self.decide(event, obj, old)
            for line in decision.log:
                log.log(
                    logging.getLevelName(line.level.upper()),
                    line.msg,
                    extra={
                        "watch": self.watch.name,
                        "event": event,
                        "object": where(obj),
                        "policy": self.watch.package,
                    },
                )
            if not self._execute(event, obj, decision):
                return
        except HookError as exc:  # the same input would fail the same way: report, drop, go on
            log.warning(
                "watch policy failed; event dropped",
                extra={"watch": self.watch.name, "event": event, "object": where(obj), "error": str(exc)[:1000]},
            )
            metrics.reconcile_errors.labels(self.name, exc.reason).inc()
            self.actuator.event(obj, "Warning", exc.reason, str(exc))
            return
        for e in decision.events:
            self.actuator.event(obj, e.type, e.reason, e.message)

    def decide(self, event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> contract.WatchDecision:
        """Evaluate the policy for one event and validate its output (no writes)."""
        request = contract.watch_input(event, obj, old, self.watch.params)
        started = time.perf_counter()
        raw = self.evaluator.evaluate(self.hook, request)
        elapsed = time.perf_counter() - started
        metrics.evaluation_latency.labels(self.name, self.watch.package).observe(elapsed)
        return contract.translate(self.watch.package, raw, event=event)

    # -- writes

    def _execute(self, event: str, obj: Mapping[str, Any], d: contract.WatchDecision) -> bool:
        """Carry out a decision; False when it was dropped as stale."""
        done: list[str] = []
        if d.patch:
            if not self._patch(obj, d):
                return False
            done.append(f"patch {where(obj)}")
        namespace = (obj.get("metadata") or {}).get("namespace") if self.type.namespaced else None
        for i, body in enumerate(d.apply):
            t = self._type_of(body["apiVersion"], body["kind"], "apply", i)
            body = self._place(t, body, namespace, "apply", i)
            self.actuator.apply(t, body, controller=self.name)
            done.append(f"apply {t.kind} {where(body)}")
        for i, ref in enumerate(d.delete):
            t = self._type_of(ref.api_version, ref.kind, "delete", i)
            ns = ref.namespace or namespace if t.namespaced else None
            if t.namespaced and not ns:
                raise HookError(self.watch.package, "delete", f"delete[{i}] needs a namespace: {ref.describe()}")
            if self.actuator.delete(t, ns, ref.name, ref.uid, controller=self.name):
                done.append(f"delete {ref.describe()}")
        if done:
            log.info(
                "watch acted",
                extra={"watch": self.watch.name, "event": event, "object": where(obj), "actions": done},
            )
        return True

    def _patch(self, obj: Mapping[str, Any], d: contract.WatchDecision) -> bool:
        """Patch the watched object as of the version the policy saw; False when it changed since."""
        assert d.patch is not None
        try:
            self.actuator.patch(self.type, obj, d.patch, controller=self.name, field_manager=self.actuator.manager)
        except ApiError as exc:
            if exc.status not in (404, 409, 422):
                raise
            meta = obj["metadata"]
            current = self.actuator.read(self.type, meta.get("namespace"), meta["name"])
            if current is None or current["metadata"].get("resourceVersion") != meta.get("resourceVersion"):
                metrics.stale_writes.labels(self.watch.name).inc()
                log.info(
                    "decision dropped: the object changed since the event",
                    extra={"watch": self.watch.name, "object": where(obj), "seen": meta.get("resourceVersion")},
                )
                return False
            if exc.status == 422:  # not our precondition: the patch itself is invalid
                raise HookError(self.watch.package, "patch", f"rejected by the API server: {exc}") from None
            raise
        return True

    def _type_of(self, api_version: str, kind: str, rule: str, i: int) -> ChildType:
        if (api_version, kind) == (self.type.api_version, self.type.kind):
            return self.type
        try:
            return self.discovery.resolve_kind(api_version, kind)
        except RegokiteError as exc:
            raise HookError(self.watch.package, rule, f"{rule}[{i}]: {exc}", reason="UnknownKind") from None

    def _place(self, t: ChildType, body: dict[str, Any], namespace: str | None, rule: str, i: int) -> dict[str, Any]:
        meta = body["metadata"]
        if t.namespaced and not meta.get("namespace"):
            if not namespace:
                raise HookError(self.watch.package, rule, f"{rule}[{i}] needs metadata.namespace: {where(body)}")
            body = {**body, "metadata": {**meta, "namespace": namespace}}
        elif not t.namespaced and meta.get("namespace"):
            raise HookError(self.watch.package, rule, f"{rule}[{i}]: {t.kind} is cluster-scoped; drop the namespace")
        return body


def build_watches(
    watches: Iterable[contract.Watch],
    assignments: list[str],
    *,
    manager: Manager,
    evaluator: HookEvaluator,
    actuator: Actuator,
    discovery: Discovery,
    discovery_wait: float = 30.0,
) -> list[WatchRunner]:
    """Every Watch, its params overridden by `--var`, checked against the policies, registered."""
    watches = contract.override_params(watches, assignments)
    packages = outline.packages(outline.outline(evaluator.bundle.modules))
    runners = []
    for w in watches:
        try:
            hook = contract.resolve_outputs(w.package, packages)
        except HookError as exc:
            raise RegokiteError(f"{w.source}: Watch {w.name}: spec.policy.package: {exc}") from None
        runner = WatchRunner(
            w,
            manager=manager,
            evaluator=evaluator,
            actuator=actuator,
            discovery=discovery,
            hook=hook,
            discovery_wait=discovery_wait,
        )
        runners.append(runner)
        log.info(
            "watch loaded",
            extra={
                "watch": w.name,
                "resource": runner.type.key,
                "namespace": runner.informer.namespace,
                "labelSelector": w.label_selector,
                "fieldSelector": w.field_selector,
                "policy": w.package,
                "outputs": list(hook.rules) or "(whole rule)",
                "params": w.params,
                "workers": w.workers,
                "resync": w.resync_period_seconds,
            },
        )
    return runners
