"""Metacontroller's service-per-pod DecoratorControllers, with Rego hooks, on the real API server.

The StatefulSet controller of kube-controller-manager really creates the Pods
(they stay Pending: no scheduler runs); the decorators attach Services to the
StatefulSet and label the Pods it owns.
"""

from __future__ import annotations

from pathlib import Path

import kube
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "controllers" / "service_per_pod"


def statefulset(namespace: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "nginx",
            "namespace": namespace,
            "annotations": {
                "service-per-pod-label": "statefulset.kubernetes.io/pod-name",
                "service-per-pod-ports": "80:8080",
            },
        },
        "spec": {
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "serviceName": "nginx",
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {
                "metadata": {"labels": {"app": "nginx"}, "annotations": {"pod-name-label": "pod-name"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
            },
        },
    }


def label_owners(obj: dict, key: str) -> set[str]:
    """The field managers that own label `key` (from managedFields)."""
    return {
        e["manager"]
        for e in obj["metadata"].get("managedFields") or ()
        if f"f:{key}" in ((e.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels", {})
    }


def test_services_per_pod_labels_on_pods_and_finalize(cluster: Cluster, api: client.ApiClient, namespace: str) -> None:
    sts_path = f"/apis/apps/v1/namespaces/{namespace}/statefulsets"
    svc = f"/api/v1/namespaces/{namespace}/services"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with ControllerProcess.running(cluster.kubeconfig, EXAMPLE, namespace=namespace) as ctl:
        sts = create(api, sts_path, statefulset(namespace))
        for i in range(2):
            s = kube.wait_for(lambda i=i: get(api, f"{svc}/nginx-{i}"), what=f"service nginx-{i}")
            assert s["spec"]["selector"] == {"statefulset.kubernetes.io/pod-name": f"nginx-{i}"}
            assert s["spec"]["ports"][0]["port"] == 80 and s["spec"]["ports"][0]["targetPort"] == 8080
            [ref] = s["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["uid"], ref["controller"]) == ("StatefulSet", sts["metadata"]["uid"], True)
            assert s["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"] == "service-per-pod"
        decorated = kube.wait_for(
            lambda: get(api, f"{sts_path}/nginx"),
            lambda o: o["metadata"].get("annotations", {}).get("service-per-pod/services") == "2",
            what="the StatefulSet annotated with its Service count",
        )
        assert "metacontroller.io/decoratorcontroller-service-per-pod" in decorated["metadata"]["finalizers"]
        # The user's annotations on the StatefulSet are untouched.
        assert decorated["metadata"]["annotations"]["service-per-pod-ports"] == "80:8080"

        # Pods made by the StatefulSet controller get the decorator's label beside their own.
        pod = kube.wait_for(
            lambda: get(api, f"{pods}/nginx-0"),
            lambda p: p["metadata"].get("labels", {}).get("pod-name") == "nginx-0",
            what="pod nginx-0 labelled pod-name=nginx-0",
        )
        assert pod["metadata"]["labels"]["app"] == "nginx"
        assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "nginx-0"
        assert label_owners(pod, "pod-name") == {"regokite-decorator-pod-name-label"}

        # A user labels the Pod, then the decorator's key changes: the decorator's old label goes,
        # the new one comes, and labels it never set stay.
        merge_patch(api, f"{pods}/nginx-0", {"metadata": {"labels": {"team": "a"}}})
        merge_patch(api, f"{pods}/nginx-0", {"metadata": {"annotations": {"pod-name-label": "pod-id"}}})
        pod = kube.wait_for(
            lambda: get(api, f"{pods}/nginx-0"),
            lambda p: p["metadata"]["labels"].get("pod-id") == "nginx-0" and "pod-name" not in p["metadata"]["labels"],
            what="label pod-name replaced by pod-id",
        )
        assert pod["metadata"]["labels"]["team"] == "a"
        assert pod["metadata"]["labels"]["app"] == "nginx"
        assert pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "nginx-0"

        # A label the decorator does not set, even under a key it used to own elsewhere, survives.
        merge_patch(api, f"{pods}/nginx-1", {"metadata": {"labels": {"pod-id": "set-by-hand"}}})
        merge_patch(api, f"{pods}/nginx-1", {"metadata": {"annotations": {"pod-name-label": "other"}}})
        pod1 = kube.wait_for(
            lambda: get(api, f"{pods}/nginx-1"),
            lambda p: p["metadata"]["labels"].get("other") == "nginx-1",
            what="pod nginx-1 labelled other=nginx-1",
        )
        assert pod1["metadata"]["labels"]["pod-id"] == "set-by-hand"
        assert "pod-name" not in pod1["metadata"]["labels"]
        assert "regokite-decorator-pod-name-label" not in label_owners(pod1, "pod-id")

        # Scale down: the extra Service is removed.
        merge_patch(api, f"{sts_path}/nginx", {"spec": {"replicas": 1}})
        kube.wait_for_deletion(api, f"{svc}/nginx-1")
        assert kube.exists(api, f"{svc}/nginx-0")

        # Delete: the finalize hook removes the Services, then lets the StatefulSet go.
        kube.delete(api, f"{sts_path}/nginx")
        kube.wait_for_deletion(api, f"{svc}/nginx-0", timeout=30)
        kube.wait_for_deletion(api, f"{sts_path}/nginx", timeout=30)
        assert ctl.stop() == 0
