"""`regokite audit`'s /readyz and /healthz answers, from the continuous audit's state (no cluster)."""

from __future__ import annotations

import threading
import time

from regokite.audit import health
from regokite.audit.run import Audit, AuditSettings, Continuous
from regokite.clusterdata.store import ResourceRef
from regokite.kube.informer import Informer
from tests.kube_api.fake import FakeKube


def continuous() -> Continuous:
    kube = FakeKube()
    return Continuous(Audit(AuditSettings(policies=[]), kube))  # type: ignore[arg-type]


def test_not_ready_until_the_first_pass_is_queued_then_ready_with_its_watches_and_pending_writes() -> None:
    c = continuous()
    detail = health.readiness(c)
    assert (detail["ready"], detail["status"], detail["policies"]) == (False, "starting", [])
    informer = Informer(c.audit.client, "v1", "configmaps")
    c.informers[ResourceRef("", "v1", "configmaps")] = informer
    c.started.set()
    c.dirty |= {"a", "b"}
    c.status_failed = 1
    c.retry_at = time.monotonic() + 2.0
    detail = health.readiness(c)
    assert detail["ready"] and detail["status"] == "ok"
    assert detail["watches"]["configmaps.v1"]["connected"] is False
    assert detail["pending"]["report_writes"] == 2 and detail["pending"]["constraint_status_writes"] == 1
    assert 0 < detail["pending"]["retry_in_seconds"] <= 2.0
    assert detail["failing"] == {}  # no outage yet
    c.audit.outage.failed(RuntimeError("503"), "unavailable")
    assert health.readiness(c)["failing"]["writes"]["failures"] == 1
    c.stop.set()
    assert health.readiness(c)["status"] == "stopping" and not health.readiness(c)["ready"]


def test_unhealthy_when_an_informer_thread_died() -> None:
    c = continuous()
    informer = Informer(c.audit.client, "v1", "configmaps")
    c.informers[ResourceRef("", "v1", "configmaps")] = informer
    assert health.liveness(c) == {"healthy": True, "dead_threads": []}
    informer._thread = threading.Thread(target=lambda: None)
    informer._thread.start()
    informer._thread.join()
    assert health.liveness(c) == {"healthy": False, "dead_threads": ["configmaps.v1"]}
