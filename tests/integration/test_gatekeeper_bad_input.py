"""Bad Gatekeeper input on a real API server loses nothing (issue 27).

`regokite gatekeeper` follows the cluster with watches while `regokite admission` serves what it
writes, and the API server calls that server. A template edit whose Rego no longer compiles, and a
constraint edit whose match does not parse, are each refused in their status while the last good
version keeps enforcing: the constraint CRD and the constraints stay, and a Namespace without the
required label is still refused by the API server. Before the fix the broken edit deleted the
template's constraint CRD, with every constraint of its kind, and admission then let it in.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import delete, get
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_gatekeeper_constraints import FIXTURES, SELECT, constraint, kubectl, namespace

from regokite.gatekeeper.crds import constraint_crd_name, template_crd
from regokite.kube.client import KubeClient
from regokite.sources.gatekeeper_objects import TEMPLATES, GatekeeperSync, served_documents
from tests.admission.server import admission_server

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CONSTRAINTS = "/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels"
TEMPLATE = FIXTURES / "library/requiredlabels/template.yaml"


@pytest.fixture
def running(cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path) -> Iterator[GatekeeperSync]:
    """`regokite gatekeeper` as it runs in a pod: following the cluster through its watches."""
    syncer = GatekeeperSync(KubeClient(cluster.kubeconfig), tmp_path / "policies")
    syncer.install()
    kube.install_crd(api, template_crd())
    stop = threading.Event()
    runner = threading.Thread(target=syncer.run, args=(300.0, stop), daemon=True)  # watches only
    runner.start()
    yield syncer
    stop.set()
    runner.join(10)
    kubectl(cluster, "delete", "constrainttemplates", "k8srequiredlabels", "--ignore-not-found")
    syncer.sync_once()


def test_a_broken_template_edit_keeps_its_constraints_enforcing(
    cluster: kube.Cluster, api: client.ApiClient, running: GatekeeperSync, tmp_path: Path
) -> None:
    label = kube.unique_name("gk")
    name = f"{label}-owner"
    assert kubectl(cluster, "apply", "-f", str(TEMPLATE)).returncode == 0
    kube.wait_for_condition(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}", "Established", timeout=30)
    kube.wait_for(
        lambda: kubectl(cluster, "apply", "-f", "-", stdin=constraint(name, label)).returncode,
        lambda rc: rc == 0,
        what="the constraint CRD to be served",
    )
    kube.wait_for(lambda: name in str(served_documents(running.out)), what="the constraint written", timeout=30)

    (tmp_path / "server").mkdir()
    with admission_server(running.out, tmp_path / "server") as server:
        webhooks = kube.register_policy_webhooks(api, running.out, server, {SELECT: label})  # this test's namespaces
        refused = f'[{name}] you must provide labels: {{"owner"}}'

        def unlabelled_refused() -> None:
            done = kube.wait_for(
                lambda: kubectl(cluster, "apply", "-f", "-", stdin=namespace(kube.unique_name("ns"), label)),
                lambda done: done.returncode != 0,
                what="the API server to refuse a Namespace without the label",
            )
            assert refused in done.stderr, done.stderr

        try:
            unlabelled_refused()

            # the live defect: an edit whose Rego no longer compiles
            broken = TEMPLATE.read_text().replace("count(missing) > 0", "count(missing) > 0 +")
            applied = kubectl(cluster, "apply", "-f", "-", stdin=broken)
            assert applied.returncode == 0, applied.stderr
            status = kube.wait_for(
                lambda: get(api, f"{TEMPLATES}/k8srequiredlabels").get("status", {}),
                lambda s: any(p.get("errors") for p in s.get("byPod", [])),
                what="the template's status to show the error",
                timeout=30,
            )
            message = status["byPod"][0]["errors"][0]["message"]
            assert message.startswith("constrainttemplate/k8srequiredlabels:") and "rego" in message, message
            crd = get(api, f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}")
            assert "deletionTimestamp" not in crd["metadata"]  # its CRD stays, and so its constraints
            assert get(api, f"{CONSTRAINTS}/{name}")["spec"]["parameters"]["labels"] == [{"key": "owner"}]
            unlabelled_refused()  # the last good Rego keeps enforcing
            assert status["created"] is True

            # a constraint edit whose match does not parse: refused in its status, its last good version enforces
            bad = yaml.safe_load(constraint(name, label))
            bad["spec"]["match"]["scope"] = "Everywhere"
            assert kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(bad)).returncode == 0
            pod = kube.wait_for(
                lambda: (get(api, f"{CONSTRAINTS}/{name}").get("status") or {}).get("byPod", [{}])[0],
                lambda p: bool(p.get("errors")),
                what="the constraint's status to show the error",
                timeout=30,
            )
            assert "spec.match.scope" in pod["errors"][0]["message"] and pod["enforced"] is True
            unlabelled_refused()

            # the template fixed: it serves as written again and its error is gone
            assert kubectl(cluster, "apply", "-f", str(TEMPLATE)).returncode == 0
            kube.wait_for(
                lambda: get(api, f"{TEMPLATES}/k8srequiredlabels").get("status", {}),
                lambda s: s.get("byPod") and not any(p.get("errors") for p in s["byPod"]),
                what="the template's error to clear",
                timeout=30,
            )
            unlabelled_refused()
        finally:
            delete(api, webhooks)
            for ns in client.CoreV1Api(api).list_namespace(label_selector=f"{SELECT}={label}").items:
                with contextlib.suppress(ApiException):
                    delete(api, f"/api/v1/namespaces/{ns.metadata.name}")


def test_only_a_deleted_template_removes_its_crd(cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path) -> None:
    """A restarted syncer that finds a template broken keeps its CRD and serves the version it last
    wrote; deleting the template is what removes the CRD."""
    crd = f"{CRDS}/{constraint_crd_name('K8sRequiredLabels')}"
    first = GatekeeperSync(KubeClient(cluster.kubeconfig), tmp_path / "policies")
    first.install()
    kube.install_crd(api, template_crd())
    assert kubectl(cluster, "apply", "-f", str(TEMPLATE)).returncode == 0
    try:
        assert first.sync_once()["K8sRequiredLabels"] is None
        kube.wait_for_condition(api, crd, "Established", timeout=30)
        broken = TEMPLATE.read_text().replace("count(missing) > 0", "count(missing) > 0 +")
        assert kubectl(cluster, "apply", "-f", "-", stdin=broken).returncode == 0
        restarted = GatekeeperSync(KubeClient(cluster.kubeconfig), first.out)
        assert restarted.sync_once()["k8srequiredlabels"].startswith("constrainttemplate/k8srequiredlabels:12:")
        assert "deletionTimestamp" not in get(api, crd)["metadata"]
        (served,) = served_documents(first.out)
        rego = served["spec"]["targets"][0]["rego"]
        assert "count(missing) > 0" in rego and "count(missing) > 0 +" not in rego  # the last good Rego
    finally:
        assert kubectl(cluster, "delete", "constrainttemplate", "k8srequiredlabels").returncode == 0
    restarted.sync_once()
    kube.wait_for_deletion(api, crd)
    assert not served_documents(first.out)
