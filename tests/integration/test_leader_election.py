"""Several `regokite controller --leader-elect` replicas: one acts, hand-over on SIGKILL and SIGTERM, fencing.

Every write a replica makes is logged ("watch acted") with its time, and so is
every change of its leadership; the audit checks that each replica wrote only
inside its own terms and that no two terms overlap. Field managers differ per
replica, so managedFields name the writer too.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time

import kube
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess
from tests.integration.test_watch_deployment_scaler import SCALER, deployment

LEASE = ["--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3"]
LEASE += ["--leader-election-retry-period", "0.5"]


def replica(cluster: Cluster, namespace: str, ident: str) -> ControllerProcess:
    extra = ["--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", ident]
    extra += ["--field-manager", f"regokite-{ident}", *LEASE]
    return ControllerProcess.running(cluster.kubeconfig, SCALER, "watch.yaml", namespace=namespace, extra=extra)


def holder(api: client.ApiClient, namespace: str) -> str:
    lease = get(api, f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/regokite-controller")
    return lease["spec"].get("holderIdentity") or ""


def gauge(ctl: ControllerProcess, name: str) -> float:
    for line in ctl.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in metrics")


def replicas_manager(api: client.ApiClient, path: str) -> str:
    """The manager of spec.replicas (the controller-manager's status writes hold status.replicas)."""
    obj = get(api, path)
    fields = obj["metadata"]["managedFields"]
    owners = [m["manager"] for m in fields if "f:replicas" in m.get("fieldsV1", {}).get("f:spec", {})]
    return owners[-1] if owners else ""


def _ts(record: dict) -> float:
    return dt.datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def terms(ctl: ControllerProcess, end: float) -> list[tuple[float, float]]:
    """[start, end) of each leadership term of a replica, from its log."""
    out, start = [], None
    for r in ctl.log_records():
        if r.get("msg") == "became leader":
            start = _ts(r)
        elif r.get("msg") == "lost leadership: stopped acting" and start is not None:
            out.append((start, _ts(r)))
            start = None
    if start is not None:
        out.append((start, end))
    return out


def writes(ctl: ControllerProcess) -> list[float]:
    return [_ts(r) for r in ctl.log_records() if r.get("msg") == "watch acted"]


def test_one_leader_acts_hand_over_on_kill_and_term_and_a_lost_lease_stops_writes(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    labels = {"enforce-max-replicas": "true"}
    a, b, c = (replica(cluster, namespace, x) for x in "abc")
    with a, b:
        first = kube.wait_for(lambda: holder(api, namespace), what="a leader")
        leader, standby = (a, b) if first == "a" else (b, a)
        second = "b" if first == "a" else "a"
        kube.wait_for(lambda: gauge(leader, "regokite_leader"), lambda v: v == 1, what="leader gauge 1")
        assert gauge(standby, "regokite_leader") == 0

        create(api, deployments, deployment(namespace, "one", 10, labels))
        kube.wait_for(lambda: get(api, f"{deployments}/one"), lambda d: d["spec"]["replicas"] == 3, what="one at 3")
        assert replicas_manager(api, f"{deployments}/one") == f"regokite-{first}"
        assert writes(standby) == []

        # SIGKILL: no release, the standby waits for the lease to expire (4 s) by its own clock.
        killed, killed_at = time.monotonic(), time.time()
        leader.proc.kill()
        leader.proc.wait()
        kube.wait_for(lambda: holder(api, namespace), lambda h: h == second, what="hand-over", timeout=10)
        after_kill = time.monotonic() - killed
        print(f"hand-over after SIGKILL: {after_kill:.2f}s")
        assert after_kill < 4 + 2

        create(api, deployments, deployment(namespace, "two", 10, labels))
        kube.wait_for(lambda: get(api, f"{deployments}/two"), lambda d: d["spec"]["replicas"] == 3, what="two at 3")
        assert replicas_manager(api, f"{deployments}/two") == f"regokite-{second}"

        with c:
            # SIGTERM: the leader finishes, releases the Lease, the standby takes it on its next retry.
            termed = time.monotonic()
            assert standby.stop() == 0
            kube.wait_for(lambda: holder(api, namespace), lambda h: h == "c", what="hand-over to c", timeout=10)
            after_term = time.monotonic() - termed
            print(f"hand-over after SIGTERM: {after_term:.2f}s")
            assert after_term < 2.5
            kube.wait_for(lambda: gauge(c, "regokite_leader"), lambda v: v == 1, what="c leads")

            # Someone else takes the Lease (as a partitioned leader would see it): c stops acting at once.
            lease = get(api, f"{leases}/regokite-controller")
            now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            lease["spec"].update(holderIdentity="intruder", renewTime=now, leaseDurationSeconds=4)
            kube.request(api, "PUT", f"{leases}/regokite-controller", lease)
            kube.wait_for(lambda: gauge(c, "regokite_leader"), lambda v: v == 0, what="c stops", timeout=3)
            # A change while nobody of ours leads waits for a leader: the write audit below proves c
            # wrote nothing between its two terms, and c's second term applies the change.
            merge_patch(api, f"{deployments}/one", {"spec": {"replicas": 9}})
            # The intruder never renews: c takes the Lease back and resyncs everything.
            kube.wait_for(lambda: holder(api, namespace), lambda h: h == "c", what="c again", timeout=10)
            kube.wait_for(lambda: get(api, f"{deployments}/one"), lambda d: d["spec"]["replicas"] == 3, what="resync")
            assert replicas_manager(api, f"{deployments}/one") == "regokite-c"
            assert len(terms(c, time.time())) == 2  # the resync came in c's second term
            end = time.time()
            assert c.stop() == 0
        assert holder(api, namespace) == ""  # released on SIGTERM

    # The audit: each replica wrote only inside its terms, and terms never overlap.
    all_terms = []
    for ctl in (a, b, c):
        mine = terms(ctl, killed_at if ctl is leader else end)
        all_terms += mine
        for t in writes(ctl):
            assert any(s <= t < e for s, e in mine), (t, mine)
    all_terms.sort()
    for (_, e1), (s2, _) in itertools.pairwise(all_terms):
        assert e1 <= s2, all_terms


def test_a_standby_is_ready_and_says_who_leads(cluster: Cluster, api: client.ApiClient, namespace: str) -> None:
    import json
    import urllib.request

    with replica(cluster, namespace, "x") as x:
        kube.wait_for(lambda: holder(api, namespace), lambda h: h == "x", what="x leads")
        with replica(cluster, namespace, "y") as y:  # __enter__ waited for /readyz 200
            with urllib.request.urlopen(f"http://127.0.0.1:{y.port}/readyz", timeout=5) as r:
                detail = json.load(r)
            assert detail["ready"] is True
            assert detail["leader"] == {
                "lease": f"{namespace}/regokite-controller",
                "identity": "y",
                "leading": False,
                "holder": "x",
            }
            assert all(detail["informers"].values())
            with urllib.request.urlopen(f"http://127.0.0.1:{x.port}/healthz", timeout=5) as r:
                assert json.load(r) == {"healthy": True, "dead_threads": []}
            metrics = x.metrics()
            for name in (
                "regokite_leader 1.0",
                "regokite_controller_queue_depth",
                "regokite_controller_reconcile_duration_seconds",
                "regokite_controller_policy_evaluation_duration_seconds",
            ):
                assert name in metrics, name
