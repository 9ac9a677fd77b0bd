"""A Gatekeeper mutator that does not load loses nothing (issue 27), on a real API server.

`regokite gatekeeper` syncs the mutators kubectl applies; `regokite admission` serves what it writes.
An edit of a served Assign that does not load (an invalid location) is refused in its status
(`enforced` stays true: its last good version serves) and `/mutate` keeps applying that version; a
new mutator that never loaded is not served and its status says why; a new good one is served beside
them; a restarted syncer (seeded from what it last wrote) keeps the last good version; the fixed
edit serves. Before, every mutator was written as it was and one that did not load made `/mutate`
refuse every request, as Gatekeeper does not (its mutator controller leaves the mutation system as
it was when a mutator does not load).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import get
from kubernetes import client
from test_gatekeeper_constraints import kubectl

from regokite.gatekeeper.crds import mutator_crds
from regokite.kube.client import KubeClient
from regokite.sources.gatekeeper_objects import GatekeeperSync, served_documents
from tests.admission.reviews import review
from tests.admission.server import admission_server
from tests.gatekeeper.mutators import pod_assign

ASSIGNS = "/apis/mutations.gatekeeper.sh/v1/assign"


def assign(name: str, namespace: str, location: str, value: str) -> str:
    return yaml.safe_dump(pod_assign(name, location, value, namespace=namespace))


@pytest.fixture
def names(cluster: kube.Cluster, api: client.ApiClient) -> Iterator[dict[str, str]]:
    for crd in mutator_crds():
        kube.install_crd(api, crd)
    found = {key: kube.unique_name(key) for key in ("ns", "dns", "broken", "host")}
    yield found
    for key in ("dns", "broken", "host"):
        kubectl(cluster, "delete", "assign", found[key], "--ignore-not-found")


def patched(server, namespace: str) -> dict[str, object] | str:
    """The fields /mutate sets on a Pod in `namespace` (by JSON-patch path), or the refusal."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace}}
    pod["spec"] = {"containers": [{"name": "c", "image": "nginx"}]}
    with server.client() as c:
        answer = c.post("/mutate", content=json.dumps(review(pod))).json()["response"]
    if not answer["allowed"]:
        return answer["status"]["message"]
    ops = json.loads(base64.b64decode(answer["patch"])) if answer.get("patch") else []
    return {op["path"]: op.get("value") for op in ops}


def sets(path: str, value: str):
    """Whether a /mutate answer (patched()) sets `path` to `value` (a refusal sets nothing)."""
    return lambda answer: isinstance(answer, dict) and answer.get(path) == value


def status(api: client.ApiClient, name: str) -> dict:
    return get(api, f"{ASSIGNS}/{name}")["status"]["byPod"][0]


def test_a_mutator_that_does_not_load_keeps_its_last_good_version_and_mutation_serving(
    cluster: kube.Cluster, api: client.ApiClient, names: dict[str, str], tmp_path: Path
) -> None:
    ns = names["ns"]
    out = tmp_path / "policies"
    sync = GatekeeperSync(KubeClient(cluster.kubeconfig), out)
    sync.install()
    assert (
        kubectl(cluster, "apply", "-f", "-", stdin=assign(names["dns"], ns, "spec.dnsPolicy", "Default")).returncode
        == 0
    )
    assert sync.sync_once()[f"Assign/{names['dns']}"] is None
    (tmp_path / "server").mkdir()
    with admission_server(out, tmp_path / "server") as server:
        assert patched(server, ns) == {"/spec/dnsPolicy": "Default"}

        broken_edit = assign(names["dns"], ns, "spec..dnsPolicy", "None")
        assert kubectl(cluster, "apply", "-f", "-", stdin=broken_edit).returncode == 0
        never = assign(names["broken"], ns, "spec.containers[name: *", "x")
        assert kubectl(cluster, "apply", "-f", "-", stdin=never).returncode == 0
        assert (
            kubectl(cluster, "apply", "-f", "-", stdin=assign(names["host"], ns, "spec.hostname", "h")).returncode == 0
        )
        outcome = sync.sync_once()
        assert "location" in outcome[f"Assign/{names['dns']}"] and outcome[f"Assign/{names['broken']}"]
        assert outcome[f"Assign/{names['host']}"] is None
        edited, new = status(api, names["dns"]), status(api, names["broken"])
        assert edited["enforced"] is True and "location" in edited["errors"][0]["message"]  # the last good serves
        assert new["enforced"] is False and new["errors"][0]["message"]
        # the new good mutator is served beside the last good version (before: every request refused)
        served = kube.wait_for(lambda: patched(server, ns), sets("/spec/hostname", "h"), what="the new mutator")
        assert served == {"/spec/dnsPolicy": "Default", "/spec/hostname": "h"}

        restarted = GatekeeperSync(KubeClient(cluster.kubeconfig), out)  # seeded from the file it wrote
        assert "location" in restarted.sync_once()[f"Assign/{names['dns']}"]
        written = [d for d in served_documents(out) if d["kind"] == "Assign"]
        assert {d["metadata"]["name"]: d["spec"]["location"] for d in written} == {
            names["dns"]: "spec.dnsPolicy",
            names["host"]: "spec.hostname",
        }

        fixed = assign(names["dns"], ns, "spec.dnsPolicy", "ClusterFirstWithHostNet")
        assert kubectl(cluster, "apply", "-f", "-", stdin=fixed).returncode == 0
        assert restarted.sync_once()[f"Assign/{names['dns']}"] is None
        kube.wait_for(lambda: patched(server, ns), sets("/spec/dnsPolicy", "ClusterFirstWithHostNet"), what="the fix")
        now = status(api, names["dns"])
        assert now["enforced"] is True and "errors" not in now
