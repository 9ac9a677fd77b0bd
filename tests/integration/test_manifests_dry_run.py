"""Every overlay in deploy/ and `regokite manifests` output, applied by kubectl to the real API server (dry run).

Each overlay is rendered by `kubectl kustomize` (what `kubectl apply -k`
sends), its Namespace created first, then everything goes through `kubectl
apply --dry-run=server`. Two kinds the local 1.20 server cannot take as they
are, and the test prints which: policy/v1 PodDisruptionBudget (served there as
policy/v1beta1, which gets the dry run instead, plus a check of its fields
against the policy/v1 model's OpenAPI attribute map), and cert-manager's Issuer
and Certificate (no cert-manager here: the test installs CRDs for the two kinds
whose schemas hold only the cert-manager v1 fields regokite uses, so kubectl's
validation or the server's pruning catches any other field). A field the
server silently drops or changes fails the test too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kube
import pytest
import yaml
from kubernetes import client

from regokite.manifests import deploy, generate
from tests.manifests import kubectl

ROOT = Path(__file__).resolve().parents[2]
STRING = {"type": "string"}
STRINGS = {"type": "array", "items": STRING}
ANY_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
# cert-manager.io/v1 fields regokite uses, from its published API reference.
CERT_MANAGER_SPECS = {
    "Issuer": {kind: ANY_OBJECT for kind in ("selfSigned", "ca", "acme", "vault", "venafi")},
    "Certificate": {
        "secretName": STRING,
        "dnsNames": STRINGS,
        "ipAddresses": STRINGS,
        "uris": STRINGS,
        "emailAddresses": STRINGS,
        "commonName": STRING,
        "duration": STRING,
        "renewBefore": STRING,
        "privateKey": {
            "type": "object",
            "properties": {
                "algorithm": STRING,
                "size": {"type": "integer"},
                "encoding": STRING,
                "rotationPolicy": STRING,
            },
        },
        "issuerRef": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": STRING, "kind": STRING, "group": STRING},
        },
        "usages": STRINGS,
        "isCA": {"type": "boolean"},
        "subject": ANY_OBJECT,
        "secretTemplate": ANY_OBJECT,
        "keystores": ANY_OBJECT,
        "revisionHistoryLimit": {"type": "integer"},
    },
}
REQUIRED = {"Issuer": [], "Certificate": ["secretName", "issuerRef"]}


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


def key(obj: dict[str, Any]) -> tuple[str, str, str | None, str]:
    return (
        obj["apiVersion"].rpartition("/")[0],
        obj["kind"],
        obj["metadata"].get("namespace"),
        obj["metadata"]["name"],
    )


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


def variants() -> dict[str, list[dict[str, Any]]]:
    found = {
        f"deploy/overlays/{o.name}": kubectl.kustomize(o) for o in sorted((ROOT / "deploy" / "overlays").iterdir())
    }
    found["manifests controller --watch-namespace team-a --engine opa"] = generate.controller_manifests(
        deploy.controller_options(watch_namespace="team-a", engine="opa")
    )
    found["manifests controller --shards --replicas 3"] = generate.controller_manifests(
        deploy.controller_options(shards=True, leader_elect=False, replicas=3)
    )
    found["manifests admission --replicas 1"] = generate.admission_manifests(deploy.admission_options(replicas=1))
    found["manifests gatekeeper --replicate-cluster v1/namespaces"] = generate.gatekeeper_manifests(
        generate.GatekeeperOptions(replicate_cluster=["v1/namespaces"])
    )
    found["manifests controller (definitions from the cluster)"] = generate.controller_manifests(
        generate.ControllerOptions(
            policies=["policies/controllers/hello_world"], writes=["v1/pods"], watch_definitions=True
        )
    )
    return found


@pytest.fixture
def cert_manager_crds(api: client.ApiClient) -> Iterator[None]:
    """Issuer and Certificate served, with only the fields regokite may use."""
    names = []
    for kind, spec in CERT_MANAGER_SPECS.items():
        schema = {
            "type": "object",
            "properties": {"spec": {"type": "object", "required": REQUIRED[kind], "properties": spec}},
        }
        crd = kube.crd_manifest("cert-manager.io", kind, schema=schema)
        kube.install_crd(api, crd)
        names.append(crd["metadata"]["name"])
    yield
    for name in names:
        kube.uninstall_crd(api, name)


def create_namespaces(api: client.ApiClient, names: set[str]) -> list[str]:
    """Namespaced objects can be dry-run only into a namespace that exists: create the missing ones."""
    created = []
    for name in sorted(names):
        if not kube.exists(api, f"/api/v1/namespaces/{name}"):
            kube.create(api, "/api/v1/namespaces", {"metadata": {"name": name}})
            created.append(name)
    return created


def test_every_object_is_accepted_by_the_api_server(
    api: client.ApiClient, cluster: kube.Cluster, cert_manager_crds: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    pdb_v1 = served(api, "policy/v1")
    adapted: list[str] = []
    checked = 0
    created: list[str] = []
    try:
        for name, objects in variants().items():
            sent = []
            for obj in objects:
                obj = copy.deepcopy(obj)
                what = f"{name}: {obj['kind']} {obj['metadata']['name']}"
                if obj["apiVersion"].startswith("cert-manager.io/"):
                    adapted.append(f"{what} (cert-manager absent: CRD with its v1 fields installed by the test)")
                if obj["kind"] == "PodDisruptionBudget" and not pdb_v1:
                    check_pdb_v1_fields(obj)
                    obj["apiVersion"] = "policy/v1beta1"
                    adapted.append(f"{what} (policy/v1 not served: dry run as policy/v1beta1 + v1 model)")
                sent.append(obj)
            namespaces = {o["metadata"]["name"] for o in sent if o["kind"] == "Namespace"}
            namespaces |= {o["metadata"]["namespace"] for o in sent if "namespace" in o["metadata"]}
            created += create_namespaces(api, namespaces)
            answer = json.loads(
                kubectl.run(
                    "apply",
                    "--dry-run=server",
                    "-o",
                    "json",
                    "-f",
                    "-",
                    stdin=yaml.safe_dump_all(sent),
                    kubeconfig=cluster.kubeconfig,
                )
            )
            stored = {key(o): o for o in (answer["items"] if answer["kind"] == "List" else [answer])}
            for obj in sent:
                what = f"{name}: {obj['kind']} {obj['metadata']['name']}"
                assert key(obj) in stored, f"{what}: not in kubectl's answer"
                lost = dropped(obj, stored[key(obj)])
                assert not lost, f"{what}: the server dropped or changed {lost}"
                checked += 1
    finally:
        for ns in created:
            kube.delete(api, f"/api/v1/namespaces/{ns}")
    print(f"\n{checked} objects accepted by kubectl apply --dry-run=server; adapted for this server:")
    for line in adapted:
        print(f"  {line}")
    assert checked > 20
