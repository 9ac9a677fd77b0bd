"""Every object in deploy/ and `regokite manifests` output, accepted by the real API server (dry run).

Objects the local 1.20 server does not serve are checked another way, and
the test prints which: policy/v1 PodDisruptionBudget (served there as
policy/v1beta1, which gets the dry run instead, plus a check of its fields
against the policy/v1 model's OpenAPI attribute map), and cert-manager's
Issuer and Certificate (no CRDs here: fields checked against the cert-manager
v1 API's field lists). A field the server silently drops (an unknown field in
1.20's lenient decoding) fails the test too.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kube
import pytest
from kubernetes import client

from regokite.manifests import deploy, generate
from tests.manifests import kustomize

ROOT = Path(__file__).resolve().parents[2]
NAMESPACED_PATHS = {
    "ServiceAccount": "serviceaccounts",
    "ConfigMap": "configmaps",
    "Service": "services",
    "Deployment": "deployments",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "PodDisruptionBudget": "poddisruptionbudgets",
}
CLUSTER_PATHS = {
    "Namespace": "namespaces",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "CustomResourceDefinition": "customresourcedefinitions",
}
# cert-manager.io/v1 fields regokite uses, from its published API reference.
CERT_MANAGER_FIELDS = {
    "Issuer": {"spec": {"selfSigned", "ca", "acme", "vault", "venafi"}},
    "Certificate": {
        "spec": {
            "secretName",
            "dnsNames",
            "ipAddresses",
            "uris",
            "emailAddresses",
            "commonName",
            "duration",
            "renewBefore",
            "privateKey",
            "issuerRef",
            "usages",
            "isCA",
            "subject",
            "secretTemplate",
            "keystores",
            "revisionHistoryLimit",
        },
        "spec.privateKey": {"algorithm", "size", "encoding", "rotationPolicy"},
        "spec.issuerRef": {"name", "kind", "group"},
    },
}


def base_path(obj: dict[str, Any]) -> str:
    group_version = obj["apiVersion"]
    prefix = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    kind = obj["kind"]
    if kind in CLUSTER_PATHS:
        return f"{prefix}/{CLUSTER_PATHS[kind]}"
    return f"{prefix}/namespaces/{obj['metadata']['namespace']}/{NAMESPACED_PATHS[kind]}"


def dropped(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths of fields present in `sent` but missing or different in what the server stored."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [path or "/"]
        return [p for k, v in sent.items() for p in dropped(v, got.get(k, _MISSING), f"{path}.{k}")]
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [path]
        return [p for i, (a, b) in enumerate(zip(sent, got, strict=True)) for p in dropped(a, b, f"{path}[{i}]")]
    return [] if sent == got else [path]


_MISSING = object()


def served(api: client.ApiClient, group_version: str) -> bool:
    path = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    return kube.exists(api, path)


def check_pdb_v1_fields(obj: dict[str, Any]) -> None:
    """policy/v1 PodDisruptionBudget fields, against the kubernetes client's OpenAPI models."""
    for section, model in (
        (obj, client.V1PodDisruptionBudget),
        (obj["spec"], client.V1PodDisruptionBudgetSpec),
        (obj["metadata"], client.V1ObjectMeta),
    ):
        known = set(model.attribute_map.values())
        assert set(section) <= known, f"{model.__name__}: unknown fields {set(section) - known}"


def check_cert_manager(obj: dict[str, Any]) -> None:
    assert obj["apiVersion"] == "cert-manager.io/v1"
    for where, allowed in CERT_MANAGER_FIELDS[obj["kind"]].items():
        section = obj
        for part in where.split("."):
            section = section[part]
        assert set(section) <= allowed, f"{obj['kind']} {where}: unknown fields {set(section) - allowed}"
    if obj["kind"] == "Certificate":
        assert obj["spec"]["secretName"] and obj["spec"]["issuerRef"]["name"]


def variants() -> dict[str, list[dict[str, Any]]]:
    found = {f"deploy/overlays/{o.name}": kustomize.render(o) for o in sorted((ROOT / "deploy" / "overlays").iterdir())}
    found["manifests controller --watch-namespace team-a --engine opa"] = generate.controller_manifests(
        deploy.controller_options(watch_namespace="team-a", engine="opa")
    )
    found["manifests admission --replicas 1"] = generate.admission_manifests(deploy.admission_options(replicas=1))
    return found


@pytest.fixture
def system_namespace(api: client.ApiClient):
    """regokite-system must exist for namespaced objects to be dry-run in it."""
    created = not kube.exists(api, "/api/v1/namespaces/regokite-system")
    if created:
        kube.create(api, "/api/v1/namespaces", {"metadata": {"name": "regokite-system"}})
    yield
    if created:
        kube.delete(api, "/api/v1/namespaces/regokite-system")


def test_every_object_is_accepted_by_the_api_server(
    api: client.ApiClient, system_namespace: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    if not kube.exists(api, "/api/v1/namespaces/team-a"):
        kube.create(api, "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    not_dry_run: list[str] = []
    checked = 0
    for name, objects in variants().items():
        for obj in objects:
            what = f"{name}: {obj['kind']} {obj['metadata']['name']}"
            if obj["apiVersion"].startswith("cert-manager.io/"):
                check_cert_manager(obj)
                not_dry_run.append(f"{what} (cert-manager CRDs absent: field lists checked)")
                continue
            sent = copy.deepcopy(obj)
            if obj["kind"] == "PodDisruptionBudget" and not served(api, obj["apiVersion"]):
                check_pdb_v1_fields(obj)
                sent["apiVersion"] = "policy/v1beta1"
                not_dry_run.append(f"{what} ({obj['apiVersion']} not served: dry run as policy/v1beta1 + v1 model)")
            if obj["kind"] == "Namespace":
                sent["metadata"]["name"] = kube.unique_name("ns")  # regokite-system exists for the others
            try:
                stored = kube.request(api, "POST", base_path(sent), sent, query={"dryRun": "All"})
            except client.ApiException as e:
                if e.status == 409 and obj["kind"] == "CustomResourceDefinition":
                    continue  # installed by another test: same name, validated there
                pytest.fail(f"{what}: refused: {e.status} {e.body}")
            checked += 1
            lost = dropped(sent, stored)
            assert not lost, f"{what}: the server dropped or changed {lost}"
    print(f"\n{checked} objects accepted by a dry run; not dry-run on this 1.20 server:")
    for line in not_dry_run:
        print(f"  {line}")
    assert checked > 20
