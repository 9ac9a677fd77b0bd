"""`--mutation-annotations` on a real API server: Gatekeeper's bats "gatekeeper mutation test".

The two mutators are applied with kubectl (the API server sets their
generation, 1), reach `regokite admission --mutation-annotations` through
`regokite gatekeeper`, and the ConfigMap and Service created through the
mutating webhook carry Gatekeeper's annotations.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import kube
import pytest
import yaml
from kube import delete, get
from kubernetes import client
from kubernetes.client.rest import ApiException

from regokite.gatekeeper.crds import mutator_crds
from regokite.kube.client import KubeClient
from regokite.manifests.webhooks import catch_all_configuration
from regokite.sources.gatekeeper_objects import GatekeeperSync
from tests.admission.server import admission_server
from tests.gatekeeper.upstream import upstream_dir

SELECT = "regokite.dev/mutation-annotations-test"


def kubectl(cluster: kube.Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


def test_mutated_objects_record_their_mutators_as_gatekeepers_bats_case(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    found = upstream_dir()
    if found is None or not (found / "gatekeeper").is_dir():
        pytest.skip("no copy of Gatekeeper's material (set REGOKITE_UPSTREAM to the upstream/ directory)")
    mutations = found / "gatekeeper/test/bats/tests/mutations"
    label = kube.unique_name("ma")
    out = tmp_path / "policies"
    out.mkdir()
    sync = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    sync.install()
    for crd in mutator_crds():
        kube.install_crd(api, crd)
    for name in ("k8sownerlabel_assignmetadata.yaml", "k8sexternalip_assign.yaml"):
        applied = kubectl(cluster, "apply", "-f", str(mutations / name))
        assert applied.returncode == 0, applied.stderr
    sync.sync_once()
    (tmp_path / "server").mkdir()
    try:
        with admission_server(out, tmp_path / "server", "--mutation-annotations") as server:
            config = catch_all_configuration(kube.admission_target(server, label), "mutate")
            webhooks = kube.register_webhooks(api, kube.MUTATING, config, {SELECT: label})
            try:
                cm = yaml.safe_load((mutations / "mutate_cm.yaml").read_text())
                cm["metadata"]["labels"][SELECT] = label
                text = yaml.safe_dump(cm)
                kube.wait_for(  # dry runs until the webhook answers: no object is left by a try that was early
                    lambda: kubectl(
                        cluster, "-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=text
                    ),
                    lambda done: done.returncode == 0 and '"owner"' in done.stdout,
                    what="the API server to call regokite's mutating webhook",
                )
                created = kubectl(cluster, "-n", namespace, "create", "-f", "-", stdin=text)
                assert created.returncode == 0, created.stderr
                got = get(api, f"/api/v1/namespaces/{namespace}/configmaps/mutate-cm")["metadata"]
                assert got["labels"]["owner"] == "gatekeeper"
                assert got["annotations"]["gatekeeper.sh/mutations"] == "AssignMetadata//k8sownerlabel:1"
                assert len(got["annotations"]["gatekeeper.sh/mutation-id"]) == 36

                svc = yaml.safe_load((mutations / "mutate_svc.yaml").read_text())
                svc["metadata"]["labels"] = {SELECT: label}
                made = kubectl(cluster, "-n", namespace, "create", "-f", "-", stdin=yaml.safe_dump(svc))
                assert made.returncode == 0, made.stderr
                got = get(api, f"/api/v1/namespaces/{namespace}/services/mutate-svc")
                assert not got["spec"].get("externalIPs")
                assert got["metadata"]["annotations"]["gatekeeper.sh/mutations"] == "Assign//k8sexternalip:1"
            finally:
                delete(api, webhooks)
    finally:
        kubectl(cluster, "delete", "assignmetadata", "k8sownerlabel", "--ignore-not-found")
        kubectl(cluster, "delete", "assign", "k8sexternalip", "--ignore-not-found")
        with contextlib.suppress(ApiException):
            delete(api, f"/api/v1/namespaces/{namespace}/configmaps/mutate-cm")
