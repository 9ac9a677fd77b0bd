"""A Watch whose connection drops, and whose history is compacted meanwhile (410 Gone), misses no change."""

from __future__ import annotations

import time

import controlplane
import kube
from kube import create, get, merge_patch

from tests.controllers.process import ControllerProcess
from tests.integration.test_watch_deployment_scaler import SCALER, counter, deployment


def test_changes_made_while_the_watch_was_down_are_all_processed(private_plane: controlplane.ControlPlane) -> None:
    cp = private_plane
    cluster = kube.Cluster.of(cp)
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    labels = {"enforce-max-replicas": "true"}
    with (
        cluster.api_client() as api,
        ControllerProcess.running(cp.kubeconfig, SCALER, "watch.yaml") as ctl,
    ):
        create(api, deployments, deployment("default", "a", 10, labels))
        kube.wait_for(lambda: get(api, f"{deployments}/a"), lambda d: d["spec"]["replicas"] == 3, what="a at 3")

        # Down, history compacted while down, up; then changes right away, before the watch is back.
        controlplane.restart_apiserver(cp, 1.0, while_down=lambda: kube.compact_etcd(cp.etcd_url))
        merge_patch(api, f"{deployments}/a", {"spec": {"replicas": 7}})
        create(api, deployments, deployment("default", "b", 10, labels))
        create(api, deployments, deployment("default", "gone", 10, labels))
        kube.wait_for(lambda: get(api, f"{deployments}/a"), lambda d: d["spec"]["replicas"] == 3, what="a at 3")
        kube.wait_for(lambda: get(api, f"{deployments}/b"), lambda d: d["spec"]["replicas"] == 3, what="b at 3")

        # A second outage; a deletion and a scale-up made by someone else just after it.
        deleted_before = counter(ctl.metrics(), "regokite_watch_events_total", event="DELETED")
        controlplane.restart_apiserver(cp, 0.5, while_down=lambda: kube.compact_etcd(cp.etcd_url))
        kube.delete(api, f"{deployments}/gone")
        merge_patch(api, f"{deployments}/b", {"spec": {"replicas": 6}})
        kube.wait_for(lambda: get(api, f"{deployments}/b"), lambda d: d["spec"]["replicas"] == 3, what="b at 3 again")
        kube.wait_for(
            ctl.metrics,
            lambda m: counter(m, "regokite_watch_events_total", event="DELETED") > deleted_before,
            what="the DELETED event of gone",
            timeout=30,
        )
        records = ctl.log_records()
        assert any(r.get("msg") == "watch failed, retrying" for r in records)
        # Whether the watch resumes or relists after the restart depends on how far the
        # restarted API server's watch cache reaches back, which races with the changes
        # above; both paths must deliver every change, which the waits above prove.
        time.sleep(0.1)
        assert ctl.stop() == 0
