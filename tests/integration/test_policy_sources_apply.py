"""Policy and data ConfigMaps and controller definitions applied with kubectl to a real API server, checked by
`regokite admission` through the webhooks `regokite manifests admission --policy-namespaces NS
--check-definitions` registers (/v1/admitsource, failurePolicy Fail, each ConfigMap webhook limited to its
label by an objectSelector).

The server follows the test namespace's labelled ConfigMaps and serves the hello_world controller's policies.
A ConfigMap whose Rego does not compile, data that is not JSON, and a CompositeController naming a package that
is not served are refused by `kubectl apply` with the loaders' errors; the good versions are accepted; and an
admission policy served from a ConfigMap decides the same before and after the refused edit of it (each
decision a request the API server sends to the running server: a dead server fails the test).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from pathlib import Path

import kube
import yaml
from gatekeeper_role import kubectl
from kube import create, merge_patch
from kubernetes import client

from regokite.manifests.webhooks import NAME_LABEL, WebhookTarget, policy_source_configuration
from tests.admission.reviews import review
from tests.admission.server import RunningServer, admission_server

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
POLICY = """package applied.no_forbidden

match := {"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}

deny contains "no ConfigMap may hold the key forbidden" if input.request.object.data.forbidden
"""
BROKEN = POLICY.replace("if input.request.object.data.forbidden", "if input.request.object.data.forbidden ==")
REFUSED = "no ConfigMap may hold the key forbidden"


def configmap(name: str, namespace: str, data: dict[str, str], label: tuple[str, str] | None) -> str:
    meta = {"name": name, "namespace": namespace, **({"labels": dict([label])} if label else {})}
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})


@contextlib.contextmanager
def checking_server(cluster: kube.Cluster, api: client.ApiClient, namespace: str, tmp: Path) -> Iterator[RunningServer]:
    """`regokite admission` following the namespace's ConfigMaps and serving hello_world's policies, behind the
    policy-source webhooks and the webhook of the policy a ConfigMap holds."""
    # the label the API server sets on every Namespace since 1.21 (this one is 1.20): what the webhooks select on
    merge_patch(api, f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {NAME_LABEL: namespace}}})
    args = ("--policy-namespaces", namespace, "--kubeconfig", str(cluster.kubeconfig))
    with admission_server(HELLO, tmp, *args) as server:
        ca = base64.b64encode(server.ca.read_bytes()).decode()
        target = WebhookTarget(kube.unique_name("sources"), "regokite-system", url=server.url, ca_bundle=ca)
        sources = policy_source_configuration(target, [namespace], definitions=True)
        create(api, kube.VALIDATING, sources)
        try:
            yield server
        finally:
            kube.delete(api, f"{kube.VALIDATING}/{sources['metadata']['name']}")


def served(server: RunningServer, policy: str) -> None:
    body = review({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}})
    with server.client() as http:
        kube.wait_for(
            lambda: http.post(f"/validate/{policy}", json=body).status_code,
            lambda status: status == 200,
            what=f"the server to serve {policy}",
            timeout=60,
        )


def test_broken_policy_sources_are_refused_at_apply_and_what_serves_keeps_serving(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, definition_crds: None, tmp_path: Path
) -> None:
    rego = ("openpolicyagent.org/policy", "rego")
    policy_cm = configmap("no-forbidden", namespace, {"main.rego": POLICY}, rego)
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"

    def apply(text: str) -> tuple[int, str]:
        done = kubectl(cluster, "apply", "-f", "-", stdin=text)
        return done.returncode, done.stderr

    def refused_by_the_policy() -> bool:
        """A ConfigMap with the key forbidden, refused by the API server with the policy's message: the running
        server decided it with the policy ConfigMap's good version."""
        try:
            create(api, configmaps, {"metadata": {"name": kube.unique_name("cm")}, "data": {"forbidden": "yes"}})
        except client.ApiException as exc:
            return exc.status == 403 and REFUSED in (exc.body or "")
        return False

    with checking_server(cluster, api, namespace, tmp_path) as server:
        kube.wait_for(
            lambda: apply(configmap("probe", namespace, {"m.rego": "package p\n\nx := \n"}, rego)),
            lambda done: done[0] != 0 and "configmap/" in done[1],
            what="the API server to call the policy-source webhook",
            timeout=30,
        )
        assert apply(policy_cm)[0] == 0, "a policy ConfigMap that compiles is accepted"
        served(server, "applied.no-forbidden")
        url = f"{server.url}/validate/applied.no-forbidden"
        ca = base64.b64encode(server.ca.read_bytes()).decode()
        name = f"{kube.unique_name('no-forbidden')}.test.regokite.dev"
        hook = kube.webhook_config(
            "ValidatingWebhookConfiguration", name, url, ca, namespace, resource=("", "configmaps")
        )
        create(api, kube.VALIDATING, hook)
        try:
            kube.wait_for(refused_by_the_policy, bool, what="the policy from the ConfigMap to decide", timeout=30)

            code, error = apply(configmap("no-forbidden", namespace, {"main.rego": BROKEN}, rego))
            assert code != 0 and "admission webhook" in error, error
            assert f"configmap/{namespace}/no-forbidden/main.rego:6:1: expecting expression" in error, (
                error
            )  # the loader's file:line:col
            code, error = apply(configmap("data", namespace, {"x.json": "{nope"}, ("openpolicyagent.org/data", "opa")))
            assert code != 0 and f"configmap/{namespace}/data/x.json: invalid JSON" in error, error
            assert (
                apply(configmap("data", namespace, {"x.json": '{"a": 1}'}, ("openpolicyagent.org/data", "opa")))[0] == 0
            )
            # unlabelled ConfigMaps never reach the webhook (its objectSelector), whatever they hold
            assert apply(configmap("plain", namespace, {"main.rego": BROKEN}, None))[0] == 0

            controller = yaml.safe_load((HELLO / "controller.yaml").read_text())
            controller["metadata"]["name"] = kube.unique_name("hello")
            controller["spec"]["hooks"]["sync"]["rego"]["package"] = "controllers.missing"
            code, error = apply(yaml.safe_dump(controller))
            assert code != 0 and "policy controllers.missing: no such package or rule in the policies" in error, error
            controller["spec"]["hooks"]["sync"]["rego"]["package"] = "controllers.hello_world"
            assert apply(yaml.safe_dump(controller)) == (0, ""), "a definition whose hooks are served is accepted"
            kubectl(cluster, "delete", "compositecontroller", controller["metadata"]["name"])

            stored = kube.get(api, f"{configmaps}/no-forbidden")["data"]["main.rego"]
            assert stored == POLICY, "the refused edit never reached the cluster"
            assert refused_by_the_policy(), "the decision made before the refused edit holds after it"
        finally:
            kube.delete(api, f"{kube.VALIDATING}/{name}")
