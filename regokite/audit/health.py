"""`regokite audit`'s /healthz and /readyz, as the controller and the admission server answer them.

Ready once the first pass is queued (policies loaded, every audited resource
listed, replicated data in). A watch that drops afterwards leaves the audit
ready: it audits from its caches and says how stale they may be (per watch:
connected, age of the last event, for how long events may have been missed;
`stale_seconds` the largest), and what it still has to write (reports and
constraint status that failed, retried with backoff). Healthy while every
informer thread runs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from regokite.kube.informer import Informer, staleness

if TYPE_CHECKING:
    from regokite.audit.run import Continuous


def readiness(continuous: Continuous) -> dict[str, Any]:
    audit, now = continuous.audit, time.monotonic()
    ready = continuous.started.is_set() and not continuous.stop.is_set()
    detail: dict[str, Any] = {"ready": ready, "status": "ok" if ready else "starting"}
    if continuous.stop.is_set():
        detail["status"] = "stopping"
    current = audit.policy_set
    detail["policies"] = [p.name for p in current.policies] if current is not None else []
    detail["reload"] = {"ok": continuous.reload_error is None, "error": continuous.reload_error}
    watches = {i.name: i.health() for i in _informers(continuous)}
    detail["watches"] = watches
    detail["stale_seconds"] = staleness(watches)
    if audit.replica is not None:
        replicated = audit.replica.health()
        detail["replicated"] = {"ready": audit.replica.ready(), "pending": audit.replica.pending(),
                                "watches": replicated, "stale_seconds": staleness(replicated)}  # fmt: skip
    writes = len(continuous.dirty) + continuous.status_failed
    detail["pending"] = {
        "objects": len(continuous.pending),  # changed, not audited yet
        "report_writes": len(continuous.dirty),  # namespaces whose report is not written as found
        "constraint_status_writes": continuous.status_failed,
        "retry_in_seconds": round(max(0.0, continuous.retry_at - now), 1) if writes else 0.0,
    }
    detail["failing"] = {
        name: {"for_seconds": round(now - outage.since, 1), "failures": outage.failures}
        for name, outage in (("loop", continuous.outage), ("writes", audit.outage))
        if outage.since is not None
    }
    loop_at = continuous.loop_at
    detail["last_loop_seconds_ago"] = None if loop_at is None else round(now - loop_at, 1)
    return detail


def liveness(continuous: Continuous) -> dict[str, Any]:
    dead = [i.name for i in _informers(continuous) if not i.alive]
    return {"healthy": not dead or continuous.stop.is_set(), "dead_threads": dead}


def _informers(continuous: Continuous) -> list[Informer]:
    return [*list(continuous.informers.values()), *continuous.report_informers]
