"""Gatekeeper's objects applied with kubectl to a real API server that calls regokite as Gatekeeper's role.

One `regokite gatekeeper` (following the cluster through its watches) and one
`regokite admission` on its directory serve the whole module, behind the
ValidatingWebhookConfiguration `regokite manifests gatekeeper` writes (every
resource to /validate, failurePolicy Ignore as Gatekeeper's chart; a longer
timeout than its 3 s, for a loaded test machine). A policy object that would
not load is refused by `kubectl apply` with the loader's error, and what
already serves is untouched: each check of that is a request the API server
sends to the running server, so a dead server fails it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kube
import pytest
import yaml
from kube import get
from kubernetes import client

from regokite.gatekeeper.crds import template_crd
from regokite.kube.client import KubeClient
from regokite.manifests.webhooks import WebhookTarget, catch_all_configuration
from regokite.sources.gatekeeper_objects import TEMPLATES, GatekeeperSync
from tests.admission.reviews import review
from tests.admission.server import RunningServer, admission_server

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "gatekeeper" / "fixtures"
REQUIRED_LABELS = FIXTURES / "library/requiredlabels/template.yaml"
SELECT = "regokite.dev/gatekeeper-apply"


def kubectl(cluster: kube.Cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=120)


@dataclass
class Gatekeeper:
    """Gatekeeper's role on the session's API server: the syncer, the server, the webhook."""

    cluster: kube.Cluster
    api: client.ApiClient
    syncer: GatekeeperSync
    server: RunningServer

    def apply(self, text: str) -> subprocess.CompletedProcess[str]:
        return kubectl(self.cluster, "apply", "-f", "-", stdin=text)

    def applied(self, text: str, what: str) -> None:
        """Applied, retried while a constraint's CRD is not served yet (the syncer makes it)."""
        kube.wait_for(lambda: self.apply(text), lambda done: done.returncode == 0, what=what, timeout=60)

    def served(self, kind: str, name: str, status: int = 200) -> None:
        """Wait until the server serves constraint `name` (its /validate/<name> answers), or (404) no longer."""
        body = review({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "probe"}})
        with self.server.client() as http:
            kube.wait_for(
                lambda: http.post(f"/validate/{name}", json=body).status_code,
                lambda answered: answered == status,
                what=f"the server to {'serve' if status == 200 else 'stop serving'} {kind} {name}",
                timeout=120,
            )


@pytest.fixture(scope="module")
def gatekeeper(
    cluster: kube.Cluster, api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gatekeeper]:
    tmp = tmp_path_factory.mktemp("gatekeeper-apply")
    syncer = GatekeeperSync(KubeClient(cluster.kubeconfig), tmp / "policies")
    syncer.install()
    kube.install_crd(api, template_crd())
    syncer.sync_once()
    stop = threading.Event()
    runner = threading.Thread(target=syncer.run, args=(300.0, stop), daemon=True)  # its watches drive it
    runner.start()
    (tmp / "server").mkdir()
    try:
        with admission_server(syncer.out, tmp / "server") as server:
            ca = base64.b64encode(server.ca.read_bytes()).decode()
            target = WebhookTarget(
                kube.unique_name("gk"), "regokite-system", url=server.url, ca_bundle=ca, timeout_seconds=15
            )
            config = catch_all_configuration(target)
            kube.create(api, kube.VALIDATING, config)
            try:
                yield Gatekeeper(cluster, api, syncer, server)
            finally:
                kube.delete(api, f"{kube.VALIDATING}/{config['metadata']['name']}")
    finally:
        stop.set()
        runner.join(10)
        kubectl(cluster, "delete", "constrainttemplates", "--all", "--ignore-not-found")
        syncer.sync_once()


def constraint(name: str, label: str, **parameters: object) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": "K8sRequiredLabels",
            "metadata": {"name": name},
            "spec": {
                "match": {
                    "kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}],
                    "labelSelector": {"matchLabels": {SELECT: label}},
                },
                "parameters": parameters or {"labels": [{"key": "owner"}]},
            },
        }
    )


