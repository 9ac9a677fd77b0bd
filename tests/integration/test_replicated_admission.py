"""Admission on replicated cluster data: the shipped unique_ingress_host policy on a real API server.

The admission server runs on a ServiceAccount token bound to exactly the
ClusterRole `regokite manifests admission` generates for the policies'
`replicate` declarations (Ingresses and Namespaces), and replicates them
with no --replicate flag.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
from kube import Cluster, create, delete
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_manifests_rbac import sa_kubeconfig, status_of

from regokite.manifests import generate
from tests.admission.server import RunningServer, admission_server

ROOT = Path(__file__).resolve().parents[2]
RBAC_KINDS = {
    "ServiceAccount": "serviceaccounts",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
}


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("policies")
    shutil.copytree(ROOT / "policies" / "lib", root / "lib")
    for name in ("unique_ingress_host", "restricted_namespaces"):
        shutil.copytree(ROOT / "policies" / "admission" / name, root / "admission" / name)
    return root


@pytest.fixture
def token(cluster: Cluster, api: client.ApiClient, namespace: str, policies: Path, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig with the token of the generated ServiceAccount, bound to the generated ClusterRole."""
    name = kube.unique_name("rk")
    opts = generate.AdmissionOptions(policies=[str(policies)], namespace=namespace, name=name, include_namespace=False)
    objects = [o for o in generate.admission_manifests(opts) if o["kind"] in RBAC_KINDS]
    assert {o["kind"] for o in objects} == set(RBAC_KINDS)
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
    ]
    cluster_scoped = []
    for obj in objects:
        group_version = obj["apiVersion"]
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        plural = RBAC_KINDS[obj["kind"]]
        ns = obj["metadata"].get("namespace")
        path = f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"
        create(api, path, obj)
        if not ns:
            cluster_scoped.append(f"{path}/{obj['metadata']['name']}")
    try:
        yield sa_kubeconfig(cluster, api, namespace, name, tmp_path)
    finally:
        for path in cluster_scoped:
            delete(api, path)


@pytest.fixture
def regokite(
    policies: Path, token: Path, tmp_path: Path, api: client.ApiClient, namespace: str
) -> Iterator[RunningServer]:
    with admission_server(policies, tmp_path, "--kubeconfig", str(token), "--workers", "2") as server:
        name = f"{kube.unique_name('rk')}.ingress.regokite.dev"
        ca = base64.b64encode(server.ca.read_bytes()).decode()
        kind, ingresses = "ValidatingWebhookConfiguration", ("networking.k8s.io", "ingresses")
        create(
            api,
            kube.VALIDATING,
            kube.webhook_config(kind, name, f"{server.url}/validate", ca, namespace, resource=ingresses),
        )
        try:
            yield server
        finally:
            delete(api, f"{kube.VALIDATING}/{name}")


def ingress(name: str, host: str) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name},
        "spec": {
            "rules": [
                {
                    "host": host,
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ]
        },
    }


def try_create(api: client.ApiClient, path: str, obj: dict, *, dry_run: bool = False) -> tuple[int, str]:
    try:
        kube.request(api, "POST", path, obj, query={"dryRun": "All"} if dry_run else None)
    except ApiException as exc:
        return exc.status, json.loads(exc.body or "{}").get("message", "")
    return 201, ""


def test_a_second_ingress_with_the_same_host_is_refused_until_the_first_is_gone(
    api: client.ApiClient, namespace: str, token: Path, regokite: RunningServer
) -> None:
    ingresses = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses"
    with regokite.client() as c:
        ready = c.get("/readyz").json()
    assert ready["replication"]["ready"] is True
    assert ready["replication"]["resources"] == ["v1/namespaces", "networking.k8s.io/v1/ingresses"]

    assert try_create(api, ingresses, ingress("first", "shop.example.com")) == (201, "")
    # the API server has stored the first; its watch event reaches the server's replica in moments
    kube.wait_for(
        lambda: try_create(api, ingresses, ingress("second", "shop.example.com"), dry_run=True),
        lambda result: result[0] == 403,
        what="the first Ingress to be replicated",
        timeout=10,
    )
    status, message = try_create(api, ingresses, ingress("second", "shop.example.com"))
    assert status == 403
    assert f'host "shop.example.com" is already served by Ingress {namespace}/first' in message
    assert try_create(api, ingresses, ingress("other", "blog.example.com")) == (201, "")

    delete(api, f"{ingresses}/first")
    deleted = time.monotonic()
    kube.wait_for(
        lambda: try_create(api, ingresses, ingress("second", "shop.example.com")),
        lambda result: result[0] == 201,
        what="the same create to be allowed once the first Ingress is deleted",
        timeout=1.0,
        interval=0.02,
    )
    print(f"\ndeleted -> allowed in {time.monotonic() - deleted:.3f}s")


def test_the_servers_token_reads_only_what_the_policies_declare(cluster: Cluster, namespace: str, token: Path) -> None:
    with kube.cluster_from_kubeconfig(token).api_client() as sa_api:
        assert status_of(sa_api, "GET", "/apis/networking.k8s.io/v1/ingresses") == 200
        assert status_of(sa_api, "GET", "/api/v1/namespaces") == 200
        assert status_of(sa_api, "GET", f"/api/v1/namespaces/{namespace}/configmaps") == 403
        assert status_of(sa_api, "GET", "/api/v1/secrets") == 403
        assert status_of(sa_api, "GET", "/api/v1/pods") == 403
        assert status_of(sa_api, "DELETE", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/x") == 403
        try:
            kube.request(
                sa_api, "POST", f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses", ingress("x", "x.io")
            )
        except ApiException as exc:
            assert exc.status == 403
        else:
            pytest.fail("the admission server's token could create an Ingress")


def test_a_reload_declaring_a_resource_the_token_cannot_list_keeps_the_last_good_set(
    policies: Path, regokite: RunningServer
) -> None:
    extra = policies / "admission" / "reads_configmaps"
    extra.mkdir()
    (extra / "reads_configmaps.rego").write_text(
        'package admission.reads_configmaps\n\nreplicate := {"namespaced": ["v1/configmaps"]}\n\n'
        'deny contains "x" if data.kubernetes.configmaps.nope\n'
    )
    try:
        with regokite.client() as c:
            ready = kube.wait_for(
                lambda: c.get("/readyz"),
                lambda r: r.json()["reload"]["error"] is not None,
                what="the reload to fail",
                timeout=10,
            )
        assert ready.status_code == 200  # still serving the last good set, its replica ready
        assert "cannot replicate v1/configmaps" in ready.json()["reload"]["error"]
        assert "admission.reads_configmaps" not in ready.json()["policies"]
    finally:
        shutil.rmtree(extra)
