"""Builtin errors through the real API server, as OPA and Gatekeeper evaluate them: the call that errs is
undefined and the rest decides (admission and audit), each such place is logged and counted on /metrics,
and `--strict-builtin-errors` refuses instead. On the code before, both requests below were refused
(policy error) and the audit reported errors."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import Cluster, create, delete
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.admission.server import RunningServer, admission_server
from tests.admission.test_builtin_errors import BUDGET, FORBIDDEN_NAMES, constraint, template
from tests.processes import REGOKITE

ROOT = Path(__file__).resolve().parents[2]
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"


def deployment(name: str, **annotations: str) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "a", "image": "pause"}]}},
        },
    }


@pytest.fixture
def policies(tmp_path: Path, namespace: str) -> Path:
    root = tmp_path / "policies"
    root.mkdir()
    rules = '[{"apiGroups": ["apps"], "resources": ["deployments"]}]'
    match = f'match := {{"rules": {rules}, "namespaces": ["{namespace}"]}}'
    (root / "budget.rego").write_text(
        BUDGET.replace("package admission.budget\n", f"package admission.budget\n\n{match}\n")
    )
    forbidden = constraint("K8sForbiddenNames", "no-brackets", {})
    forbidden["spec"]["parameters"] = {"forbidden": "["}
    forbidden["spec"]["match"]["namespaces"] = [namespace]
    (root / "forbidden.yaml").write_text(
        yaml.safe_dump_all([template("K8sForbiddenNames", FORBIDDEN_NAMES), forbidden])
    )
    return root


def served(api: client.ApiClient, namespace: str, server: RunningServer) -> Iterator[RunningServer]:
    ca = base64.b64encode(server.ca.read_bytes()).decode()
    name = f"{kube.unique_name('rk')}.admission.regokite.dev"
    config = kube.webhook_config("ValidatingWebhookConfiguration", name, f"{server.url}/validate", ca, namespace)
    create(api, kube.VALIDATING, config)
    try:
        kube.wait_for(
            lambda: create_status(api, namespace, deployment(kube.unique_name("probe"), budget="1", pattern="^x$")),
            lambda status: isinstance(status, str),  # refused: the pattern does not match
            what="the API server to start calling regokite",
            timeout=30,
        )
        yield server
    finally:
        delete(api, f"{kube.VALIDATING}/{name}")


@pytest.fixture
def regokite(policies: Path, tmp_path: Path, api: client.ApiClient, namespace: str) -> Iterator[RunningServer]:
    with admission_server(policies, tmp_path) as server:
        yield from served(api, namespace, server)


@pytest.fixture
def strict(policies: Path, tmp_path: Path, api: client.ApiClient, namespace: str) -> Iterator[RunningServer]:
    with admission_server(policies, tmp_path, "--strict-builtin-errors") as server:
        yield from served(api, namespace, server)


def create_status(api: client.ApiClient, namespace: str, obj: dict) -> int | str:
    try:
        create(api, DEPLOYMENTS.format(ns=namespace), obj)
    except ApiException as exc:
        return json.loads(exc.body)["message"]  # 403 denied, 500 refused on a policy error
    return 201


def test_admission_decides_as_opa_and_logs_and_counts_each_place(
    api: client.ApiClient, namespace: str, regokite: RunningServer
) -> None:
    # the division is undefined, the pattern matches: nothing denies (as OPA's default and Gatekeeper)
    assert create_status(api, namespace, deployment("calm", budget="0", pattern="^calm$")) == 201
    # the pattern does not parse: `not regex.match(...)` holds, as in OPA; the template's call is undefined
    refused = create_status(api, namespace, deployment("rough", budget="0", pattern="["))
    assert isinstance(refused, str) and "[admission.budget] name does not match [" in refused, refused
    assert "no-brackets" not in refused and "policy error" not in refused
    with regokite.client() as c:
        metrics = c.get("/metrics").text
    counted = [
        line
        for line in metrics.splitlines()
        if line.startswith("regokite_policy_builtin_errors_total{") and "budget.rego:6:" in line  # the division
    ]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 2, metrics
    logged = [json.loads(line) for line in regokite.logs().splitlines() if '"regokite.policy.builtin_error"' in line]
    assert {(entry["policy"], entry["builtin"]) for entry in logged} >= {("admission.budget", "div")}, logged
    assert any("forbidden.yaml" in entry["location"] and entry["builtin"] == "regex.match" for entry in logged)


def test_strict_builtin_errors_refuse_the_request(api: client.ApiClient, namespace: str, strict: RunningServer) -> None:
    refused = create_status(api, namespace, deployment("calm", budget="0", pattern="^calm$"))
    assert isinstance(refused, str) and "[admission.budget] policy error" in refused, refused


def test_audit_reports_what_opa_would(cluster: Cluster, api: client.ApiClient, namespace: str, policies: Path) -> None:
    create(api, DEPLOYMENTS.format(ns=namespace), deployment("calm", budget="0", pattern="^calm$"))
    create(api, DEPLOYMENTS.format(ns=namespace), deployment("rough", budget="0", pattern="["))

    def audit(*flags: str) -> list[tuple[str, str, str]]:
        argv = [*REGOKITE, "audit", "--policies", str(policies), "--kubeconfig", str(cluster.kubeconfig)]
        done = subprocess.run(
            [*argv, "--once", "--format", "json", "--jobs", "1", *flags],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=120,
        )
        found = json.loads(done.stdout)["results"]
        return sorted(
            (r["policy"], r["result"], r["resource"]["name"]) for r in found if r["resource"]["namespace"] == namespace
        )

    assert audit() == [("admission.budget", "fail", "rough")]
    assert audit("--strict-builtin-errors") == [
        ("admission.budget", "error", "calm"),
        ("admission.budget", "error", "rough"),
        ("no-brackets", "error", "calm"),
        ("no-brackets", "error", "rough"),
    ]