def test_what_would_not_load_is_refused_at_apply_and_what_serves_is_untouched(gatekeeper: Gatekeeper) -> None:
    label = kube.unique_name("gk")
    name = f"{label}-owner"
    assert gatekeeper.apply(REQUIRED_LABELS.read_text()).returncode == 0
    gatekeeper.applied(constraint(name, label), "the constraint CRD to be served")
    gatekeeper.served("K8sRequiredLabels", name)
    refusal = f'[{name}] you must provide labels: {{"owner"}}'

    def still_serving() -> None:
        """A Namespace without the label is refused by the API server, with the constraint's message: the
        running server decided it, with the template and constraint as they were."""

        def namespace() -> str:
            meta = {"name": kube.unique_name("ns"), "labels": {SELECT: label}}
            return yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})

        done = kube.wait_for(
            lambda: gatekeeper.apply(namespace()),
            lambda d: d.returncode != 0,
            what="the Namespace to be refused",
            timeout=60,
        )
        assert refusal in done.stderr, done.stderr

    try:
        still_serving()
        template_before = get(gatekeeper.api, f"{TEMPLATES}/k8srequiredlabels")

        # a new template whose Rego does not compile
        broken = next(d for d in yaml.safe_load_all((FIXTURES / "broken/templates.yaml").read_text()) if d)
        refused = gatekeeper.apply(yaml.safe_dump(broken))
        assert refused.returncode != 0 and "denied the request" in refused.stderr, refused.stderr
        assert "constrainttemplate/k8sbroken:4:10: unknown function no_such_function" in refused.stderr
        assert not kube.exists(gatekeeper.api, f"{TEMPLATES}/k8sbroken")

        # an edit of the serving template that does not compile: refused, the template as it was
        edit = REQUIRED_LABELS.read_text().replace("count(missing) > 0", "count(missing) > 0 +")
        refused = gatekeeper.apply(edit)
        assert refused.returncode != 0 and "constrainttemplate/k8srequiredlabels:" in refused.stderr, refused.stderr
        after = get(gatekeeper.api, f"{TEMPLATES}/k8srequiredlabels")
        assert after["metadata"]["generation"] == template_before["metadata"]["generation"]

        # a constraint whose parameter fails the schema: the API server refuses it (its CRD has the schema);
        # kubectl's own check of the published schema is off, or it may refuse first, in its words
        refused = kubectl(
            gatekeeper.cluster, "apply", "--validate=false", "-f", "-", stdin=constraint(name, label, labels="owner")
        )
        assert refused.returncode != 0, refused.stderr
        assert (
            'spec.parameters.labels: Invalid value: "string": spec.parameters.labels in body must be of type array'
            in refused.stderr
        )
        # one the schema takes but Gatekeeper refuses (In without values): regokite's webhook refuses it
        bad = yaml.safe_load(constraint(name, label))
        bad["spec"]["match"]["labelSelector"] = {"matchExpressions": [{"key": SELECT, "operator": "In"}]}
        refused = gatekeeper.apply(yaml.safe_dump(bad))
        assert refused.returncode != 0, refused.stderr
        assert "invalid Constraint: spec.match.labelSelector.matchExpressions[0].values: Required" in refused.stderr
        served = get(gatekeeper.api, f"/apis/constraints.gatekeeper.sh/v1beta1/k8srequiredlabels/{name}")
        assert served["spec"]["match"]["labelSelector"] == {"matchLabels": {SELECT: label}}

        # a mutator that does not parse
        assign = {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": kube.unique_name("a")},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": "spec.[bad",
                "parameters": {"assign": {"value": "None"}},
            },
        }
        refused = gatekeeper.apply(yaml.safe_dump(assign))
        assert refused.returncode != 0 and "denied the request" in refused.stderr, refused.stderr
        still_serving()
    finally:
        kubectl(gatekeeper.cluster, "delete", "k8srequiredlabels", name, "--ignore-not-found")
        for ns in client.CoreV1Api(gatekeeper.api).list_namespace(label_selector=f"{SELECT}={label}").items:
            with contextlib.suppress(client.ApiException):
                kube.delete(gatekeeper.api, f"/api/v1/namespaces/{ns.metadata.name}")
