"""Getting started, run as a new user would: no cluster, no kubeconfig, a fresh install."""

from __future__ import annotations

import json
from pathlib import Path

from tests.docs.shell_blocks import blocks, run_page, workspace

PAGE = "getting-started.md"


def test_every_block_of_getting_started_runs_with_no_cluster(tmp_path: Path) -> None:
    space = workspace(tmp_path, install=False)  # the page's first command installs
    assert not (space.home / ".kube").exists() and "KUBECONFIG" not in space.env
    assert not any(b.cluster for b in blocks(PAGE))
    with run_page(PAGE, space, tmp_path) as outputs:
        serving, answer, tested = outputs
    started = [json.loads(line) for line in serving.splitlines() if line.startswith("{")]
    [loaded] = [r for r in started if r["msg"] == "policies loaded"]
    assert loaded["mode"] == "local"
    not_served = {r["policy"] for r in started if r["msg"] == "needs a cluster: not served"}
    assert not_served == {"admission.restricted_namespaces", "admission.unique_ingress_host"}
    response = json.loads(answer)["response"]
    assert response["allowed"] is False and response["uid"] == "1"
    assert "policy error" not in response["status"]["message"]  # a decision, not a refusal for want of data
    assert "PASS:" in tested
