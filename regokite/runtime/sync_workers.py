"""The worker threads of the controller runtime: each takes a key from a work queue and runs its
reconciler's sync, with the outcome's bookkeeping (backoff on failure, a requested resync, metrics).

A worker takes no key while its manager says it may not (a standby replica, replicated data not in
yet, a shard hand-over draining); with shards, each key is first asked of them (`Verdict`): another
replica's object is dropped (its reconciler told), one whose owners disagree comes back shortly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from regokite.errors import HookError
from regokite.kube.client import UNANSWERED, ApiError, NotLeader, error_reason
from regokite.kube.workqueue import WorkQueue
from regokite.ops import controller_metrics as metrics
from regokite.runtime.reconcile import Reconciler, Result
from regokite.runtime.shards import Shards, Verdict

log = logging.getLogger("regokite.controller")
_EXPECTED = (HookError, ApiError, *UNANSWERED)  # logged without a traceback: the message says it all
WAIT_RETRY = 0.25  # seconds before a key whose shard views disagree is tried again
Key = tuple[str, str, str]  # (reconciler name, namespace, name)


class InFlight:
    """How many syncs run now, over every worker (the manager's idleness and its stop log)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


def work(
    queue: WorkQueue,
    reconcilers: Mapping[str, Reconciler],
    *,
    may_work: Callable[[], bool],
    stopping: threading.Event,
    shards: Callable[[], Shards | None],
    in_flight: InFlight,
) -> None:
    """One worker thread's loop, until `stopping` is set (then in-flight syncs finish first)."""
    while True:
        # a standby: caches warm, hands off; and no hook decides on a partial inventory
        while not may_work():
            if stopping.wait(0.1):
                return
        key = queue.get(timeout=0.5)
        if key is None:
            if stopping.is_set():
                return
            continue
        reconciler = reconcilers.get(key[0])
        current = shards()
        if current is not None and not _shard_begin(current, queue, key, reconciler):
            continue
        in_flight.add(1)
        try:
            _sync(queue, key, reconciler)
        finally:
            in_flight.add(-1)
            if current is not None:
                current.end()
            queue.done(key)


def _sync(queue: WorkQueue, key: Key, reconciler: Reconciler | None) -> None:
    """Run one sync; count it; forget the key's failures, requeue it when asked, or back off on an error."""
    name, namespace, obj_name = key
    try:
        started = time.perf_counter()
        result = reconciler.reconcile(namespace, obj_name) if reconciler else Result()
        metrics.reconcile_duration.labels(name).observe(time.perf_counter() - started)
        metrics.reconciles.labels(name, "ok").inc()
        queue.forget(key)
        if result.requeue_after:
            queue.add_after(key, result.requeue_after)
    except NotLeader:
        queue.add(key)  # leadership lost mid-sync: the key waits for the next term (or leader)
    except Exception as exc:
        reason = failure_reason(exc)
        metrics.reconciles.labels(name, "error").inc()
        metrics.reconcile_errors.labels(name, reason).inc()
        delay = queue.add_rate_limited(key)
        log.warning(
            "sync failed",
            extra={
                "controller": name,
                "parent": f"{namespace}/{obj_name}" if namespace else obj_name,
                "reason": reason,
                "error": str(exc)[:1000],
                "retry_in": round(delay, 3),
            },
            exc_info=not isinstance(exc, _EXPECTED),
        )


def failure_reason(exc: BaseException) -> str:
    """A failed sync's metric label: a hook's own reason (a fixed set: InvalidHookOutput, PolicyError, ...)
    or the request's (error_reason: never a message, a host or a port, as urllib3's `reason` carries)."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and not isinstance(exc, ApiError) and reason.isidentifier():
        return reason
    return error_reason(exc)


def _shard_begin(shards: Shards, queue: WorkQueue, key: Key, reconciler: Reconciler | None) -> bool:
    """May this sync start (then shards.end() must follow)? Another's object is dropped; one that must
    wait for the views to agree comes back shortly."""
    verdict = shards.begin(key[1], key[2])
    if verdict is Verdict.MINE:
        return True
    if verdict is Verdict.OTHER:
        queue.forget(key)
        if (disown := getattr(reconciler, "disown", None)) is not None:
            disown(key[1], key[2])
    else:
        queue.add_after(key, WAIT_RETRY)
    queue.done(key)
    return False
