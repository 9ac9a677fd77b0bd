"""Gatekeeper's enforcement points and a template's operations on a real API server.

Gatekeeper's own bats material: the three scoped ConfigMap constraints (deny at
audit and warn at the webhook; warn at audit only; deny at the webhook only),
`bad_cm_scoped`, and the UPDATE-only K8sRequiredLabelsV1 template with its
Namespace constraint. kubectl goes through regokite's webhook as Gatekeeper's
registers its own (every CREATE and UPDATE to /validate); the audit lists
what is there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import kube
import pytest
import yaml
from kube import create, delete, get
from kubernetes import client
from kubernetes.client.rest import ApiException

from regokite.audit.run import Audit, AuditSettings, run_once
from regokite.gatekeeper.crds import EXPANSION_PLURAL, expansion_crd
from regokite.gatekeeper.resources import EXPANSION_GROUP
from regokite.kube.client import KubeClient
from regokite.manifests.webhooks import catch_all_configuration
from regokite.sources.gatekeeper_objects import GatekeeperSync
from tests.admission.server import admission_server
from tests.gatekeeper.upstream import upstream_dir

SELECT = "regokite.dev/enforcement-points-test"
PLAYGROUND = "gatekeeper-test-playground-scoped"  # the namespace the scoped constraints name


def bats_tests() -> Path:
    found = upstream_dir()
    if found is None or not (found / "gatekeeper").is_dir():
        pytest.skip("no copy of Gatekeeper's material (set REGOKITE_UPSTREAM to the upstream/ directory)")
    return found / "gatekeeper/test/bats/tests"


def kubectl(cluster: kube.Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


def labelled(path: Path, label: str) -> str:
    """An object of Gatekeeper's, carrying this test's label (the webhook's objectSelector)."""
    doc = yaml.safe_load(path.read_text())
    doc["metadata"].setdefault("labels", {})[SELECT] = label
    return yaml.safe_dump(doc)


def test_scoped_actions_and_template_operations_at_the_webhook_and_in_audit(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    tests = bats_tests()
    label = kube.unique_name("ep")
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in (
        "templates/k8srequiredlabels_template.yaml",
        "constraints/all_cm_must_have_gatekeeper_scoped.yaml",
        "constraints/all_cm_must_have_gatekeeper_scoped_audit.yaml",
        "constraints/all_cm_must_have_gatekeeper_scoped_webhook.yaml",
        "templates/k8srequiredlabels_template_with_update_operations.yaml",
        "constraints/all_ns_must_have_label_provided.yaml",
    ):
        shutil.copy(tests / name, policies / name.replace("/", "-"))
    (tmp_path / "server").mkdir()
    owned = f"{label}-ns"
    with contextlib.suppress(ApiException):
        create(api, "/api/v1/namespaces", {"metadata": {"name": PLAYGROUND}})
    audited = yaml.safe_load((tests / "bad/bad_cm_scoped.yaml").read_text())
    audited["metadata"]["name"] = f"{label}-existing"
    create(api, f"/api/v1/namespaces/{PLAYGROUND}/configmaps", audited)  # there before the webhook
    try:
        with admission_server(policies, tmp_path / "server") as server:
            config = catch_all_configuration(kube.admission_target(server, label))
            webhooks = kube.register_webhooks(api, kube.VALIDATING, config, {SELECT: label})
            try:
                # bats "required labels warn and dryrun test": a warning and a denial at once
                bad = labelled(tests / "bad/bad_cm_scoped.yaml", label)
                refused = kube.wait_for(
                    lambda: kubectl(cluster, "apply", "-f", "-", stdin=bad),
                    lambda done: done.returncode != 0,
                    what="the API server to call regokite",
                )
                assert 'Warning: [cm-must-have-gk-scoped] you must provide labels: {"gatekeeper"}' in refused.stderr
                assert "denied the request: [cm-must-have-gk-scoped-webhook] you must provide" in refused.stderr
                assert "cm-must-have-gk-scoped-audit" not in refused.stderr

                # bats "constraint template operations test": created, then its relabelling refused
                ns = yaml.safe_load(labelled(tests / "good/good_ns.yaml", label))
                ns["metadata"]["name"] = owned
                created = kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(ns))
                assert created.returncode == 0, created.stderr
                relabelled = kubectl(cluster, "label", "namespace", owned, "test=label", "--overwrite")
                assert relabelled.returncode != 0
                assert "denied the request: [all-must-have-label] you must provide labels" in relabelled.stderr
            finally:
                delete(api, webhooks)

        settings = AuditSettings([str(policies)], kubeconfig=str(cluster.kubeconfig), write_reports=False)
        audit = Audit(settings, KubeClient(cluster.kubeconfig))
        run_once(audit)
        found = {
            (key[1], key[2]): {(r.policy, r.result, r.actions) for r in results}
            for key, (_, results) in audit.findings.items()
        }
        # the scoped constraints at audit: deny, warn, and the webhook-only one not audited
        assert found[(PLAYGROUND, f"{label}-existing")] == {
            ("cm-must-have-gk-scoped", "fail", ("deny",)),
            ("cm-must-have-gk-scoped-audit", "warn", ("warn",)),
        }
        # audit judges the Namespace whatever the template's operations (the webhook's only)
        assert found[("", owned)] == {("all-must-have-label", "fail", ("deny",))}
    finally:
        with contextlib.suppress(ApiException):
            delete(api, f"/api/v1/namespaces/{PLAYGROUND}/configmaps/{label}-existing")
        with contextlib.suppress(ApiException):
            delete(api, f"/api/v1/namespaces/{owned}")


def test_namespace_object_from_the_replicated_namespaces_at_the_webhook_and_in_audit(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    """bats "namespace object access - Rego engine test": the ConfigMap in the labelled Namespace is
    created, the one in the unlabelled Namespace refused; the audit reads the same Namespaces."""
    tests = bats_tests()
    label = kube.unique_name("nso")
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in ("templates/k8snamespacelabelcheck_template_rego.yaml", "constraints/ns_must_have_env_label_rego.yaml"):
        shutil.copy(tests / name, policies / Path(name).name)
    for name in ("good/ns_with_env_label.yaml", "bad/ns_without_env_label.yaml"):
        with contextlib.suppress(ApiException):
            create(api, "/api/v1/namespaces", yaml.safe_load((tests / name).read_text()))
    existing = yaml.safe_load((tests / "bad/cm_in_unlabeled_ns.yaml").read_text())
    existing["metadata"]["name"] = f"{label}-existing"
    create(api, "/api/v1/namespaces/ns-without-env-label/configmaps", existing)  # there before the webhook
    (tmp_path / "server").mkdir()
    try:
        # no --replicate flag: the constraint's template reads namespaceObject, so Namespaces are replicated
        with admission_server(policies, tmp_path / "server", "--kubeconfig", str(cluster.kubeconfig)) as server:
            config = catch_all_configuration(kube.admission_target(server, label))
            webhooks = kube.register_webhooks(api, kube.VALIDATING, config, {SELECT: label})
            try:
                refused = kube.wait_for(
                    lambda: kubectl(
                        cluster, "apply", "-f", "-", stdin=labelled(tests / "bad/cm_in_unlabeled_ns.yaml", label)
                    ),
                    lambda done: done.returncode != 0,
                    what="the API server to call regokite",
                )
                assert (
                    "[ns-must-have-env-label-rego] Namespace 'ns-without-env-label' does not have required label:"
                    " environment" in refused.stderr
                )
                good = kubectl(cluster, "apply", "-f", "-", stdin=labelled(tests / "good/cm_in_labeled_ns.yaml", label))
                assert good.returncode == 0, good.stderr
            finally:
                delete(api, webhooks)

        settings = AuditSettings([str(policies)], kubeconfig=str(cluster.kubeconfig), write_reports=False)
        audit = Audit(settings, KubeClient(cluster.kubeconfig))
        run_once(audit)
        found = {(key[1], key[2]): [r.message for r in results] for key, (_, results) in audit.findings.items()}
        assert found[("ns-without-env-label", f"{label}-existing")] == [
            "Namespace 'ns-without-env-label' does not have required label: environment"
        ]
        assert ("ns-with-env-label", "test-cm-in-labeled-ns") not in found
    finally:
        for namespace, name in (
            ("ns-without-env-label", f"{label}-existing"),
            ("ns-with-env-label", "test-cm-in-labeled-ns"),
        ):
            with contextlib.suppress(ApiException):
                delete(api, f"/api/v1/namespaces/{namespace}/configmaps/{name}")


def test_a_cronjob_is_refused_for_the_pod_its_job_expands_to(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    """bats "gatekeeper expansion test": recursive expansion cronjob -> job -> pod at the webhook. The
    test API server (Kubernetes 1.20) serves CronJob as batch/v1beta1: the CronJob and its template's
    applyTo say so, all else is Gatekeeper's."""
    expansion = bats_tests().parents[1] / "expansion"
    label = kube.unique_name("exp")
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in ("k8srequiredlabels_ct.yaml", "loadbalancers_must_have_env_source_gen.yaml"):
        shutil.copy(expansion / name, policies / name)
    templates = (expansion / "expand_cronjob_job_pod.yaml").read_text()
    (policies / "templates.yaml").write_text(
        templates.replace(
            'kinds: [ "CronJob" ]\n    versions: [ "v1" ]', 'kinds: [ "CronJob" ]\n    versions: [ "v1beta1" ]'
        )
    )
    cronjob = labelled(expansion / "cronjob.yaml", label).replace(
        "apiVersion: batch/v1\n", "apiVersion: batch/v1beta1\n"
    )
    with contextlib.suppress(ApiException):
        create(api, "/api/v1/namespaces", {"metadata": {"name": "loadbalancers"}})
    (tmp_path / "server").mkdir()
    with admission_server(policies, tmp_path / "server") as server:
        config = catch_all_configuration(kube.admission_target(server, label))
        webhooks = kube.register_webhooks(api, kube.VALIDATING, config, {SELECT: label})
        try:
            refused = kube.wait_for(
                lambda: kubectl(cluster, "apply", "-f", "-", stdin=cronjob),
                lambda done: done.returncode != 0,
                what="the API server to call regokite",
            )
            assert (
                "denied the request: [loadbalancers-must-have-env-gen] [Implied by expand-jobs] you must provide"
                ' labels: {"env"}' in refused.stderr
            )
        finally:
            delete(api, webhooks)


def test_expansion_templates_of_a_cycle_say_so_in_their_status(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path
) -> None:
    """bats "gatekeeper expansion test": each template's status names its uid; once expand-pods closes the
    cycle, expand-cronjobs, expand-jobs and expand-pods each say "template forms expansion cycle"."""
    expansion = bats_tests().parents[1] / "expansion"
    out = tmp_path / "policies"
    out.mkdir()
    sync = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    sync.install()
    kube.install_crd(api, expansion_crd())
    path = f"/apis/{EXPANSION_GROUP}/v1beta1/{EXPANSION_PLURAL}"
    try:
        applied = kubectl(cluster, "apply", "-f", str(expansion / "expand_cronjob_job_pod.yaml"))
        assert applied.returncode == 0, applied.stderr
        sync.sync_once()
        jobs = get(api, f"{path}/expand-jobs")
        [entry] = jobs["status"]["byPod"]
        assert entry["templateUID"] == jobs["metadata"]["uid"] and "errors" not in entry
        applied = kubectl(cluster, "apply", "-f", str(expansion / "expand_pod_cronjob.yaml"))
        assert applied.returncode == 0, applied.stderr
        sync.sync_once()
        for name in ("expand-cronjobs", "expand-jobs", "expand-pods"):
            [entry] = get(api, f"{path}/{name}")["status"]["byPod"]
            assert entry["errors"] == [{"message": "template forms expansion cycle"}], name
    finally:
        for name in ("expand_cronjob_job_pod.yaml", "expand_pod_cronjob.yaml"):
            kubectl(cluster, "delete", "--ignore-not-found", "-f", str(expansion / name))
