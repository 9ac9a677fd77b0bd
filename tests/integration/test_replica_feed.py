"""One list+watch per replicated resource per admission server, however many workers it runs.

The supervisor's feeder process holds the informers; every worker mirrors its
store. Counted by the API server itself (its /metrics), on a control plane
of the test's own so no other test's watches count.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import kube

from tests.admission.reviews import deployment, review
from tests.admission.server import RunningServer, admission_server

NEEDS_SETTINGS = """package admission.needs_settings

match := {"rules": [{"apiGroups": ["apps"], "resources": ["deployments"]}]}

replicate := {"namespaced": ["v1/configmaps"]}

deny contains "no settings ConfigMap" if not data.kubernetes.configmaps[input.request.namespace].settings
"""


def watches(cp) -> float:
    return kube.list_and_watch_requests(cp.server, cp.token, cp.ca_file, "configmaps")["WATCH"]


def decisions(server: RunningServer, namespace: str, count: int) -> set[bool]:
    """`count` reviews, each on a new connection (so on whichever worker accepts it)."""
    obj = deployment()
    obj["metadata"]["namespace"] = namespace
    body = json.dumps(review(obj))
    found = set()
    for _ in range(count):
        with server.client() as client:
            answer = client.post("/validate", content=body)
            assert answer.status_code == 200, answer.text  # a 503: a worker not ready
            found.add(answer.json()["response"]["allowed"])
    return found


def test_workers_mirror_one_watch_and_a_replacement_worker_takes_the_feeders_copy(
    private_plane, tmp_path: Path
) -> None:
    cp = private_plane
    cluster = kube.Cluster.of(cp)
    with cluster.api_client() as api:
        kube.create(api, "/api/v1/namespaces", {"metadata": {"name": "team"}})
        kube.create(api, "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "settings"}, "data": {}})
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "needs_settings.rego").write_text(NEEDS_SETTINGS)
    before = watches(cp)
    args = ("--kubeconfig", str(cp.kubeconfig), "--workers", "3")
    with admission_server(tmp_path / "policies", tmp_path, *args) as server:
        kube.wait_for(lambda: server.logs().count('"replica received"'), lambda n: n == 3, what="3 workers' replicas")
        assert watches(cp) - before == 1
        assert decisions(server, "team", 12) == {True}
        assert decisions(server, "default", 3) == {False}  # the data decides: no settings there

        [feeder] = feeders(server)
        victim = min(server.workers() - {feeder})
        os.kill(victim, signal.SIGKILL)
        kube.wait_for(lambda: server.logs().count('"replica received"'), lambda n: n == 4, what="the replacement")
        assert victim not in server.workers()
        assert watches(cp) - before == 1
        assert decisions(server, "team", 12) == {True}

        os.kill(feeder, signal.SIGKILL)  # the workers decide on what they hold; a new feeder lists once
        assert decisions(server, "team", 6) == {True}
        kube.wait_for(lambda: len(feeders(server)), lambda n: n == 2, what="a new feeder")
        assert decisions(server, "team", 6) == {True}  # not a 503 while it lists
        kube.wait_for(lambda: watches(cp) - before, lambda n: n == 1, what="one watch again")
        with cluster.api_client() as api:
            kube.delete(api, "/api/v1/namespaces/team/configmaps/settings")
        kube.wait_for(lambda: decisions(server, "team", 6), lambda d: d == {False}, what="every worker to see it")


def feeders(server: RunningServer) -> list[int]:
    """The feeder processes the server started, newest last."""
    lines = [json.loads(line) for line in server.logs().splitlines() if '"replica feeder serving"' in line]
    return [line["pid"] for line in lines]
