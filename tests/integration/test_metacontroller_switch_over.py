"""Switching from Metacontroller: children it created (its controllerRef, its labels, its
last-applied annotation, written by another field manager) are taken over in place on the real API
server: same uid, nothing recreated, Metacontroller's annotation removed, regokite's fields applied."""

from __future__ import annotations

import json
from pathlib import Path

import kube
from kube import Cluster, create, get
from kubernetes import client

from regokite.controllers.plan import plan_from_files
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"


def test_a_pod_metacontroller_created_is_taken_over_without_being_recreated(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None, tmp_path: Path
) -> None:
    parents = kube.helloworlds(namespace)
    parent = create(api, parents, kube.hello_world("moved", "Metacontroller"))
    # What Metacontroller would have written for this parent: the hook's Pod, with its additions.
    (tmp_path / "parent.json").write_text(json.dumps(parent))
    report = plan_from_files([str(HELLO / "controller.yaml")], [str(HELLO)], str(tmp_path / "parent.json"))
    [pod] = report.children
    pod["metadata"]["labels"] = {**(pod["metadata"].get("labels") or {}), "controller-uid": parent["metadata"]["uid"]}
    applied = json.loads(json.dumps(pod))
    pod["metadata"]["annotations"] = {LAST_APPLIED: json.dumps(applied)}
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "example.com/v1", "kind": "HelloWorld", "name": "moved", "uid": parent["metadata"]["uid"],
         "controller": True, "blockOwnerDeletion": True}
    ]  # fmt: skip
    pod_path = f"/api/v1/namespaces/{namespace}/pods/moved"
    created = kube.request(api, "POST", f"/api/v1/namespaces/{namespace}/pods?fieldManager=metacontroller", pod)

    with ControllerProcess.running(cluster.kubeconfig, HELLO, namespace=namespace) as ctl:
        taken = kube.wait_for(
            lambda: get(api, pod_path),
            lambda p: LAST_APPLIED not in (p["metadata"].get("annotations") or {}),
            what="the pod taken over",
            timeout=30,
        )
        assert taken["metadata"]["uid"] == created["metadata"]["uid"]  # not recreated
        assert "regokite.dev/applied-hash" in taken["metadata"]["annotations"]
        managers = {m["manager"] for m in taken["metadata"]["managedFields"]}
        assert "regokite" in managers
        metrics = ctl.metrics()
        assert 'verb="take-over"' in metrics
        assert 'verb="recreate"' not in metrics
        kube.wait_for(
            lambda: get(api, f"{parents}/moved"), lambda p: p.get("status", {}).get("pods") == 1, what="status"
        )
        assert get(api, pod_path)["metadata"]["uid"] == created["metadata"]["uid"]
