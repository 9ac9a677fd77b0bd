"""Gatekeeper's operational surface on a real API server: namespace exemption by flag and label."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import kube
from kube import create, delete
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_gatekeeper_constraints import FIXTURES

from regokite.gatekeeper.exempt import IGNORE_LABEL
from regokite.manifests.webhooks import catch_all_configuration
from tests.admission.server import admission_server
from tests.processes import json_lines

SELECT = "regokite.dev/operations-test"


def test_an_exempt_namespace_flag_lets_that_namespace_carry_the_ignore_label_and_skip_the_constraints(
    api: client.ApiClient, tmp_path: Path
) -> None:
    label = kube.unique_name("ops")
    exempt, other, plain = (f"{label}-exempt", f"{label}-other", f"{label}-plain")
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "template.yaml").write_text((FIXTURES / "library/requiredlabels/template.yaml").read_text())
    (policies / "constraint.yaml").write_text((FIXTURES / "library/requiredlabels/constraint.yaml").read_text())
    (tmp_path / "server").mkdir()

    def namespace(name: str, *labels: str) -> object:
        body = {"metadata": {"name": name, "labels": {SELECT: label, **dict.fromkeys(labels, "test")}}}
        try:
            create(api, "/api/v1/namespaces", body)
        except ApiException as exc:
            return exc.status, json.loads(exc.body)["message"]
        return "admitted"

    with admission_server(policies, tmp_path / "server", "--exempt-namespace", exempt) as server:
        config = catch_all_configuration(kube.admission_target(server, label))
        webhooks = kube.register_webhooks(api, kube.VALIDATING, config, {SELECT: label})  # this test's namespaces
        try:
            refused = kube.wait_for(
                lambda: namespace(plain), lambda got: got != "admitted", what="the API server to call regokite"
            )
            assert refused[0] == 403 and "[ns-must-have-owner] you must provide labels" in refused[1]
            denied = namespace(other, IGNORE_LABEL)
            assert denied[0] == 403 and f"Only exempt namespace can have the {IGNORE_LABEL} label" in denied[1]
            assert namespace(exempt, IGNORE_LABEL) == "admitted"  # exempt: labelled, and then no constraint applies
        finally:
            delete(api, webhooks)
            for name in (exempt, other, plain):
                with contextlib.suppress(ApiException):
                    delete(api, f"/api/v1/namespaces/{name}")


def test_a_config_sync_exclusion_keeps_a_namespaces_objects_out_of_replication(
    cluster: kube.Cluster, api: client.ApiClient
) -> None:
    from regokite.clusterdata.store import ReplicaStore, ResourceRef
    from regokite.kube.client import KubeClient
    from regokite.replication.replicate import Replicator

    label = kube.unique_name("sync")
    kept, left_out = f"{label}-kept", f"{label}-out"
    for name in (kept, left_out):
        create(api, "/api/v1/namespaces", {"metadata": {"name": name}})
        create(api, f"/api/v1/namespaces/{name}/configmaps", {"metadata": {"name": "cm"}, "data": {"a": "b"}})
    replica = Replicator(KubeClient(cluster.kubeconfig), ReplicaStore())
    try:
        replica.exclude([f"{label}-o*"])  # a Config's `processes: ["sync"]` entry, prefix glob
        replica.ensure([ResourceRef("", "v1", "configmaps", namespaced=True)])
        assert replica.wait_ready(30)
        held = replica.store.document["configmaps"]
        assert "cm" in held[kept] and left_out not in held
        replica.exclude([])  # the entry removed: the namespace's objects come back from the informer's cache
        assert "cm" in replica.store.document["configmaps"][left_out]
    finally:
        replica.stop()
        for name in (kept, left_out):
            with contextlib.suppress(ApiException):
                delete(api, f"/api/v1/namespaces/{name}")


def test_syncsets_applied_with_kubectl_reach_the_admission_servers_replication(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    from test_gatekeeper_constraints import kubectl

    from regokite.admission.policies import load_policy_set
    from regokite.gatekeeper.crds import syncset_crd
    from regokite.kube.client import KubeClient
    from regokite.sources.gatekeeper_objects import GatekeeperSync

    sync = GatekeeperSync(KubeClient(cluster.kubeconfig), tmp_path)
    sync.install()
    kube.install_crd(api, syncset_crd())
    name = kube.unique_name("syncset")
    syncset = (
        f"apiVersion: syncset.gatekeeper.sh/v1alpha1\nkind: SyncSet\nmetadata: {{name: {name}}}\n"
        "spec:\n  gvks:\n    - {group: '', version: v1, kind: Namespace}\n"
    )
    applied = kubectl(cluster, "apply", "-f", "-", stdin=syncset)
    assert applied.returncode == 0, applied.stderr
    try:
        sync.sync_once()
        policies = load_policy_set([str(tmp_path)])
        assert [str(r) for r in policies.replicate] == ["v1/namespaces"]
        policies.close()
    finally:
        kubectl(cluster, "delete", "syncset", name, "--ignore-not-found")


def test_a_denial_and_an_audit_violation_each_log_and_record_gatekeepers_fields(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    import yaml

    label = kube.unique_name("ev")
    audit = [sys.executable, "-m", "regokite.cli", "audit"]
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "template.yaml").write_text((FIXTURES / "library/requiredlabels/template.yaml").read_text())
    constraint = yaml.safe_load((FIXTURES / "library/requiredlabels/constraint.yaml").read_text())
    constraint["spec"]["match"]["labelSelector"] = {"matchLabels": {SELECT: label}}
    (policies / "constraint.yaml").write_text(yaml.safe_dump(constraint))
    (tmp_path / "server").mkdir()
    refused_name, audited_name = f"{label}-refused", f"{label}-audited"
    flags = ["--kubeconfig", str(cluster.kubeconfig), "--events-namespace", namespace]
    expected = {
        "constraint_group": "constraints.gatekeeper.sh",
        "constraint_api_version": "v1beta1",
        "constraint_kind": "K8sRequiredLabels",
        "constraint_name": "ns-must-have-owner",
        "constraint_action": "deny",
        "resource_group": "",
        "resource_api_version": "v1",
        "resource_kind": "Namespace",
    }
    message = 'you must provide labels: {"owner"}'
    try:
        with admission_server(
            policies, tmp_path / "server", "--log-denies", "--emit-admission-events", *flags
        ) as server:
            config = catch_all_configuration(kube.admission_target(server, label))
            config["webhooks"] = config["webhooks"][:1]
            webhooks = kube.register_webhooks(api, kube.VALIDATING, config, {SELECT: label})
            try:
                body = {"metadata": {"name": refused_name, "labels": {SELECT: label}}}
                kube.wait_for(
                    lambda: kube.exists(api, f"/api/v1/namespaces/{refused_name}") or _refused(api, body),
                    lambda refused: refused is True,
                    what="the API server to call regokite",
                )
                denied = kube.wait_for(
                    lambda: [e for e in json_lines(server.logs()) if e.get("event_type") == "violation"],
                    what="the --log-denies line",
                )[0]
            finally:
                delete(api, webhooks)
        assert denied["msg"] == f"denied admission: {message}" and denied["process"] == "admission"
        assert {k: denied[k] for k in expected} == expected and denied["resource_name"] == refused_name
        # the AdmissionRequest's namespace, as Gatekeeper logs it: a Namespace's own name
        assert denied["resource_namespace"] == refused_name
        assert denied["request_username"]
        assert denied["details"] == {"missing_labels": ["owner"]} and denied["semantic"] is True
        events = f"/api/v1/namespaces/{namespace}/events"
        admission_event = kube.wait_for(
            lambda: [e for e in kube.get(api, events)["items"] if e["reason"] == "FailedAdmission"],
            what="the FailedAdmission Event",
        )[0]
        assert admission_event["type"] == "Warning"
        assert admission_event["message"] == (
            f'Admission webhook "validation.gatekeeper.sh" denied request, Resource Namespace: {refused_name}, '
            f"Constraint: ns-must-have-owner, Message: {message}"
        )
        annotations = admission_event["metadata"]["annotations"]
        assert annotations["event_type"] == "violation" and annotations["process"] == "admission"
        assert annotations["constraint_name"] == "ns-must-have-owner" and annotations["resource_name"] == refused_name

        # the audit: a namespace made while no webhook judged it
        create(api, "/api/v1/namespaces", {"metadata": {"name": audited_name, "labels": {SELECT: label}}})
        done = subprocess.run(
            [*audit, "--policies", str(policies), "--once", "--no-reports", "--emit-audit-events", *flags],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        lines = json_lines(done.stderr)
        [audited] = [e for e in lines if e.get("event_type") == "violation_audited"]
        assert audited["msg"] == message and audited["process"] == "audit" and audited["audit_id"]
        assert {k: audited[k] for k in expected} == expected and audited["resource_name"] == audited_name
        assert audited["resource_namespace"] == ""  # the object's namespace, as Gatekeeper's audit logs it
        assert audited["details"] == {"missing_labels": ["owner"]} and audited["semantic"] is True
        assert audited["resource_labels"][SELECT] == label  # the object's labels (with any the server added)
        assert audited["constraint_annotations"] is None
        [summary] = [e for e in lines if e.get("event_type") == "constraint_audited"]
        assert summary["constraint_violations"] == "1" and summary["audit_id"] == audited["audit_id"]
        assert [e["event_type"] for e in lines if e.get("event_type", "").startswith("audit_")] == [
            "audit_started",
            "audit_finished",
        ]
        audit_event = kube.wait_for(
            lambda: [e for e in kube.get(api, events)["items"] if e["reason"] == "AuditViolation"],
            what="the AuditViolation Event",
        )[0]
        assert audit_event["message"] == f"Resource Namespace: , Constraint: ns-must-have-owner, Message: {message}"
        assert audit_event["metadata"]["annotations"]["auditTimestamp"] == audited["audit_id"]
        assert audit_event["metadata"]["annotations"]["event_type"] == "violation_audited"
    finally:
        for name in (refused_name, audited_name):
            with contextlib.suppress(ApiException):
                delete(api, f"/api/v1/namespaces/{name}")


def _refused(api: client.ApiClient, body: dict) -> bool:
    try:
        create(api, "/api/v1/namespaces", body)
    except ApiException as exc:
        return exc.status == 403
    return False
