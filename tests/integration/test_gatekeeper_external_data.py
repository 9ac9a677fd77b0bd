"""Gatekeeper's external data on a real API server: a Provider applied with kubectl, a template calling
external_data, and a provider written here (HTTPS on loopback, mTLS) tagging images signed or unsigned.

The API server refuses a Pod with an unsigned image and admits a signed one;
with the provider down, the template's documented failure path (its
`system_error` violation) refuses; the provider sees regokite's client
certificate; the Provider's status says it is active.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import kube
import pytest
from kube import create, delete, get
from kubernetes import client
from kubernetes.client.rest import ApiException
from test_gatekeeper_constraints import kubectl

from regokite.gatekeeper.crds import mutator_crds, provider_crd, template_crd
from regokite.kube.client import KubeClient
from regokite.manifests.webhooks import catch_all_configuration
from regokite.sources.gatekeeper_objects import PROVIDERS, GatekeeperSync
from tests.admission.server import admission_server
from tests.gatekeeper.signature_provider import CONSTRAINT, SIGNED_PREFIX, TEMPLATE, SignatureProvider

SELECT = "regokite.dev/external-data-test"


def test_external_data_refuses_unsigned_images_and_fails_as_the_template_says_when_the_provider_is_down(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    out = tmp_path / "policies"
    out.mkdir()
    sync = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    sync.install()
    kube.install_crd(api, template_crd())
    kube.install_crd(api, provider_crd())
    (tmp_path / "provider").mkdir()
    (tmp_path / "server").mkdir()
    provider = SignatureProvider(tmp_path / "provider", client_ca=tmp_path / "server" / "tls" / "ca.crt")
    assert kubectl(cluster, "apply", "-f", "-", stdin=provider.provider_yaml()).returncode == 0
    assert kubectl(cluster, "apply", "-f", "-", stdin=TEMPLATE).returncode == 0
    sync.sync_once()
    kube.wait_for(
        lambda: kubectl(cluster, "apply", "-f", "-", stdin=CONSTRAINT).returncode,
        lambda rc: rc == 0,
        what="the constraint CRD to be served",
    )
    sync.sync_once()
    assert get(api, f"{PROVIDERS}/image-signatures")["status"]["byPod"][0]["active"] is True
    pods = f"/api/v1/namespaces/{namespace}/pods"

    def pod(image: str) -> object:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": kube.unique_name("p"), "labels": {SELECT: namespace}},
            "spec": {"containers": [{"name": "c", "image": image}], "automountServiceAccountToken": False},
        }
        try:
            create(api, pods, body)
        except ApiException as exc:
            return exc.status, json.loads(exc.body)["message"]
        return "admitted"

    with admission_server(out, tmp_path / "server") as server:
        webhooks = kube.register_policy_webhooks(api, out, server, {SELECT: namespace})
        try:
            # the provider is not running yet: the template's system_error violation refuses
            down = kube.wait_for(
                lambda: pod(f"{SIGNED_PREFIX}web:1"),
                lambda got: got != "admitted" and "image signatures could not be checked" in got[1],
                what="the API server to call regokite (provider down)",
            )
            assert down[0] == 403 and "failed to send external data request" in down[1]

            with provider.running():
                assert pod(f"{SIGNED_PREFIX}web:1") == "admitted"
                refused = pod("docker.io/library/nginx:1")
                assert refused[0] == 403
                assert "[signed-images] image docker.io/library/nginx:1 is unsigned" in refused[1]
                assert provider.client_subjects and set(provider.client_subjects) == {"localhost"}  # mTLS
                asked = len(provider.requests)
            # down again: a cached answer still serves (Gatekeeper's cache), a new image takes the failure path
            assert pod(f"{SIGNED_PREFIX}web:1") == "admitted" and len(provider.requests) == asked
            again = pod(f"{SIGNED_PREFIX}api:2")
            assert again[0] == 403 and "image signatures could not be checked" in again[1]
        finally:
            delete(api, webhooks)
            kubectl(cluster, "delete", "constrainttemplate", "k8ssignedimages", "--ignore-not-found")
            kubectl(cluster, "delete", "provider", "image-signatures", "--ignore-not-found")


def test_mutators_resolve_external_data_as_gatekeepers_bats_case(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """bats "gatekeeper external data validation and mutation test", its mutation part: Gatekeeper's
    valid.yaml mutators and a Provider applied with kubectl; a Pod created through the mutating webhook
    (server-side dry run) comes back with the user's annotation and each image resolved, a key error
    and a system error refuse it."""
    from tests.gatekeeper.upstream import upstream_dir

    found = upstream_dir()
    if found is None or not (found / "gatekeeper").is_dir():
        pytest.skip("no copy of Gatekeeper's material (set REGOKITE_UPSTREAM to the upstream/ directory)")
    valid = found / "gatekeeper/test/externaldata/dummy-provider/mutation/valid.yaml"
    out = tmp_path / "policies"
    out.mkdir()
    sync = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    sync.install()
    for crd in (provider_crd(), *mutator_crds()):
        kube.install_crd(api, crd)
    (tmp_path / "provider").mkdir()
    (tmp_path / "server").mkdir()
    label = kube.unique_name("edm")
    with SignatureProvider(tmp_path / "provider", dummy=True).running() as provider:
        assert kubectl(cluster, "apply", "-f", "-", stdin=provider.provider_yaml("dummy-provider")).returncode == 0
        applied = kubectl(cluster, "apply", "-f", str(valid))
        assert applied.returncode == 0, applied.stderr
        sync.sync_once()
        with admission_server(out, tmp_path / "server") as server:
            config = catch_all_configuration(kube.admission_target(server, label), "mutate")
            webhooks = kube.register_webhooks(api, kube.MUTATING, config, {SELECT: label})

            def run(image: str) -> subprocess.CompletedProcess[str]:
                return kubectl(
                    cluster, "-n", namespace, "run", "nginx", f"--image={image}", f"--labels={SELECT}={label}",
                    "--dry-run=server", "--output", "json",
                )  # fmt: skip

            try:
                done = kube.wait_for(
                    lambda: run("nginx"),
                    lambda got: got.returncode == 0 and "_valid" in got.stdout,
                    what="the API server to call regokite's mutating webhook",
                )
                pod = json.loads(done.stdout)
                user = pod["metadata"]["annotations"]["external-data-username"]
                assert user.endswith("_valid") and user != "_valid"  # the requesting user, resolved
                assert [c["image"] for c in pod["spec"]["containers"]] == ["nginx_valid", "busybox_valid"]
                key_error = run("error_busybox")
                assert key_error.returncode != 0 and "error_busybox_invalid" in key_error.stderr
                system_error = run("busybox:latest_systemError")
                assert system_error.returncode != 0 and "testing system error" in system_error.stderr
            finally:
                delete(api, webhooks)
                kubectl(cluster, "delete", "-f", str(valid), "--ignore-not-found")
                kubectl(cluster, "delete", "provider", "dummy-provider", "--ignore-not-found")
