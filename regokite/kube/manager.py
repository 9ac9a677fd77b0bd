"""The controller runtime: shared informers, one work queue, N workers, health and metrics.

Generic on purpose: a reconciler is anything with a `name` and
`reconcile(namespace, name) -> float | None` (seconds until a requested
resync). Composite controllers are one kind; decorator and event-driven
watch handlers can register the same way.

Keys are `(reconciler name, namespace, name)`. A failing reconcile is retried
with per-key exponential backoff; SIGTERM stops the informers, lets in-flight
reconciles finish and returns.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from regokite.controllers.hooks import HookError
from regokite.kube.client import ApiError, KubeClient
from regokite.kube.informer import InformerFactory
from regokite.kube.workqueue import WorkQueue
from regokite.ops import controller_metrics as metrics
from regokite.ops.metrics import exposition

log = logging.getLogger("regokite.controller")
_EXPECTED = (HookError, ApiError)


class Reconciler(Protocol):
    name: str

    def reconcile(self, namespace: str, name: str) -> float | None: ...


class Manager:
    def __init__(self, client: KubeClient, *, namespace: str | None = None, workers: int = 2) -> None:
        self.client = client
        self.namespace = namespace
        self.workers = max(1, workers)
        self.informers = InformerFactory(client, namespace)
        self.queue = WorkQueue(name="controllers")
        self.reconcilers: dict[str, Reconciler] = {}
        self._periodic: list[tuple[float, Callable[[], None]]] = []
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._http: ThreadingHTTPServer | None = None
        self.in_flight = 0
        self._lock = threading.Lock()

    # -- registration

    def register(self, reconciler: Reconciler) -> None:
        self.reconcilers[reconciler.name] = reconciler

    def enqueue(self, reconciler: str, namespace: str, name: str, after: float = 0.0) -> None:
        key = (reconciler, namespace, name)
        if after > 0:
            self.queue.add_after(key, after)
        else:
            self.queue.add(key)

    def every(self, period: float, fn: Callable[[], None]) -> None:
        self._periodic.append((period, fn))

    # -- running

    def start(self, *, sync_timeout: float = 60.0) -> None:
        self.informers.start()
        if not self.informers.wait_synced(sync_timeout):
            pending = [i.name for i in self.informers.informers if not i.synced.is_set()]
            log.warning("informers not synced yet; workers start anyway", extra={"pending": pending})
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
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
        self.informers.stop()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        log.info("stopped")

    def _work(self) -> None:
        while True:
            key = self.queue.get()
            if key is None:
                return
            name, namespace, obj_name = key
            reconciler = self.reconcilers.get(name)
            with self._lock:
                self.in_flight += 1
            try:
                started = time.perf_counter()
                after = reconciler.reconcile(namespace, obj_name) if reconciler else None
                metrics.reconcile_duration.labels(name).observe(time.perf_counter() - started)
                metrics.reconciles.labels(name, "ok").inc()
                self.queue.forget(key)
                if after:
                    self.queue.add_after(key, after)
            except Exception as exc:
                metrics.reconciles.labels(name, "error").inc()
                metrics.reconcile_errors.labels(name, getattr(exc, "reason", type(exc).__name__)).inc()
                delay = self.queue.add_rate_limited(key)
                log.warning(
                    "sync failed",
                    extra={
                        "controller": name,
                        "parent": f"{namespace}/{obj_name}" if namespace else obj_name,
                        "error": str(exc)[:1000],
                        "retry_in": round(delay, 3),
                    },
                    exc_info=not isinstance(exc, _EXPECTED),
                )
            finally:
                with self._lock:
                    self.in_flight -= 1
                self.queue.done(key)

    def _tick(self, period: float, fn: Callable[[], None]) -> None:
        while not self._stopping.wait(period):
            try:
                fn()
            except Exception:
                log.exception("periodic resync failed")

    def _gauges(self) -> None:
        while not self._stopping.wait(2.0):
            metrics.queue_depth.labels("all").set(len(self.queue))
            for inf in self.informers.informers:
                metrics.informer_objects.labels(inf.name).set(len(inf))

    # -- health

    def ready(self) -> bool:
        return self.informers.synced() and not self._stopping.is_set()

    def serve_health(self, port: int, host: str = "0.0.0.0") -> int:
        manager = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body, ctype = exposition()
                    self._reply(200, body, ctype)
                elif self.path == "/healthz":
                    self._reply(200, b"ok\n")
                elif self.path == "/readyz":
                    ok = manager.ready()
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"informers not synced\n")
                else:
                    self._reply(404, b"not found\n")

            def _reply(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self._http.serve_forever, name="health", daemon=True).start()
        log.info("serving metrics and health", extra={"port": self._http.server_address[1]})
        return self._http.server_address[1]
