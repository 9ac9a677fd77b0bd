"""Gatekeeper's audit flags on a real API server: `--audit-chunk-size` pages, `--audit-interval` passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import kube
import yaml
from kube import create
from kubernetes import client
from test_gatekeeper_constraints import FIXTURES

from regokite.audit.run import Audit, AuditSettings, run_once
from regokite.kube.client import ApiError, KubeClient
from tests.processes import json_lines, terminate

ROOT = Path(__file__).resolve().parents[2]
CONFIGMAPS = "/api/v1/configmaps"
ROOT_CA = "kube-root-ca.crt"  # the controller-manager's, in every namespace (no owner label)


class CountingClient(KubeClient):
    """The real client, remembering each list call's query (what the API server was asked)."""

    def __init__(self, kubeconfig: str) -> None:
        super().__init__(kubeconfig)
        self.lists: list[tuple[dict[str, Any], int]] = []  # (query, items returned)

    def get(self, path: str, **query: Any) -> Any:
        answer = super().get(path, **query)
        if path == CONFIGMAPS and query.get("limit") != 1:  # limit 1: the access check before the pass
            self.lists.append(({k: v for k, v in query.items() if v is not None}, len(answer.get("items") or [])))
        return answer


def policies_for(tmp_path: Path, namespace: str, annotations: dict[str, str] | None = None) -> Path:
    """The library's K8sRequiredLabels on the ConfigMaps of `namespace`: each needs an `owner` label."""
    root = tmp_path / "policies"
    root.mkdir(exist_ok=True)
    (root / "template.yaml").write_text((FIXTURES / "library/requiredlabels/template.yaml").read_text())
    constraint = yaml.safe_load((FIXTURES / "library/requiredlabels/constraint.yaml").read_text())
    constraint["metadata"]["name"] = "cm-must-have-owner"
    constraint["metadata"]["annotations"] = annotations or {}
    constraint["spec"]["match"] = {"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}], "namespaces": [namespace]}
    (root / "constraint.yaml").write_text(yaml.safe_dump(constraint))
    return root


def make_configmaps(api: client.ApiClient, namespace: str, count: int) -> None:
    for i in range(count):
        labels = {"owner": "team"} if i % 3 else {"tier": f"t{i}"}  # every third one violates
        create(api, f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": f"cm-{i}", "labels": labels}})


def audit_once(cluster: kube.Cluster, policies: Path, chunk: int) -> tuple[CountingClient, dict]:
    counting = CountingClient(str(cluster.kubeconfig))
    settings = AuditSettings([str(policies)], kubeconfig=str(cluster.kubeconfig), write_reports=False, page_size=chunk)
    audit = Audit(settings, counting)
    run_once(audit)
    findings = {key[1:]: results for key, (_, results) in audit.findings.items()}
    return counting, findings


def test_the_chunk_size_pages_the_list_calls_and_the_findings_are_the_same_unpaged(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    make_configmaps(api, namespace, 23)
    policies = policies_for(tmp_path, namespace)
    paged, paged_findings = audit_once(cluster, policies, 7)
    unpaged, unpaged_findings = audit_once(cluster, policies, 0)

    # other tests' namespaces may still be going: count each run's own list, and compare this namespace
    assert [q for q, _ in unpaged.lists] == [{}]  # one call, no limit: every ConfigMap at once
    total = sum(n for _, n in paged.lists)
    assert total >= 23 and sum(n for _, n in unpaged.lists) >= 23
    assert all(q["limit"] == 7 for q, _ in paged.lists)
    assert [n for _, n in paged.lists][:-1] == [7] * (len(paged.lists) - 1)  # full pages, then the rest
    assert len(paged.lists) == -(-total // 7) >= 4
    assert ["continue" in q for q, _ in paged.lists] == [False] + [True] * (len(paged.lists) - 1)

    def ours(findings: dict) -> dict:
        return {k: v for k, v in findings.items() if k[0] == namespace and k[1] != ROOT_CA}

    assert sorted(name for _, name in ours(paged_findings)) == sorted(f"cm-{i}" for i in range(0, 23, 3))
    assert ours(paged_findings) == ours(unpaged_findings)


def _passes(lines: list[dict]) -> list[list[dict]]:
    """The audit lines grouped by pass: from each audit_started to its audit_finished."""
    passes: list[list[dict]] = []
    for entry in lines:
        if entry.get("event_type") == "audit_started":
            passes.append([entry])
        elif passes and entry.get("audit_id") and passes[-1][-1].get("event_type") != "audit_finished":
            passes[-1].append(entry)
    return [p for p in passes if p[-1].get("event_type") == "audit_finished"]


def test_continuous_audit_logs_each_timed_pass_under_one_audit_id_with_gatekeepers_fields(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    make_configmaps(api, namespace, 4)  # cm-0 and cm-3 violate
    policies = policies_for(tmp_path, namespace, {"runbook": "https://example.test/owner"})
    log = tmp_path / "audit.log"
    command = [sys.executable, "-m", "regokite.cli", "audit", "--policies", str(policies), "--no-reports"]
    command += ["--kubeconfig", str(cluster.kubeconfig), "--audit-interval", "1"]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
    try:
        passes = kube.wait_for(
            lambda: _passes(json_lines(log.read_text())), lambda p: len(p) >= 3, what="three audit passes", timeout=180
        )
        assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        terminate(proc, 10)
    ids = [p[0]["audit_id"] for p in passes]
    assert len(set(ids)) == len(ids)  # a new audit_id each pass (its start, to the second)
    for lines in passes[1:]:  # the timed passes: the same lines as the first
        assert {e["audit_id"] for e in lines} == {lines[0]["audit_id"]}
        assert all(e["process"] == "audit" for e in lines)
        violations = [e for e in lines if e["event_type"] == "violation_audited"]
        assert sorted(e["resource_name"] for e in violations if e["resource_name"] != ROOT_CA) == ["cm-0", "cm-3"]
        first = next(e for e in violations if e["resource_name"] == "cm-3")
        assert first["details"] == {"missing_labels": ["owner"]}
        assert first["resource_labels"] == {"tier": "t3"}
        assert first["constraint_annotations"] == {"runbook": "https://example.test/owner"}
        assert first["semantic"] is True and first["constraint_name"] == "cm-must-have-owner"
        [summary] = [e for e in lines if e["event_type"] == "constraint_audited"]
        assert summary["constraint_violations"] == str(len(violations))
        assert lines[-1]["duration"].endswith("s")


class CompactingClient(CountingClient):
    """After the first page of ConfigMaps, etcd is compacted past it: its continue token expires (410)."""

    def __init__(self, kubeconfig: str, etcd_url: str) -> None:
        super().__init__(kubeconfig)
        self.etcd_url = etcd_url
        self.expired: list[int] = []

    def get(self, path: str, **query: Any) -> Any:
        try:
            answer = super().get(path, **query)
        except ApiError as exc:
            self.expired.append(exc.status)
            raise
        if path == CONFIGMAPS and query.get("limit") == 5 and not query.get("continue"):
            self._compact()
        return answer

    def _compact(self) -> None:
        with httpx.Client(base_url=self.etcd_url) as etcd:
            # a write outside the API server's keys moves etcd past the token's version
            put = etcd.post("/v3/kv/put", json={"key": "cmVnb2tpdGUtdGVzdA==", "value": "eA=="}).json()
            revision = int(put["header"]["revision"])
            etcd.post("/v3/kv/compaction", json={"revision": revision, "physical": True}).raise_for_status()


def test_an_expired_continue_token_goes_on_with_the_api_servers_new_one_and_audits_every_object(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    make_configmaps(api, namespace, 12)
    for i in range(3):
        create(api, f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": f"later-{i}"}})
    compacting = CompactingClient(str(cluster.kubeconfig), cluster.etcd_url)
    policies = policies_for(tmp_path, namespace)
    settings = AuditSettings([str(policies)], kubeconfig=str(cluster.kubeconfig), write_reports=False, page_size=5)
    audit = Audit(settings, compacting)
    run_once(audit)
    assert compacting.expired == [410]  # the token expired once, and the pass went on
    names = {key[2] for key in audit.findings if key[1] == namespace and key[2] != ROOT_CA}
    assert names == {f"cm-{i}" for i in range(0, 12, 3)} | {f"later-{i}" for i in range(3)}
