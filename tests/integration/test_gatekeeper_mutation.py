"""Gatekeeper's mutators and ExpansionTemplates through `kubectl apply` on a real API server.

gatekeeper-library's mutation samples, applied with kubectl, reach `regokite
admission` through `regokite gatekeeper`; a Pod created through the generated
MutatingWebhookConfiguration comes back mutated. An ExpansionTemplate for
Deployments with the library's k8spspprivilegedcontainer constraint refuses
a Deployment whose Pod template is privileged, with Gatekeeper's message. A
mutator Gatekeeper would refuse says why in its status.byPod.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import delete, get
from kubernetes import client

from regokite.gatekeeper.crds import expansion_crd, mutator_crds, template_crd
from regokite.kube.client import KubeClient
from regokite.manifests.webhooks import catch_all_configuration
from regokite.sources.gatekeeper_objects import GatekeeperSync
from tests.admission.server import admission_server
from tests.gatekeeper.upstream import gatekeeper_library

SELECT = "regokite.dev/gatekeeper-mutation-test"
EXPANSION = """
apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata: {name: expand-deployments}
spec:
  applyTo: [{groups: ["apps"], kinds: ["Deployment"], versions: ["v1"]}]
  templateSource: "spec.template"
  generatedGVK: {kind: "Pod", group: "", version: "v1"}
"""


def kubectl(cluster: kube.Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def sync(cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path) -> Iterator[GatekeeperSync]:
    out = tmp_path / "policies"
    out.mkdir()
    syncer = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    syncer.install()
    for crd in (template_crd(), *mutator_crds(), expansion_crd()):
        kube.install_crd(api, crd)  # waits until served
    yield syncer
    kubectl(cluster, "delete", "assign", "--all")
    kubectl(cluster, "delete", "expansiontemplate", "--all")
    kubectl(cluster, "delete", "constrainttemplate", "k8spspprivilegedcontainer", "--ignore-not-found")
    syncer.sync_once()


def labelled(obj: dict, label: str) -> str:
    obj["metadata"].setdefault("labels", {})[SELECT] = label
    return yaml.safe_dump(obj)


def test_mutators_and_expansion_applied_with_kubectl_are_served(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync, tmp_path: Path
) -> None:
    library = gatekeeper_library()
    label = kube.unique_name("gkm")
    samples = library / "mutation/pod-security-policy"
    for f in (samples / "allow-privilege-escalation/samples/mutation.yaml", samples / "seccomp/samples/mutation.yaml"):
        applied = kubectl(cluster, "apply", "-f", str(f))
        assert applied.returncode == 0, applied.stderr
    privileged = library / "library/pod-security-policy/privileged-containers"
    assert kubectl(cluster, "apply", "-f", str(privileged / "template.yaml")).returncode == 0
    assert kubectl(cluster, "apply", "-f", "-", stdin=EXPANSION).returncode == 0
    assert sync.sync_once()["K8sPSPPrivilegedContainer"] is None
    constraint = privileged / "samples/psp-privileged-container/constraint.yaml"
    kube.wait_for(
        lambda: kubectl(cluster, "apply", "-f", str(constraint)).returncode,
        lambda rc: rc == 0,
        what="the constraint CRD to be served",
    )
    outcome = sync.sync_once()
    assert outcome["Assign/k8spspdefaultallowprivilegeescalation"] is None
    status = get(api, "/apis/mutations.gatekeeper.sh/v1/assign/k8spspseccomp")["status"]
    assert status["byPod"][0]["enforced"] is True and "errors" not in status["byPod"][0]

    (tmp_path / "server").mkdir()
    with admission_server(sync.out, tmp_path / "server") as server:
        target = kube.admission_target(server)
        mutating = catch_all_configuration(target, "mutate")
        assert mutating["webhooks"][0]["failurePolicy"] == "Ignore"
        assert mutating["webhooks"][0]["reinvocationPolicy"] == "Never"
        webhooks = [
            kube.register_webhooks(api, kube.MUTATING, mutating, {SELECT: label}),  # only this test's objects
            kube.register_webhooks(api, kube.VALIDATING, catch_all_configuration(target), {SELECT: label}),
        ]
        pods = "/api/v1/namespaces/default/pods"
        try:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": kube.unique_name("pod"), "namespace": "default"},
                "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
            }
            made = kube.wait_for(
                lambda: kubectl(cluster, "create", "-o", "json", "-f", "-", stdin=labelled(dict(pod), label)),
                lambda done: done.returncode == 0 and "allowPrivilegeEscalation" in done.stdout,
                what="the API server to call regokite's mutating webhook",
            )
            created = yaml.safe_load(made.stdout)
            assert created["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
            assert created["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}

            deployment = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": kube.unique_name("web"), "namespace": "default"},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [{"name": "app", "image": "nginx", "securityContext": {"privileged": True}}]
                        },
                    },
                },
            }
            refused = kubectl(cluster, "create", "-f", "-", stdin=labelled(deployment, label))
            assert refused.returncode != 0
            assert (
                "[psp-privileged-container] [Implied by expand-deployments] Privileged container is not allowed:"
                ' app, securityContext: {"allowPrivilegeEscalation": false, "privileged": true}'
            ) in refused.stderr

            # a mutator Gatekeeper would refuse: its status says why
            bad = yaml.safe_load((samples / "seccomp/samples/mutation.yaml").read_text())
            bad["metadata"]["name"] = "bad-location"
            bad["spec"]["location"] = "spec.securityContext..x"
            assert kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(bad)).returncode == 0
            assert "invalid spec.location" in sync.sync_once()["Assign/bad-location"]
            status = get(api, "/apis/mutations.gatekeeper.sh/v1/assign/bad-location")["status"]["byPod"][0]
            assert status["enforced"] is False and "invalid spec.location" in status["errors"][0]["message"]
        finally:
            for path in webhooks:
                delete(api, path)
            for item in get(api, pods, labelSelector=f"{SELECT}={label}")["items"]:
                delete(api, f"{pods}/{item['metadata']['name']}")
