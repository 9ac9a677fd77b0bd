"""The admission server with policies that read cluster data: nothing decides before it is in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from regokite.admission.app import ServingState, create_app
from regokite.admission.policies import load_policy_set
from regokite.clusterdata.store import ReplicaStore, parse_resource
from tests.admission.reviews import deployment, review
from tests.admission.server import admission_server

READS_CONFIGMAPS = """package admission.reads

match := {"rules": [{"apiGroups": ["apps"], "resources": ["deployments"]}]}

replicate := {"namespaced": ["v1/configmaps"]}

deny contains "no settings ConfigMap" if not data.kubernetes.configmaps[input.request.namespace].settings
"""

PLAIN = """package admission.plain

deny contains "replicas over 3" if input.request.object.spec.replicas > 3
"""


class Loading:
    """A replicator as the app sees it, whose initial list is not in yet."""

    def __init__(self) -> None:
        self.store = ReplicaStore()
        self.loaded = False
        self.resources = (parse_resource("v1/configmaps", namespaced=True),)

    def ready(self) -> bool:
        return self.loaded

    def ready_at(self) -> int | None:
        return self.store.generation if self.loaded else None

    def pending(self) -> list[str]:
        return [] if self.loaded else ["v1/configmaps"]

    def objects(self) -> int:
        return len(self.store)

    def health(self) -> dict[str, dict]:
        return {"v1/configmaps": {"connected": self.loaded, "missed_events_for_seconds": None if self.loaded else 2.0}}


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    (tmp_path / "reads.rego").write_text(READS_CONFIGMAPS)
    (tmp_path / "plain.rego").write_text(PLAIN)
    return tmp_path


def test_no_review_is_decided_until_the_initial_list_is_loaded(policies: Path) -> None:
    policy_set = load_policy_set([str(policies)])
    assert [str(r) for r in policy_set.replicate] == ["v1/configmaps"]
    replica = Loading()
    policy_set.engine.follow(replica.store)
    app = create_app(ServingState(policy_set, replica=replica))  # type: ignore[arg-type]
    body = json.dumps(review(deployment()))
    with TestClient(app) as client:
        waiting = client.post("/validate", content=body)
        assert waiting.status_code == 503  # an error, so the webhook's failurePolicy applies
        assert "cluster data not loaded yet (v1/configmaps)" in waiting.json()["error"]
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["replication"] == {
            "ready": False,
            "resources": ["v1/configmaps"],
            "pending": ["v1/configmaps"],
            "objects": 0,
            "watches": {"v1/configmaps": {"connected": False, "missed_events_for_seconds": 2.0}},
            "stale_seconds": 2.0,
        }
        replica.store.put("configmaps", {"metadata": {"name": "settings", "namespace": "default"}}, namespaced=True)
        replica.loaded = True
        answer = client.post("/validate", content=body).json()["response"]
        assert answer["allowed"] is True
        assert client.get("/readyz").status_code == 200


def test_without_credentials_policies_that_read_cluster_data_refuse_and_the_others_decide(
    policies: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert "KUBECONFIG" in os.environ
    with admission_server(policies, tmp_path) as server, server.client() as client:
        answer = client.post("/validate", content=json.dumps(review(deployment(replicas=5)))).json()["response"]
        assert answer["allowed"] is False
        message = answer["status"]["message"]
        assert "[admission.plain] replicas over 3" in message
        assert (
            "[admission.reads] policy error: reads cluster data (v1/configmaps) but regokite cannot replicate"
            in message
        )
    assert "policy refuses every request it matches" in server.logs()


def test_local_mode_leaves_out_policies_that_read_cluster_data_and_says_so(
    policies: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing.kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with admission_server(policies, tmp_path, "--local") as server, server.client() as client:
        answer = client.post("/validate", content=json.dumps(review(deployment(replicas=5)))).json()["response"]
        assert answer["allowed"] is False
        assert answer["status"]["message"] == "[admission.plain] replicas over 3"  # no policy error
        ready = client.get("/readyz").json()
        assert ready["policies"] == ["admission.plain"]
        assert ready["not_served"] == {"admission.reads": "v1/configmaps"}
    logs = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    [loaded] = [r for r in logs if r["msg"] == "policies loaded"]
    assert loaded["mode"] == "local"
    [left_out] = [r for r in logs if r["msg"] == "needs a cluster: not served"]
    assert (left_out["policy"], left_out["reads"]) == ("admission.reads", "v1/configmaps")
    assert not [r for r in logs if r["level"] == "error"]


def test_local_mode_refuses_flags_that_need_a_cluster(policies: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "regokite.cli", "admission", "--policies", str(policies), "--self-signed"),
            *("--tls-dir", str(tmp_path / "tls"), "--local", "--replicate", "v1/configmaps"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--local talks to no cluster" in done.stderr
    with_configmaps = subprocess.run(
        [
            *(sys.executable, "-m", "regokite.cli", "admission", "--policy-namespaces", "opa", "--self-signed"),
            *("--tls-dir", str(tmp_path / "tls"), "--local"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert with_configmaps.returncode != 0 and "--local talks to no cluster" in with_configmaps.stderr


def test_without_cluster_data_keeps_the_rest_of_the_set(policies: Path) -> None:
    policy_set = load_policy_set([str(policies)])
    try:
        local = policy_set.without_cluster_data()
        assert [p.name for p in local.policies] == ["admission.plain"]
        assert local.replicate == ()
        assert local.not_served == {"admission.reads": "v1/configmaps"}
        assert [p.name for p in policy_set.policies] == ["admission.plain", "admission.reads"]  # unchanged
    finally:
        policy_set.close()


def test_without_cluster_data_leaves_out_constraints_whose_namespace_selector_reads_namespaces() -> None:
    fixtures = Path(__file__).resolve().parents[1] / "gatekeeper/fixtures"
    policy_set = load_policy_set([str(fixtures / "library"), str(fixtures / "actions")])
    try:
        local = policy_set.without_cluster_data()
        assert "cm-in-labelled-namespaces" in {p.name for p in policy_set.policies}
        assert local.not_served["cm-in-labelled-namespaces"] == "v1/namespaces (namespaceSelector)"
        kept = {p.name for p in local.policies}
        assert "cm-in-labelled-namespaces" not in kept
        assert kept == {p.name for p in policy_set.policies} - set(local.not_served)
        assert kept  # the other constraints serve
    finally:
        policy_set.close()
