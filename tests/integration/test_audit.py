"""`regokite audit` on a real API server: what already violates shows in PolicyReports, and follows changes."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from regokite.audit.crds import report_crds
from tests.processes import REGOKITE, terminate

ROOT = Path(__file__).resolve().parents[2]

OWNER = """package admission.owner_label

match := {{
	"rules": [{{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}}],
	"namespaces": ["{ns}"],
}}

deny contains msg if {{
	not input.request.object.metadata.labels.owner
	msg := sprintf("ConfigMap %s has no owner label", [input.request.object.metadata.name])
}}
"""

SIZE = """package admission.small_configmaps

match := {{"rules": [{{"apiGroups": [""], "apiVersions": ["*"], "resources": ["configmaps"]}}], "namespaces": ["{ns}"]}}

enforcement := "warn"

deny contains "more than two keys" if count(object.get(input.request.object, "data", {{}})) > 2
"""


def configmap(name: str, labels: dict[str, str] | None = None, keys: int = 1) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {}},
        "data": {f"k{i}": "v" for i in range(keys)},
    }


@pytest.fixture(scope="module")
def crds(api: client.ApiClient) -> None:
    for crd in report_crds():
        kube.install_crd(api, crd)


@pytest.fixture
def policies(tmp_path: Path, namespace: str) -> Path:
    root = tmp_path / "policies"
    root.mkdir()
    (root / "owner_label.rego").write_text(OWNER.format(ns=namespace))
    (root / "small_configmaps.rego").write_text(SIZE.format(ns=namespace))
    return root


def audit_command(cluster: Cluster, policies: Path, *args: str) -> list[str]:
    return [*REGOKITE, "audit", "--policies", str(policies), "--kubeconfig", str(cluster.kubeconfig), *args]


def results_until(api: client.ApiClient, namespace: str, holds, what: str, timeout: float) -> None:
    """Wait until the report's results (`results`) satisfy `holds`, looking often: a bound on the audit's lag."""
    kube.wait_for(lambda: results(api, namespace), holds, what=what, timeout=timeout, interval=0.05)


def results(api: client.ApiClient, namespace: str) -> list[tuple[str, str, str]]:
    report = get(api, f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{namespace}/policyreports/regokite-audit")
    found = ((r["policy"], r["result"], r["resources"][0]["name"]) for r in report.get("results", []))
    return sorted(f for f in found if f[2] != "kube-root-ca.crt")  # made by the controller-manager


@pytest.fixture
def auditing(
    cluster: Cluster, api: client.ApiClient, namespace: str, crds: None, policies: Path, tmp_path: Path
) -> Iterator[Path]:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    create(api, cms, configmap("unowned"))
    create(api, cms, configmap("big", {"owner": "a"}, keys=3))
    create(api, cms, configmap("fine", {"owner": "a"}))
    log = tmp_path / "audit.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            audit_command(cluster, policies),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
        )
    try:
        yield log
    finally:
        terminate(proc, 10, group=True)


def test_existing_violations_appear_and_follow_fixes_and_policy_deletion(
    api: client.ApiClient, namespace: str, policies: Path, auditing: Path
) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    before = [
        ("admission.owner_label", "fail", "unowned"),
        ("admission.small_configmaps", "warn", "big"),
    ]
    kube.wait_for(lambda: results(api, namespace), lambda r: r == before, what="the audit report", timeout=60)
    report = get(api, f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{namespace}/policyreports/regokite-audit")
    uid = report["metadata"]["uid"]
    [fail] = [r for r in report["results"] if r["resources"][0]["name"] == "unowned"]
    assert fail["message"] == "ConfigMap unowned has no owner label"
    assert fail["resources"][0]["kind"] == "ConfigMap" and fail["resources"][0]["namespace"] == namespace
    assert fail["properties"] == {"enforcement": "deny"} and fail["source"] == "regokite"
    assert report["summary"]["fail"] == 2 and report["summary"]["warn"] == 1  # with kube-root-ca.crt

    merge_patch(api, f"{cms}/unowned", {"metadata": {"labels": {"owner": "b"}}})
    big, late = ("admission.small_configmaps", "warn", "big"), ("admission.owner_label", "fail", "late")
    results_until(api, namespace, lambda r: r == [big], "the fixed ConfigMap's result to go", timeout=5)
    create(api, cms, configmap("late"))
    results_until(api, namespace, lambda r: late in r, "a new violation to show", timeout=5)
    (policies / "small_configmaps.rego").unlink()
    results_until(api, namespace, lambda r: r == [late], "the deleted policy's results to go", timeout=10)
    report = get(api, f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{namespace}/policyreports/regokite-audit")
    assert report["metadata"]["uid"] == uid  # updated in place, never recreated


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_once_prints_the_findings_as_json_and_fails_on_a_denial(
    cluster: Cluster, api: client.ApiClient, namespace: str, crds: None, policies: Path, jobs: str
) -> None:
    """A CI check: it prints and writes no report (so needs no report CRDs) unless asked with --reports."""
    create(api, f"/api/v1/namespaces/{namespace}/configmaps", configmap("unowned"))
    done = subprocess.run(
        audit_command(cluster, policies, "--once", "--format", "json", "--jobs", jobs),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    found = json.loads(done.stdout)
    [result] = [r for r in found["results"] if r["resource"]["name"] == "unowned"]
    assert (result["policy"], result["result"], result["resource"]["name"]) == (
        "admission.owner_label",
        "fail",
        "unowned",
    )
    assert {"policy": "admission.owner_label", "enforcement": "deny", "count": 2} in found["violations"]

    reports = f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{namespace}/policyreports"
    assert [r["metadata"]["name"] for r in get(api, reports)["items"]] == []


def test_once_with_reports_writes_them(
    cluster: Cluster, api: client.ApiClient, namespace: str, crds: None, policies: Path
) -> None:
    create(api, f"/api/v1/namespaces/{namespace}/configmaps", configmap("unowned"))
    done = subprocess.run(
        audit_command(cluster, policies, "--once", "--reports", "--jobs", "1"),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert ("admission.owner_label", "fail", "unowned") in results(api, namespace)
