"""Gatekeeper's objects through `kubectl apply` on a real API server, enforced by regokite.

A ConstraintTemplate gets its Constraint CRD (parameters validated by the
template's schema) and a status; its constraints reach `regokite admission`
as files and the API server refuses, warns or admits as the constraint's
enforcementAction says; a template that does not compile says so in its
status; deleting a template removes its CRD and its constraints stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import create, delete, get, merge_patch
from kubernetes import client
from kubernetes.client.rest import ApiException

from regokite.admission.policies import load_policy_set
from regokite.gatekeeper.crds import constraint_crd_name, template_crd
from regokite.kube.client import KubeClient
from regokite.sources.gatekeeper_objects import TEMPLATES, GatekeeperSync, served_documents
from tests.admission.reviews import review
from tests.admission.server import admission_server

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "gatekeeper" / "fixtures"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SELECT = "regokite.dev/gatekeeper-test"


def kubectl(cluster: kube.Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


def constraint(name: str, label: str, action: str = "deny", labels: object = None) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": "K8sRequiredLabels",
            "metadata": {"name": name},
            "spec": {
                "enforcementAction": action,
                "match": {
                    "kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}],
                    "labelSelector": {"matchLabels": {SELECT: label}},
                },
                "parameters": {"labels": labels if labels is not None else [{"key": "owner"}]},
            },
        }
    )


def namespace(name: str, label: str) -> str:
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {SELECT: label}}}
    )


@pytest.fixture
def sync(cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path) -> Iterator[GatekeeperSync]:
    out = tmp_path / "policies"
    out.mkdir()
    syncer = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    syncer.install()  # the ConstraintTemplate CRD; install_crd below only waits for it to be served
    kube.install_crd(api, template_crd())
    yield syncer
    kubectl(cluster, "delete", "constrainttemplates", "k8srequiredlabels", "k8sbroken", "--ignore-not-found")
    syncer.sync_once()


def test_templates_and_constraints_applied_with_kubectl_are_enforced(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync, tmp_path: Path
) -> None:
    label = kube.unique_name("gk")
    applied = kubectl(cluster, "apply", "-f", str(FIXTURES / "library/requiredlabels/template.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert sync.sync_once()["K8sRequiredLabels"] is None
    kube.wait_for_condition(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}", "Established")
    assert get(api, f"{TEMPLATES}/k8srequiredlabels")["status"]["created"] is True

    # The template's schema validates parameters, as with Gatekeeper.
    refused = kubectl(cluster, "apply", "-f", "-", stdin=constraint(f"{label}-bad", label, labels="owner"))
    assert refused.returncode != 0 and "spec.parameters.labels" in refused.stderr
    name = f"{label}-owner"
    kube.wait_for(
        lambda: kubectl(cluster, "apply", "-f", "-", stdin=constraint(name, label)).returncode,
        lambda rc: rc == 0,
        what="the constraint CRD to be served",
    )
    sync.sync_once()
    policy_set = load_policy_set([str(sync.out)])
    assert [p.name for p in policy_set.policies] == [name]
    policy_set.close()

    (tmp_path / "server").mkdir()
    with admission_server(sync.out, tmp_path / "server") as server:
        webhooks = kube.register_policy_webhooks(api, sync.out, server, {SELECT: label})  # this test's namespaces
        try:
            # deny: the API server refuses with Gatekeeper's message
            denied = kube.wait_for(
                lambda: kubectl(cluster, "apply", "-f", "-", stdin=namespace(kube.unique_name("ns"), label)),
                lambda done: done.returncode != 0,
                what="the API server to call regokite",
            )
            assert f'[{name}] you must provide labels: {{"owner"}}' in denied.stderr

            # dryrun admits
            assert kubectl(cluster, "apply", "-f", "-", stdin=constraint(name, label, "dryrun")).returncode == 0
            sync.sync_once()
            kube.wait_for(
                lambda: kubectl(cluster, "apply", "-f", "-", stdin=namespace(kube.unique_name("ns"), label)),
                lambda done: done.returncode == 0,
                what="the dryrun constraint to admit",
            )

            # warn: admitted, and kubectl shows the warning
            assert kubectl(cluster, "apply", "-f", "-", stdin=constraint(name, label, "warn")).returncode == 0
            sync.sync_once()
            warned = kube.wait_for(
                lambda: kubectl(cluster, "apply", "-f", "-", stdin=namespace(kube.unique_name("ns"), label)),
                lambda done: done.returncode == 0 and "Warning" in done.stderr,
                what="the warn constraint to warn",
            )
            assert f'[{name}] you must provide labels: {{"owner"}}' in warned.stderr

            # a template that does not compile: its status says why; the other keeps serving
            broken = next(
                d
                for d in yaml.safe_load_all((FIXTURES / "broken/templates.yaml").read_text())
                if d["metadata"]["name"] == "k8sbroken"
            )
            assert kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(broken)).returncode == 0
            outcome = sync.sync_once()
            assert "unknown function no_such_function" in outcome["k8sbroken"] and outcome["K8sRequiredLabels"] is None
            status = get(api, f"{TEMPLATES}/k8sbroken")["status"]
            assert status["created"] is False
            assert "constrainttemplate/k8sbroken:4:" in status["byPod"][0]["errors"][0]["message"]
            assert not kube.exists(api, f"{CRDS}/{constraint_crd_name('K8sBroken')}")

            # deleting the template removes its CRD, and its constraints stop
            assert kubectl(cluster, "delete", "constrainttemplate", "k8srequiredlabels").returncode == 0
            sync.sync_once()
            kube.wait_for_deletion(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}")
            assert "K8sRequiredLabels" not in str(served_documents(sync.out))
            body = review(yaml.safe_load(namespace("unlabelled", label)))
            with server.client() as http:
                kube.wait_for(
                    lambda: http.post("/validate", json=body).json()["response"],
                    lambda answer: answer["allowed"] and not answer.get("warnings"),
                    what="the server to stop enforcing the constraint once its template is gone",
                )
        finally:
            delete(api, webhooks)
            for ns in client.CoreV1Api(api).list_namespace(label_selector=f"{SELECT}={label}").items:
                with contextlib.suppress(ApiException):
                    delete(api, f"/api/v1/namespaces/{ns.metadata.name}")


def test_unique_ingress_host_reads_what_a_gatekeeper_config_syncs(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in ("template.yaml", "constraint.yaml"):
        (policies / name).write_text((FIXTURES / "library/uniqueingresshost" / name).read_text())
    (policies / "config.yaml").write_text((FIXTURES / "sync/config.yaml").read_text())
    host = f"{kube.unique_name('h')}.example.com"

    def ingress(name: str) -> dict:
        meta = {"name": name, "namespace": namespace, "labels": {SELECT: namespace}}
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": meta,
            "spec": {"rules": [{"host": host}]},
        }

    ingresses = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses"
    create(api, ingresses, ingress("first"))
    (tmp_path / "server").mkdir()
    with admission_server(policies, tmp_path / "server", "--kubeconfig", str(cluster.kubeconfig)) as server:
        webhooks = kube.register_policy_webhooks(api, policies, server, {SELECT: namespace})
        try:

            def second() -> object:
                try:
                    create(api, ingresses, ingress(kube.unique_name("second")))
                except ApiException as exc:
                    return exc.status, json.loads(exc.body)["message"]
                return "admitted"

            refused = f"[unique-ingress-host] ingress host conflicts with an existing ingress <{host}>"
            kube.wait_for(
                second, lambda got: got[0] == 403 and refused in got[1], what="a duplicate host to be refused"
            )
        finally:
            delete(api, webhooks)


def audited_required_labels(cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync, text: str) -> None:
    """The audit's report CRDs, the library's K8sRequiredLabels template synced, and the constraint `text`
    applied once its CRD is served."""
    from regokite.audit.crds import report_crds

    for crd in report_crds():
        kube.install_crd(api, crd)
    assert kubectl(cluster, "apply", "-f", str(FIXTURES / "library/requiredlabels/template.yaml")).returncode == 0
    sync.sync_once()
    kube.wait_for_condition(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}", "Established")
    kube.wait_for(
        lambda: kubectl(cluster, "apply", "-f", "-", stdin=text).returncode,
        lambda rc: rc == 0,
        what="the constraint CRD to be served",
    )


def test_audit_writes_each_constraints_status_as_gatekeeper_does(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync
) -> None:
    from regokite.audit.run import Audit, AuditSettings, run_once

    label = kube.unique_name("gk")
    name = f"{label}-audit"
    audited_required_labels(cluster, api, sync, constraint(name, label, "dryrun"))
    sync.sync_once()
    bad, good, other = kube.unique_name("ns"), kube.unique_name("ns"), kube.unique_name("ns")
    labelled = yaml.safe_load(namespace(good, label))
    labelled["metadata"]["labels"]["owner"] = "me"
    create(api, "/api/v1/namespaces", yaml.safe_load(namespace(bad, label)))
    create(api, "/api/v1/namespaces", labelled)
    constraints = "/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels"

    def audit() -> dict:
        run_once(Audit(AuditSettings(policies=[str(sync.out)], kubeconfig=str(cluster.kubeconfig)), KubeClient(
            cluster.kubeconfig)))  # fmt: skip
        return get(api, f"{constraints}/{name}")["status"]

    try:
        status = audit()
        assert status["totalViolations"] == 1
        assert status["violations"] == [
            {
                "enforcementAction": "dryrun",
                "group": "",
                "version": "v1",
                "kind": "Namespace",
                "name": bad,
                "message": 'you must provide labels: {"owner"}',
            }
        ]
        assert status["auditTimestamp"].endswith("Z")
        from regokite.audit import reports

        cluster_report = get(api, f"/apis/{reports.API_VERSION}/clusterpolicyreports/{reports.REPORT_NAME}")
        assert any(
            r["policy"] == name and r["resources"][0]["name"] == bad for r in cluster_report["results"]
        )  # and in the PolicyReport
        # fixed: the next audit finds none
        merge_patch(api, f"/api/v1/namespaces/{bad}", {"metadata": {"labels": {"owner": "you"}}})
        assert audit()["totalViolations"] == 0
        assert audit()["violations"] == []

        # Gatekeeper's Config, applied with kubectl, excludes a namespace from every constraint
        create(api, "/api/v1/namespaces", yaml.safe_load(namespace(other, label)))
        assert audit()["totalViolations"] == 1
        with contextlib.suppress(ApiException):
            create(api, "/api/v1/namespaces", {"metadata": {"name": "gatekeeper-system"}})
        config = {"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config",
                  "metadata": {"name": "config", "namespace": "gatekeeper-system"},
                  "spec": {"match": [{"excludedNamespaces": [other], "processes": ["*"]}]}}  # fmt: skip
        applied = kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(config))
        assert applied.returncode == 0, applied.stderr
        sync.sync_once()
        assert audit()["totalViolations"] == 0
        kubectl(cluster, "delete", "-f", "-", stdin=yaml.safe_dump(config))
        sync.sync_once()
    finally:
        for ns in (bad, good, other):
            with contextlib.suppress(ApiException):
                delete(api, f"/api/v1/namespaces/{ns}")


def test_every_constraint_gets_a_by_pod_entry_from_the_webhook_side_and_one_from_the_audit(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync
) -> None:
    from regokite.audit.run import Audit, AuditSettings, run_once

    label = kube.unique_name("gk")
    name = f"{label}-bypod"
    path = f"/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels/{name}"
    audited_required_labels(cluster, api, sync, constraint(name, label))

    def audit() -> None:
        settings = AuditSettings(policies=[str(sync.out)], kubeconfig=str(cluster.kubeconfig))
        run_once(Audit(settings, KubeClient(cluster.kubeconfig)))

    def entries() -> dict[str, dict]:
        return {p["id"]: p for p in get(api, path)["status"]["byPod"]}

    try:
        sync.sync_once()  # the webhook side: an entry for a constraint with no error too
        generation = get(api, path)["metadata"]["generation"]
        assert entries() == {
            "regokite": {
                "id": "regokite",
                "enforced": True,
                "observedGeneration": generation,
                "operations": ["webhook"],
            }
        }
        audit()  # the audit adds its own entry beside it, with its violation count
        status = get(api, path)["status"]
        assert [p["id"] for p in status["byPod"]] == ["regokite", "regokite-audit"]  # sorted by id, as Gatekeeper
        assert status["byPod"][1] == {
            "id": "regokite-audit",
            "enforced": True,
            "observedGeneration": generation,
            "operations": ["audit"],
        }
        assert "totalViolations" in status

        # an edit: each side reports the new generation, and neither's write drops the other's entry
        assert kubectl(cluster, "apply", "-f", "-", stdin=constraint(name, label, "warn")).returncode == 0
        edited = get(api, path)["metadata"]["generation"]
        assert edited > generation
        sync.sync_once()
        assert {i: p["observedGeneration"] for i, p in entries().items()} == {
            "regokite": edited,
            "regokite-audit": generation,
        }
        audit()
        assert {i: (p["observedGeneration"], p["enforced"]) for i, p in entries().items()} == {
            "regokite": (edited, True),
            "regokite-audit": (edited, True),
        }
    finally:
        kubectl(cluster, "delete", "k8srequiredlabels", name, "--ignore-not-found")


def test_the_syncer_follows_templates_and_constraints_through_watches(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync
) -> None:
    import threading

    stop = threading.Event()
    runner = threading.Thread(target=sync.run, args=(300.0, stop), daemon=True)  # no periodic pass in this test
    runner.start()
    try:
        assert kubectl(cluster, "apply", "-f", str(FIXTURES / "library/requiredlabels/template.yaml")).returncode == 0
        kube.wait_for_condition(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}", "Established", timeout=30)
        name = kube.unique_name("watched")
        kube.wait_for(
            lambda: kubectl(cluster, "apply", "-f", "-", stdin=constraint(name, name)).returncode,
            lambda rc: rc == 0,
            what="the constraint CRD to be served",
        )
        kube.wait_for(lambda: name in str(served_documents(sync.out)), what="the constraint written", timeout=30)
        assert kubectl(cluster, "delete", "constrainttemplate", "k8srequiredlabels").returncode == 0
        kube.wait_for_deletion(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}", timeout=30)
        gone = lambda: "K8sRequiredLabels" not in str(served_documents(sync.out))  # noqa: E731
        kube.wait_for(gone, what="the template's files gone")
    finally:
        stop.set()
        runner.join(10)


def test_a_constraint_with_no_kinds_is_audited_on_every_kind_and_reports_in_its_status(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync
) -> None:
    from regokite.audit.run import Audit, AuditSettings, run_once

    label = kube.unique_name("gk")
    assert kubectl(cluster, "apply", "-f", str(FIXTURES / "library/requiredlabels/template.yaml")).returncode == 0
    sync.sync_once()
    kube.wait_for_condition(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}", "Established")
    name = f"{label}-everything"
    everything = yaml.safe_load(constraint(name, label, "dryrun"))
    del everything["spec"]["match"]["kinds"]  # every kind, as Gatekeeper's audit takes it
    kube.wait_for(
        lambda: kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(everything)).returncode,
        lambda rc: rc == 0,
        what="the constraint CRD to be served",
    )
    sync.sync_once()
    ns = kube.unique_name("ns")
    create(api, "/api/v1/namespaces", yaml.safe_load(namespace(ns, label)))
    create(api, f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "cm", "labels": {SELECT: label}}})
    try:
        settings = AuditSettings(policies=[str(sync.out)], kubeconfig=str(cluster.kubeconfig), write_reports=True)
        from regokite.audit.crds import report_crds

        for crd in report_crds():
            kube.install_crd(api, crd)
        from prometheus_client import REGISTRY

        started = time.time()
        run_once(Audit(settings, KubeClient(cluster.kubeconfig)))
        status = get(api, f"/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels/{name}")["status"]
        found = {(v["kind"], v["name"]) for v in status["violations"]}
        assert found == {("Namespace", ns), ("ConfigMap", "cm")} and status["totalViolations"] == 2
        # Gatekeeper's audit metrics, by its names
        assert REGISTRY.get_sample_value("gatekeeper_violations", {"enforcement_action": "dryrun"}) >= 2
        assert REGISTRY.get_sample_value("gatekeeper_audit_last_run_time") >= int(started)
        end = REGISTRY.get_sample_value("gatekeeper_audit_last_run_end_time")
        assert end >= REGISTRY.get_sample_value("gatekeeper_audit_last_run_time")
        assert REGISTRY.get_sample_value("gatekeeper_audit_duration_seconds_count") >= 1
    finally:
        with contextlib.suppress(ApiException):
            delete(api, f"/api/v1/namespaces/{ns}")
