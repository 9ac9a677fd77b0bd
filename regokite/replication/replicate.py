"""Replication: informers filling a ReplicaStore, and when it may be trusted.

One informer per resource (list, then watch; `metadata.managedFields` is
dropped by the informer), each event one change of the store. The store is
ready once every informer has listed and its whole cache is in the store:
until then a policy reading it would decide on a partial inventory.

The admission server runs one in its feeder process (`replica_feed`), which
every worker mirrors; the audit runs one in its own process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from regokite.clusterdata.store import Obj, ReplicaStore, ResourceRef
from regokite.input_guard import InputRejected
from regokite.kube.client import ApiError, KubeClient, resource_path
from regokite.kube.informer import Informer
from regokite.ops.replication_metrics import replicated_events, replicated_objects
from regokite.selectors import glob_matches

log = logging.getLogger("regokite.clusterdata")


class ReplicationUnavailable(ApiError):
    """The API server refuses to list a resource to replicate (RBAC, or no such resource)."""


class Replicator:
    """Keeps `store` equal to the cluster's objects of the given resources."""

    def __init__(self, client: KubeClient, store: ReplicaStore) -> None:
        self.client = client
        self.store = store
        self._informers: dict[ResourceRef, Informer] = {}
        self._seeded: set[ResourceRef] = set()
        self._lock = threading.Lock()  # a seed and the handlers' changes never interleave
        self._ready = threading.Event()
        self._ready_at: int | None = None  # the store's generation when it last became ready
        self._stopped = threading.Event()
        self._excluded: tuple[str, ...] = ()  # namespace patterns not replicated (Gatekeeper's `sync` process)

    def exclude(self, patterns: Iterable[str]) -> None:
        """Leave out objects in these namespaces (exact, `prefix*`, `*suffix`; a Namespace by its own
        name), as a Gatekeeper Config's `processes: ["sync"]` entries do; a change re-sorts what is held."""
        patterns = tuple(sorted(set(patterns)))
        with self._lock:
            if patterns == self._excluded:
                return
            self._excluded = patterns
            for ref, informer in self._informers.items():
                if ref in self._seeded:
                    for obj in informer.list():
                        self._put(ref, obj)

    @property
    def resources(self) -> tuple[ResourceRef, ...]:
        return tuple(sorted(self._informers))

    def ensure(self, refs: Iterable[ResourceRef]) -> None:
        """Start replicating each of `refs` not replicated yet; not ready until they are in."""
        for ref in refs:
            if ref in self._informers or self._stopped.is_set():
                continue
            self.store.declare(ref.resource)
            informer = Informer(self.client, ref.api_version, ref.resource)
            informer.add_handler(lambda event, new, old, ref=ref: self._on_event(ref, event, new, old))
            with self._lock:
                self._informers[ref] = informer
                self._ready.clear()
                self._ready_at = None
            informer.start()
            threading.Thread(target=self._seed, args=(ref, informer), name=f"seed {ref}", daemon=True).start()

    def ready(self) -> bool:
        return self._ready.is_set()

    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def ready_at(self) -> int | None:
        """The store's generation when it became ready (what an engine must hold at least), or None."""
        return self._ready_at if self.ready() else None

    def health(self) -> dict[str, dict]:
        """Each replicated resource's watch: connected, age of its last event, for how long it may have
        missed events (the replica is stale by that much at most beyond the watch's own delay)."""
        return {str(ref): informer.health() for ref, informer in sorted(self._informers.items())}

    def objects(self) -> int:
        return len(self.store)

    def pending(self) -> list[str]:
        """Resources whose initial list is not in the store yet."""
        return [str(r) for r in list(self._informers) if r not in self._seeded]  # a copy: ensure() adds

    def stop(self) -> None:
        self._stopped.set()
        for informer in self._informers.values():
            informer.stop()

    def _seed(self, ref: ResourceRef, informer: Informer) -> None:
        while not informer.synced.wait(1.0):
            if self._stopped.is_set():
                return
        with self._lock:
            for obj in informer.list():
                self._put(ref, obj)
            self._seeded.add(ref)
            if self._seeded >= self._informers.keys():
                self._ready_at = self.store.generation
                self._ready.set()
        replicated_objects.labels(str(ref)).set(len(informer))
        log.info("replicated", extra={"resource": str(ref), "objects": len(informer)})

    def _on_event(self, ref: ResourceRef, event: str, new: Obj | None, old: Obj | None) -> None:
        with self._lock:
            if event == "DELETED" and old is not None:
                meta = old.get("metadata") or {}
                self.store.remove(
                    ref.resource, meta.get("namespace") or "", meta.get("name", ""), namespaced=ref.namespaced
                )
            elif new is not None:
                self._put(ref, new)
            informer = self._informers.get(ref)
        replicated_events.labels(str(ref), event).inc()
        if informer is not None:
            replicated_objects.labels(str(ref)).set(len(informer))

    def _put(self, ref: ResourceRef, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if self._excluded and _in_namespaces(self._excluded, ref, meta):
            self.store.remove(
                ref.resource, meta.get("namespace") or "", meta.get("name", ""), namespaced=ref.namespaced
            )
            return
        try:
            self.store.put(ref.resource, obj, namespaced=ref.namespaced)
        except InputRejected as exc:
            # regorus cannot hold it (it would crash or change it): left out, loudly
            log.error("replicated object refused; policies do not see it", extra={"error": str(exc)})
            meta = obj.get("metadata") or {}
            self.store.remove(
                ref.resource, meta.get("namespace") or "", meta.get("name", ""), namespaced=ref.namespaced
            )


def _in_namespaces(patterns: tuple[str, ...], ref: ResourceRef, meta: Obj) -> bool:
    own = meta.get("name", "") if (ref.group, ref.resource) == ("", "namespaces") else meta.get("namespace") or ""
    return bool(own) and any(glob_matches(p, own) for p in patterns)


def check_access(client: KubeClient, refs: Iterable[ResourceRef]) -> None:
    """List one object of each resource: fail at start-up, naming the resource, when that is refused."""
    for ref in refs:
        try:
            client.get(resource_path(ref.api_version, ref.resource, None), limit=1)
        except ApiError as exc:
            raise ReplicationUnavailable(
                exc.status, exc.reason, exc.body, f"cannot replicate {ref} (list {ref.resource} in all namespaces)"
            ) from None
