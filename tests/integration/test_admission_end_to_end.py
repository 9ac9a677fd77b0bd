"""regokite admission in the real API server's path: its answers are enforced and stored."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
from kube import create, delete, get
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.admission.server import RunningServer, admission_server

ROOT = Path(__file__).resolve().parents[2]

DEPLOYMENTS = '{"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "resources": ["deployments"]}]}'

TEAM_LABEL = f"""package admission.team_label

match := {DEPLOYMENTS}

patch contains {{"op": "add", "path": "/metadata/labels", "value": {{"team": "platform"}}}} if {{
	not input.request.object.metadata.labels
}}

patch contains {{"op": "add", "path": "/metadata/labels/team", "value": "platform"}} if {{
	input.request.object.metadata.labels
	not input.request.object.metadata.labels.team
}}
"""

EXPLODES = f"""package admission.explodes

match := {DEPLOYMENTS}

# a conflict (two values of a complete rule): an error in OPA too, unlike a builtin's error (undefined)
reason := "one" if input.request.object.metadata.annotations.explode == "yes"

reason := "two" if input.request.object.metadata.annotations.explode == "yes"

deny contains reason if reason == "three"
"""

NOTICES = f"""package admission.notices

match := {DEPLOYMENTS}

warn contains "this request is a dry run" if input.request.dryRun

warn contains "single replica: not highly available" if input.request.object.spec.replicas == 1
"""


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("policies")
    shutil.copytree(ROOT / "policies" / "lib", root / "lib")
    shutil.copytree(ROOT / "policies" / "admission" / "required_labels", root / "admission" / "required_labels")
    for name, text in {"team_label": TEAM_LABEL, "explodes": EXPLODES, "notices": NOTICES}.items():
        (root / "admission" / name).mkdir(parents=True)
        (root / "admission" / name / f"{name}.rego").write_text(text)
    return root


@pytest.fixture
def regokite(policies: Path, tmp_path: Path, api: client.ApiClient, namespace: str) -> Iterator[RunningServer]:
    with admission_server(policies, tmp_path) as server:
        ca = base64.b64encode(server.ca.read_bytes()).decode()
        name = f"{kube.unique_name('rk')}.admission.regokite.dev"
        create(
            api,
            kube.MUTATING,
            kube.webhook_config(
                "MutatingWebhookConfiguration",
                name,
                f"{server.url}/mutate",
                ca,
                namespace,
                review_versions=("v1", "v1beta1"),
            ),
        )
        create(
            api,
            kube.VALIDATING,
            kube.webhook_config(
                "ValidatingWebhookConfiguration",
                name,
                f"{server.url}/validate",
                ca,
                namespace,
                review_versions=("v1", "v1beta1"),
            ),
        )
        try:
            kube.wait_for(
                lambda: _try_create(api, namespace, deployment(kube.unique_name("probe"), labels={})),
                lambda status: status == 403,
                what="the API server to start calling regokite",
                timeout=30,
            )
            yield server
        finally:
            delete(api, f"{kube.MUTATING}/{name}")
            delete(api, f"{kube.VALIDATING}/{name}")


def deployment(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict:
    labels = {"app.kubernetes.io/name": name, "owner": "team-a"} if labels is None else labels
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **labels}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
            },
        },
    }


def _try_create(api: client.ApiClient, namespace: str, obj: dict) -> int:
    try:
        create(api, f"/apis/apps/v1/namespaces/{namespace}/deployments", obj)
    except ApiException as e:
        return e.status
    return 201


def create_with_warnings(api: client.ApiClient, namespace: str, obj: dict, **query: str) -> tuple[dict, list[str]]:
    resp = kube._raw(
        api, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", body=obj, query=list(query.items())
    )
    return json.loads(resp.read()), resp.headers.get_all("Warning") or []


def test_a_deployment_without_required_labels_is_refused_with_the_policys_message(
    api: client.ApiClient, namespace: str, regokite: RunningServer
) -> None:
    with pytest.raises(ApiException) as refused:
        create(api, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("bare", labels={}))
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert "denied the request" in message
    assert "[admission.required_labels]" in message
    assert "app.kubernetes.io/name" in message and "owner" in message
    assert not kube.exists(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/bare")


def test_a_mutating_policys_change_is_visible_in_the_stored_object(
    api: client.ApiClient, namespace: str, regokite: RunningServer
) -> None:
    create(api, f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("mutated"))
    stored = get(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/mutated")
    assert stored["metadata"]["labels"]["team"] == "platform"


def test_a_policy_error_refuses_the_request_naming_policy_and_error(
    api: client.ApiClient, namespace: str, regokite: RunningServer
) -> None:
    with pytest.raises(ApiException) as refused:
        create(
            api,
            f"/apis/apps/v1/namespaces/{namespace}/deployments",
            deployment("boom", annotations={"explode": "yes"}),
        )
    message = json.loads(refused.value.body)["message"]
    assert "[admission.explodes] policy error" in message
    assert "explodes.rego:" in message


def test_warnings_reach_the_client(api: client.ApiClient, namespace: str, regokite: RunningServer) -> None:
    _, warnings = create_with_warnings(api, namespace, deployment("warned"))
    assert any("single replica: not highly available" in w for w in warnings), warnings


def test_dry_run_requests_are_marked_in_the_input(
    api: client.ApiClient, namespace: str, regokite: RunningServer
) -> None:
    _, warnings = create_with_warnings(api, namespace, deployment("dry"), dryRun="All")
    assert any("this request is a dry run" in w for w in warnings), warnings
    assert not kube.exists(api, f"/apis/apps/v1/namespaces/{namespace}/deployments/dry")
