"""charts/regokite on the real API server through Helm's own library (helm-python-sdk, Helm v4's Go SDK).

The dry run: the chart rendered as `helm install` renders it for this server (its capabilities: a 1.20
server gets policy/v1beta1 PodDisruptionBudgets), every object created with dryRun=All, and none of its
fields dropped or changed by the server. The install and upgrade run on a private control plane (the
gatekeeper role's namespace-label webhook fails closed while its server cannot answer, which would
refuse the session's other tests their namespaces), with the kubelet stand-in binding the Pods.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import controlplane
import kube
import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from test_manifests_dry_run import dropped

from regokite import yamldoc

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (the test extra) is Helm here")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "regokite"
ROLES = ("admission", "gatekeeper", "audit", "controller")
Obj = dict[str, Any]


def ci_values(role: str) -> Obj:
    [values] = yamldoc.load_all((CHART / "ci" / f"{role}-values.yaml").read_text(encoding="utf-8"))
    return values


def rendered(config: Any, values: Obj | None, release: str, namespace: str) -> list[Obj]:
    """What `helm install` sends: Helm's own server-side dry run renders with this server's capabilities and
    lookups (and stores nothing)."""
    dry = config.install(str(CHART), release, values, namespace=namespace, dry_run="server")
    return [doc for doc in yamldoc.load_all(dry["manifest"]) if doc]


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    name = kube.unique_name("helm")
    kube.create(api, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete(api, f"/api/v1/namespaces/{name}")


@pytest.mark.parametrize("role", [None, *ROLES, "admission-bundles"])
def test_every_rendered_object_passes_a_server_side_dry_run(
    role: str | None, cluster: kube.Cluster, dynamic: DynamicClient, namespace: str
) -> None:
    config = helm.Config(kubeconfig_path=str(cluster.kubeconfig), namespace=namespace)
    try:
        objects = rendered(config, ci_values(role) if role else None, "regokite", namespace)
    finally:
        config.close()
    assert objects
    changed = {}
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        ns = namespace if resource.namespaced else None
        got = resource.create(body=obj, namespace=ns, dry_run="All").to_dict()
        lost = dropped(obj, got)
        if lost:
            changed[f"{obj['kind']}/{obj['metadata']['name']}"] = lost
    assert changed == {}


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[controlplane.ControlPlane]:
    cp = controlplane.start(tmp_path / "cp")
    try:
        controlplane.start_kubelet_standin(cp, 1, complete_after=1.0)
        yield cp
    finally:
        cp.stop()


def _pods_running(api: client.ApiClient, namespace: str, component: str, count: int) -> None:
    selector = f"app.kubernetes.io/name=regokite,app.kubernetes.io/component={component}"

    def ready() -> list[Obj] | None:
        pods = kube.get(api, f"/api/v1/namespaces/{namespace}/pods", labelSelector=selector)["items"]
        running = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        return running if len(running) >= count else None

    kube.wait_for(ready, timeout=90, what=f"{count} {component} pods bound and running")


def test_helm_install_then_upgrade_creates_and_updates_the_objects_and_keeps_the_ca(
    plane: controlplane.ControlPlane,
) -> None:
    ns, release = "regokite-system", "regokite"
    values = {**ci_values("admission"), "gatekeeper": {"enabled": True}}
    config = helm.Config(kubeconfig_path=str(plane.kubeconfig), namespace=ns)
    cluster = kube.Cluster.of(plane)
    with cluster.api_client() as api:  # a 1.20 API server does not label namespaces with their name yet
        labels = {"kubernetes.io/metadata.name": ns}
        kube.create(api, "/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})
    try:
        first = config.install(str(CHART), release, values, namespace=ns, timeout=120)
        assert (first["revision"], first["status"]) == (1, "deployed"), first
        with cluster.api_client() as api:
            assert kube.exists(
                api,
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/constrainttemplates.templates.gatekeeper.sh",
            )
            _pods_running(api, ns, "admission", 2)
            _pods_running(api, ns, "gatekeeper", 2)
            secret = kube.get(api, f"/api/v1/namespaces/{ns}/secrets/regokite-admission-tls")
            hooks = kube.get(api, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/regokite")
            assert {h["clientConfig"]["caBundle"] for h in hooks["webhooks"]} == {secret["data"]["ca.crt"]}
            assert base64.b64decode(secret["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
            assert {h["timeoutSeconds"] for h in hooks["webhooks"]} == {5}

        upgraded = {**values, "replicas": 3, "validatingWebhookTimeoutSeconds": 7, "exemptNamespaces": ["monitoring"]}
        second = config.upgrade(str(CHART), release, upgraded, namespace=ns, timeout=120)
        assert (second["revision"], second["status"]) == (2, "deployed"), second
        with cluster.api_client() as api:
            deployment = kube.get(api, f"/apis/apps/v1/namespaces/{ns}/deployments/regokite-admission")
            assert deployment["spec"]["replicas"] == 3
            _pods_running(api, ns, "admission", 3)
            hooks = kube.get(api, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/regokite")
            assert {h["timeoutSeconds"] for h in hooks["webhooks"]} == {7}
            assert all(
                "monitoring" in h["namespaceSelector"]["matchExpressions"][-1]["values"] for h in hooks["webhooks"]
            )
            after = kube.get(api, f"/api/v1/namespaces/{ns}/secrets/regokite-admission-tls")
            assert after["data"] == secret["data"]  # the generated CA survives the upgrade (lookup)
            assert {h["clientConfig"]["caBundle"] for h in hooks["webhooks"]} == {secret["data"]["ca.crt"]}
    finally:
        config.close()
