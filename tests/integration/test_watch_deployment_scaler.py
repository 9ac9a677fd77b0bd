"""Starkite's deployment scaler as a Rego Watch, end to end on a real API server."""

from __future__ import annotations

import re
import time
from pathlib import Path

import kube
import yaml
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
SCALER = ROOT / "policies" / "watches" / "deployment_scaler"


def deployment(namespace: str, name: str, replicas: int, labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]},
            },
        },
    }


def watch_file(tmp_path: Path, **spec: object) -> Path:
    """The shipped watch.yaml with test-friendly overrides (e.g. a short resync period)."""
    doc = yaml.safe_load((SCALER / "watch.yaml").read_text())
    doc["spec"].update(spec)
    path = tmp_path / "watch.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def counter(metrics: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_labelled_deployments_are_capped_others_left_alone_resync_and_delete_delivered(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    watch = watch_file(tmp_path, resyncPeriodSeconds=1)
    with ControllerProcess(cluster.kubeconfig, policies=[SCALER], controllers=[watch], namespace=namespace) as ctl:
        create(api, deployments, deployment(namespace, "free", 10))
        started = time.monotonic()
        create(api, deployments, deployment(namespace, "capped", 10, {"enforce-max-replicas": "true"}))
        kube.wait_for(
            lambda: get(api, f"{deployments}/capped"), lambda d: d["spec"]["replicas"] == 3, what="capped at 3"
        )
        latency = time.monotonic() - started
        print(f"scale-down latency: {latency * 1000:.0f} ms")
        assert latency < 5

        # Scaling up again is undone; the unlabelled one keeps its 10 replicas.
        merge_patch(api, f"{deployments}/capped", {"spec": {"replicas": 8}})
        kube.wait_for(lambda: get(api, f"{deployments}/capped"), lambda d: d["spec"]["replicas"] == 3, what="3 again")
        assert get(api, f"{deployments}/free")["spec"]["replicas"] == 10

        # Who wrote: the scaler's field manager owns spec.replicas, through a patch.
        capped = get(api, f"{deployments}/capped")
        managers = {m["manager"]: m for m in capped["metadata"]["managedFields"]}
        assert "f:replicas" in str(managers["regokite"]["fieldsV1"])
        events = kube.get(api, f"/api/v1/namespaces/{namespace}/events")["items"]
        assert any(e["reason"] == "ScaledDown" and e["involvedObject"]["name"] == "capped" for e in events)

        # Resync re-delivers every object periodically; the settled object is not written again.
        writes = counter(ctl.metrics(), "regokite_controller_writes_total", controller="watch/deployment-scaler")
        before = counter(ctl.metrics(), "regokite_watch_events_total", event="RESYNC")
        text = kube.wait_for(
            ctl.metrics,
            lambda m: counter(m, "regokite_watch_events_total", event="RESYNC") >= before + 2,
            what="two resyncs delivered",
        )
        assert counter(text, "regokite_controller_writes_total", controller="watch/deployment-scaler") == writes

        # Losing the label takes the object out of the watch: delivered as DELETED, not patched.
        merge_patch(api, f"{deployments}/capped", {"metadata": {"labels": {"enforce-max-replicas": None}}})
        kube.delete(api, f"{deployments}/free")
        kube.wait_for(
            ctl.metrics, lambda m: counter(m, "regokite_watch_events_total", event="DELETED") >= 1, what="DELETED"
        )
        merge_patch(api, f"{deployments}/capped", {"spec": {"replicas": 9}})
        # A labelled deployment created after that change is capped: the watch is alive and past it.
        create(api, deployments, deployment(namespace, "later", 10, {"enforce-max-replicas": "true"}))
        kube.wait_for(lambda: get(api, f"{deployments}/later"), lambda d: d["spec"]["replicas"] == 3, what="later")
        assert get(api, f"{deployments}/capped")["spec"]["replicas"] == 9

        records = ctl.log_records()
        assert any(re.search(r"capped: 10 replicas, more than 3", r.get("msg", "")) for r in records)
        assert ctl.stop() == 0


def test_the_maximum_comes_from_the_command_line(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    with ControllerProcess.running(
        cluster.kubeconfig, SCALER, "watch.yaml", namespace=namespace, extra=["--var", "max_replicas=5"]
    ):
        create(api, deployments, deployment(namespace, "web", 10, {"enforce-max-replicas": "true"}))
        kube.wait_for(lambda: get(api, f"{deployments}/web"), lambda d: d["spec"]["replicas"] == 5, what="capped at 5")
