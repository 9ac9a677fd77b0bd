"""Gatekeeper's operational surface on a real API server: namespace exemption by flag and label."""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path

import kube
from kube import create, delete
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_gatekeeper_constraints import FIXTURES, VALIDATING

from regokite.gatekeeper.exempt import IGNORE_LABEL
from regokite.manifests.webhooks import WebhookTarget, catch_all_configuration
from tests.admission.server import admission_server

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
        ca = base64.b64encode(server.ca.read_bytes()).decode()
        config = catch_all_configuration(WebhookTarget(label, "regokite-system", url=server.url, ca_bundle=ca))
        for hook in config["webhooks"]:
            hook["objectSelector"] = {"matchLabels": {SELECT: label}}  # only this test's namespaces
        create(api, VALIDATING, config)
        try:
            refused = kube.wait_for(
                lambda: namespace(plain), lambda got: got != "admitted", what="the API server to call regokite"
            )
            assert refused[0] == 403 and "[ns-must-have-owner] you must provide labels" in refused[1]
            denied = namespace(other, IGNORE_LABEL)
            assert denied[0] == 403 and f"Only exempt namespace can have the {IGNORE_LABEL} label" in denied[1]
            assert namespace(exempt, IGNORE_LABEL) == "admitted"  # exempt: labelled, and then no constraint applies
        finally:
            delete(api, f"{VALIDATING}/{config['metadata']['name']}")
            for name in (exempt, other, plain):
                with contextlib.suppress(ApiException):
                    delete(api, f"/api/v1/namespaces/{name}")


def test_a_config_sync_exclusion_keeps_a_namespaces_objects_out_of_replication(
    cluster: kube.Cluster, api: client.ApiClient
) -> None:
    from regokite.clusterdata.store import ReplicaStore, ResourceRef
    from regokite.kube.client import KubeClient
    from regokite.kube.replicate import Replicator

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
