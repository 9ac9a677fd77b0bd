"""The controller runtime: wires shared informers, work queues, worker threads (runtime.sync_workers),
leadership or shards, gauges and the health endpoint (runtime.health) into one process's lifecycle.

Generic on purpose: a reconciler is anything with a `name` and
`reconcile(namespace, name) -> Result` (runtime.reconcile: nothing more, or a
requested resync). Composite controllers are one kind; decorator and event-driven
watch handlers can register the same way.

Keys are `(reconciler name, namespace, name)`. A failing reconcile is retried
with per-key exponential backoff; SIGTERM stops the informers, lets in-flight
reconciles finish and returns. A reconciler registered with its own `workers`
gets its own queue and worker threads (a Watch's `spec.workers`).

With a leader elector, informers run (caches stay warm) but workers take no
key, and the client refuses writes, unless this replica holds the Lease; on
becoming leader every reconciler with `resync_all` is resynced. With shards
(runtime.shards), every replica acts, each on its own objects: keys of others'
objects are dropped, and every view change resyncs.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Protocol

from regokite.kube.client import KubeClient, NotLeader
from regokite.kube.informer import InformerFactory, staleness
from regokite.kube.workqueue import WorkQueue
from regokite.ops import controller_metrics as metrics
from regokite.runtime import sync_workers
from regokite.runtime.health import serve_health
from regokite.runtime.reconcile import Reconciler
from regokite.runtime.shard_cache import ShardCache
from regokite.runtime.shards import Shards
from regokite.runtime.sync_workers import InFlight

if TYPE_CHECKING:
    from regokite.runtime.leader import LeaderElector

log = logging.getLogger("regokite.controller")
# Worker threads: they mostly wait on the API server and hook processes. bench.controller_converge, 500 parents:
# converged in 17.2 s with 1, 13.8 s with 2, 9.9 s with 4, 7.0-9.2 s with 8, 7.5 s with 16.
DEFAULT_WORKERS = 8


class DataGate(Protocol):
    """Replicated cluster data (replication.replicate.Replicator): ready once every initial list is in."""

    def ready(self) -> bool: ...

    def pending(self) -> list[str]: ...

    def health(self) -> dict[str, dict]: ...


class Manager:
    def __init__(
        self, client: KubeClient, *, namespace: str | None = None, workers: int = DEFAULT_WORKERS, sharded: bool = False
    ) -> None:
        """`sharded`: the process runs with --shards, its parents' and children's caches hold only its share."""
        self.client = client
        self.namespace = namespace
        self.workers = max(1, workers)
        self.informers = InformerFactory(client, namespace, sharded=sharded)
        self.queue = WorkQueue(name="controllers")
        self.reconcilers: dict[str, Reconciler] = {}
        self._periodic: list[tuple[float, Callable[[], None]]] = []
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._http: ThreadingHTTPServer | None = None
        self._in_flight = InFlight()
        self._queues: dict[str, tuple[WorkQueue, int]] = {}  # reconcilers with their own workers
        self.elector: LeaderElector | None = None
        self.shards: Shards | None = None
        self._leading = threading.Event()
        self.on_stop: list[Callable[[], None]] = []  # run after in-flight syncs finish (e.g. close hook workers)
        self.data: DataGate | None = None  # replicated cluster data the hooks read: no sync before it is in
        self.detail: dict[str, Any] = {}  # more for /readyz (the definitions' reload state)

    # -- leadership

    def use_leader_election(self, elector: LeaderElector) -> None:
        """Act only while `elector` holds the Lease; writes through the client are refused otherwise."""
        self.elector = elector
        elector.on_started_leading = self._started_leading
        elector.on_stopped_leading = self._stopped_leading
        self.client.write_guard = self._guard_write
        metrics.leader.set(0)

    def use_shards(self, shards: Shards) -> None:
        """Act only on the objects `shards` gives this replica; writes are refused while its Lease is not fresh."""
        self.shards = shards
        self.client.write_guard = shards.guard
        if not isinstance(shards.cache, ShardCache):  # one for every controller set the process runs in turn
            shards.cache = ShardCache(shards.identity)
        self.informers.use_share(shards.cache.filter)

    @property
    def in_flight(self) -> int:
        """Syncs running now."""
        return self._in_flight.count

    @property
    def leading(self) -> bool:
        """May this replica act now (always, without leader election or shards)?"""
        if self.shards is not None:
            return self.shards.may_act()
        if self.elector is None:
            return True
        return self._leading.is_set() and self.elector.may_act()

    def owns(self, namespace: str, name: str) -> bool:
        """Is this object this replica's to act on (always, without shards)?"""
        return self.shards is None or self.shards.owns(namespace, name)

    def _guard_write(self, method: str, path: str) -> None:
        if not self.leading:
            raise NotLeader(method, path)

    def _started_leading(self) -> None:
        self._leading.set()
        metrics.leader.set(1)
        self._resync_all()

    def _resync_all(self, only: Callable[[str, str], bool] | None = None) -> None:
        """Every reconciler's objects (those `only` selects) back into the queue."""
        for reconciler in list(self.reconcilers.values()):
            resync = getattr(reconciler, "resync_all", None)
            if resync is not None:
                resync(only) if only is not None else resync()

    def keys(self) -> Iterator[tuple[str, str]]:
        """(namespace, name) of every object the reconcilers act on (shard metrics)."""
        for r in list(self.reconcilers.values()):
            if (keys := getattr(r, "keys", None)) is not None:
                yield from keys()

    def _stopped_leading(self) -> None:
        self._leading.clear()
        metrics.leader.set(0)

    # -- registration

    def register(self, reconciler: Reconciler, *, workers: int | None = None) -> None:
        self.reconcilers[reconciler.name] = reconciler
        if workers:
            self._queues[reconciler.name] = (WorkQueue(name=reconciler.name), workers)

    def queue_of(self, reconciler: str) -> WorkQueue:
        dedicated = self._queues.get(reconciler)
        return dedicated[0] if dedicated else self.queue

    def enqueue(self, reconciler: str, namespace: str, name: str, after: float = 0.0) -> None:
        if not self.owns(namespace, name):
            return  # its owner's informers saw the same change
        key = (reconciler, namespace, name)
        queue = self.queue_of(reconciler)
        if after > 0:
            queue.add_after(key, after)
        else:
            queue.add(key)

    def every(self, period: float, fn: Callable[[], None]) -> None:
        self._periodic.append((period, fn))

    # -- running

    def start(self, *, sync_timeout: float = 60.0) -> None:
        if self.elector is None:
            self._leading.set()
            metrics.leader.set(1)
        if self.shards is not None and isinstance(self.shards.cache, ShardCache):
            self.shards.cache.attach(self.informers)  # before they list: a view change loads them too
        self.informers.start()
        if not self.informers.wait_synced(sync_timeout):
            pending = [i.name for i in self.informers.informers if not i.synced.is_set()]
            log.warning("informers not synced yet; workers start anyway", extra={"pending": pending})
        pools = [("worker", self.queue, self.workers)]
        pools += [(name, queue, n) for name, (queue, n) in self._queues.items()]
        for label, queue, n in pools:
            for i in range(n):
                t = threading.Thread(target=self._work, args=(queue,), name=f"{label}-{i}", daemon=True)
                t.start()
                self._threads.append(t)
        if self.elector is not None:
            threading.Thread(target=self.elector.run, args=(self._stopping,), name="leader", daemon=True).start()
        if self.shards is not None:
            self.shards.keys = self.keys
            self.shards.on_view_change.append(self._resync_all)
        for period, fn in self._periodic:
            t = threading.Thread(target=self._tick, args=(period, fn), name="resync", daemon=True)
            t.start()
        threading.Thread(target=self._gauges, name="gauges", daemon=True).start()
        log.info(
            "controllers started",
            extra={"controllers": sorted(self.reconcilers), "workers": self.workers, "namespace": self.namespace},
        )

    def run(self, *, metrics_port: int | None = None, metrics_host: str = "0.0.0.0") -> int:
        """Start, serve health and metrics, block until SIGTERM/SIGINT, stop cleanly."""
        if metrics_port is not None:
            self.serve_health(metrics_port, metrics_host)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stopping.set())
        self.start()
        while not self._stopping.wait(0.5):
            pass
        self.stop()
        return 0

    def stop(self, timeout: float = 30.0) -> None:
        log.info("stopping: finishing in-flight syncs", extra={"in_flight": self.in_flight})
        self._stopping.set()
        self.queue.shutdown()
        for queue, _ in self._queues.values():
            queue.shutdown()
        self.informers.stop()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self.shards is not None:
            self.shards.on_view_change.remove(self._resync_all)
            if isinstance(self.shards.cache, ShardCache):
                self.shards.cache.detach(self.informers)
        if self.elector is not None:
            self.elector.release()  # in-flight writes are done: hand over now, not after the lease expires
            self._leading.clear()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        for fn in self.on_stop:
            fn()
        log.info("stopped")

    def _work(self, queue: WorkQueue) -> None:
        sync_workers.work(
            queue,
            self.reconcilers,
            may_work=self._may_work,
            stopping=self._stopping,
            shards=lambda: self.shards,
            in_flight=self._in_flight,
        )

    def _may_work(self) -> bool:
        """Leading, the replicated data in, no shard hand-over draining."""
        shard_paused = self.shards is not None and self.shards.paused
        return self._leading.is_set() and self._data_ready() and not shard_paused

    def _tick(self, period: float, fn: Callable[[], None]) -> None:
        while not self._stopping.wait(period):
            try:
                fn()
            except Exception:
                log.exception("periodic resync failed")

    def _gauges(self) -> None:
        while not self._stopping.wait(2.0):
            metrics.queue_depth.labels("all").set(len(self.queue))
            for name, (queue, _) in self._queues.items():
                metrics.queue_depth.labels(name).set(len(queue))
            for inf in self.informers.informers:
                metrics.informer_objects.labels(inf.name).set(len(inf))
            if self.shards is not None:
                metrics.shard_owned.set(self.shards.owned())

    # -- health

    def _data_ready(self) -> bool:
        return self.data is None or self.data.ready()

    def ready(self) -> bool:
        knows_leader = self.elector is None or self.elector.knows_holder
        member = self.shards is None or self.shards.ready()
        ready = self.informers.synced() and self._data_ready() and knows_leader and member
        return ready and not self._stopping.is_set()

    def readiness(self) -> dict[str, Any]:
        """What `/readyz` answers: ready when every informer has synced and, under election, the Lease has been read
        (a standby is ready too, and can say who leads)."""
        informers = {i.name: i.synced.is_set() for i in self.informers.informers}
        detail: dict[str, Any] = {"ready": self.ready(), "stopping": self._stopping.is_set(), "informers": informers}
        watches = {i.name: i.health() for i in self.informers.informers}
        detail["watches"] = watches  # readiness does not depend on them: a short outage serves the caches
        detail["stale_seconds"] = staleness(watches)
        if self.data is not None:
            replicated = self.data.health()
            detail["replicated"] = {"ready": self.data.ready(), "pending": self.data.pending(), "watches": replicated,
                                    "stale_seconds": staleness(replicated)}  # fmt: skip
        detail.update(self.detail)
        if self.shards is not None:
            detail["shards"] = self.shards.describe()
        if self.elector is not None:
            detail["leader"] = self.elector.describe()
        else:
            detail["leader"] = {"leading": True, "election": False}
        return detail

    def liveness(self) -> dict[str, Any]:
        """What `/healthz` answers: every worker and informer thread that was started is still running."""
        dead = [t.name for t in self._threads if not t.is_alive()]
        dead += [i.name for i in self.informers.informers if i._thread is not None and not i._thread.is_alive()]
        healthy = not dead or self._stopping.is_set()
        return {"healthy": healthy, "dead_threads": dead}

    def serve_health(self, port: int, host: str = "0.0.0.0") -> int:
        """Serve /healthz, /readyz and /metrics (runtime.health) until stop(); the port served."""
        self._http = serve_health(port, host, self.liveness, self.readiness)
        return self._http.server_address[1]
