"""bench.api_floor, the anchor of bench.controller_converge's ratios, makes exactly the Fanout job's
writes in either mode: every parent, its three owned ConfigMaps and its status (written last when the
contract's first status, of no children, comes before it); watched, its watches see every one of them."""

from __future__ import annotations

import kube
import pytest
from kubernetes import client

from bench import api_floor


@pytest.mark.parametrize(
    ("mode", "statuses", "watched"),
    [("sequential", 1, False), ("pipelined", 1, False), ("pipelined", 2, False), ("sequential", 2, True)],
)
def test_the_floor_writes_the_whole_job(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, mode: str, statuses: int, watched: bool
) -> None:
    kube.install_crd(api, kube.crd_manifest("example.com", "Fanout"))
    run = api_floor.write_job(str(cluster.kubeconfig), namespace, 4, 3, mode, statuses, watched)
    assert (run.parents, run.threads, run.mode, run.writes) == (4, 3, mode, 4 * (4 + statuses)) and run.seconds > 0
    # watched: an event for each write (the parents' creates among them), read by the watches of parents and children
    assert run.events >= (run.writes if watched else 0) and (run.events == 0) != watched

    parents = kube.get(api, api_floor.FANOUTS.format(ns=namespace))["items"]
    assert sorted(p["metadata"]["name"] for p in parents) == ["p0", "p1", "p2", "p3"]
    assert all(p.get("status") == {"configMaps": 3} for p in parents)
    uids = {p["metadata"]["uid"]: p["metadata"]["name"] for p in parents}
    children = kube.get(api, f"/api/v1/namespaces/{namespace}/configmaps")["items"]
    owned = sorted(
        (uids[c["metadata"]["ownerReferences"][0]["uid"]], c["metadata"]["name"])
        for c in children
        if c["metadata"].get("ownerReferences")
    )
    assert owned == [(f"p{i}", f"p{i}-{c}") for i in range(4) for c in range(3)]
