"""`regokite audit --metrics-port` answers /healthz and /readyz as the controller and admission do, on a
private control plane: not ready until its first pass is queued; then ready, with each watch's state
(connected, age of the last event), what it still has to write, and through an outage it stays
ready while saying its watches are down and how stale its caches may be; writes that cannot land
(the report CRD deleted) show as pending until they do."""

from __future__ import annotations

from pathlib import Path

import controlplane
import httpx
import kube
from test_audit_faults import audit_process, bad_namespaces, start_audit, wrong_reports

from regokite.audit.crds import report_crds

CONFIGMAPS = "configmaps.v1"
REPORTS = "policyreports.wgpolicyk8s.io/v1alpha2"


def readyz(port: int) -> tuple[int, dict]:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
    except httpx.TransportError:
        return 0, {}
    return answer.status_code, answer.json()


def test_audit_readiness_tells_its_watches_and_pending_writes_through_outages(
    private_plane,  # the conftest's fixture
    tmp_path: Path,
) -> None:
    cp = private_plane
    cluster = kube.Cluster(cp.kubeconfig, cp.server, cp.ca_file, cp.token, cp.etcd_url)
    with cluster.api_client() as api, audit_process(tmp_path) as state:
        namespaces = bad_namespaces(api)[:2]
        start_audit(state, cp.kubeconfig)
        port = state["port"]
        _, detail = kube.wait_for(lambda: readyz(port), lambda r: r[0] == 200, what="/readyz 200", timeout=60)
        assert detail["ready"] and detail["policies"] == ["admission.drill"] and detail["reload"]["ok"]
        assert detail["watches"][CONFIGMAPS]["connected"] and detail["watches"][CONFIGMAPS]["synced"]
        assert REPORTS in detail["watches"]
        kube.wait_for(lambda: wrong_reports(api, namespaces), lambda wrong: not wrong, what="the reports")
        _, detail = kube.wait_for(
            lambda: readyz(port), lambda r: r[1]["pending"]["report_writes"] == 0, what="no write pending"
        )
        assert detail["stale_seconds"] == 0 and detail["failing"] == {}
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["healthy"]

        seen_down: list[dict] = []

        def watch_down(answer: tuple[int, dict]) -> bool:  # its own missed time (stale_seconds: any watch's)
            code, detail = answer
            watch = detail.get("watches", {}).get(CONFIGMAPS, {})
            return code == 200 and not watch["connected"] and (watch["missed_events_for_seconds"] or 0) > 0

        def while_down() -> None:  # ready all along (it audits from its caches), and says the watches are down
            seen_down.append(kube.wait_for(lambda: readyz(port), watch_down, what="a down watch in /readyz")[1])

        controlplane.restart_apiserver(cp, 1.0, while_down=while_down)
        assert (
            seen_down
            and seen_down[0]["stale_seconds"] >= seen_down[0]["watches"][CONFIGMAPS]["missed_events_for_seconds"]
        )
        # connected again (the caches confirmed only by their next list: stale_seconds says so until then)
        back = lambda r: all(w["connected"] for w in r[1]["watches"].values())  # noqa: E731
        kube.wait_for(lambda: readyz(port), back, what="the watches back", timeout=60)

        name = "policyreports.wgpolicyk8s.io"
        kube.uninstall_crd(api, name)  # the reports go with it: to be written again, and they cannot be yet
        _, pending = kube.wait_for(
            lambda: readyz(port),
            lambda r: r[1]["pending"]["report_writes"] > 0 and "writes" in r[1]["failing"],
            what="pending writes, failing",  # a write is pending before its first try has failed
            timeout=60,
        )
        assert pending["ready"]
        kube.wait_for_deletion(api, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", timeout=120)
        (crd,) = [c for c in report_crds() if c["metadata"]["name"] == name]
        kube.install_crd(api, crd)
        landed = lambda r: r[1]["pending"]["report_writes"] == 0 and not r[1]["failing"]  # noqa: E731
        kube.wait_for(lambda: readyz(port), landed, what="the writes landed", timeout=60)
        assert not wrong_reports(api, namespaces)
