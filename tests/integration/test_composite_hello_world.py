"""Metacontroller's HelloWorld tutorial, end to end, with its sync hook in Rego."""

from __future__ import annotations

from pathlib import Path

import kube
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"


def test_hello_world_pod_status_recreate_and_garbage_collection(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None
) -> None:
    parents = kube.helloworlds(namespace)
    pod_path = f"/api/v1/namespaces/{namespace}/pods/your-name"
    with ControllerProcess.running(cluster.kubeconfig, HELLO, namespace=namespace) as ctl:
        parent = create(api, parents, kube.hello_world("your-name", "Your Name", namespace=namespace))

        pod = kube.wait_for(lambda: get(api, pod_path), what="the hello pod", timeout=30)
        assert pod["spec"]["containers"][0]["command"] == ["echo", "Hello, Your Name!"]
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
            "HelloWorld",
            parent["metadata"]["uid"],
            True,
            True,
        )
        assert pod["metadata"]["labels"]["controller-uid"] == parent["metadata"]["uid"]
        synced = kube.wait_for(
            lambda: get(api, f"{parents}/your-name"),
            lambda p: p.get("status", {}).get("pods") == 1,
            what="status.pods == 1",
        )
        assert synced["status"]["observedGeneration"] == synced["metadata"]["generation"]

        # Recreate: a changed spec.who deletes the pod and creates a new one.
        merge_patch(api, f"{parents}/your-name", {"spec": {"who": "Kubernetes"}})
        new_pod = kube.wait_for(
            lambda: get(api, pod_path),
            lambda p: p["spec"]["containers"][0]["command"] == ["echo", "Hello, Kubernetes!"],
            what="the pod recreated with the new greeting",
            timeout=30,
        )
        assert new_pod["metadata"]["uid"] != pod["metadata"]["uid"]

        # No hot loop: once settled, a sync writes no status. An annotation is a change the controller
        # syncs for (its reconcile count proves it did) but that changes nothing it decides.
        before = ctl.metrics()
        merge_patch(api, f"{parents}/your-name", {"metadata": {"annotations": {"poke": "1"}}})
        kube.wait_for(ctl.metrics, lambda m: _syncs(m) > _syncs(before), what="a sync after the annotation")
        assert _status_writes(ctl.metrics()) == _status_writes(before)

        kube.delete(api, f"{parents}/your-name")
        kube.wait_for_deletion(api, pod_path, timeout=90)
        assert ctl.stop() == 0


def _status_writes(text: str) -> float:
    return _counter(text, "regokite_controller_writes_total{", 'verb="status"')


def _syncs(text: str) -> float:
    return _counter(text, "regokite_controller_reconciles_total{", 'result="ok"')


def _counter(text: str, prefix: str, label: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix) and label in line)
