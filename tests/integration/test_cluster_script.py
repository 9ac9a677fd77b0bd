"""scripts/cluster and controlplane.start behave for people and CI, not just for the fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import controlplane
import kube
import pytest

CLUSTER = kube.SCRIPTS / "cluster"


def run(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REGOKITE_CLUSTER_DIR": str(state)}
    return subprocess.run([sys.executable, str(CLUSTER), *args], env=env, capture_output=True, text=True, timeout=300)


def processes_using(state: Path) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(state) in argv:
            found.append(argv.replace("\0", " ")[:120])
    return found


def test_the_cluster_script_starts_an_instance_once_reports_it_and_stops_it(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    try:
        up = run("up", state=state)
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"export KUBECONFIG={state / 'kubeconfig'}"

        again = run("up", state=state)
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr

        assert run("env", state=state).stdout == up.stdout
        status = run("status", state=state)
        assert status.returncode == 0, status.stdout
        assert "readyz:     ok" in status.stdout

        api = kube.cluster_from_kubeconfig(state / "kubeconfig").api_client()
        assert kube.get(api, "/version")["gitVersion"] == f"v{controlplane.K8S_VERSION}"
        api.close()
    finally:
        down = run("down", state=state)
    assert down.returncode == 0, down.stderr
    assert processes_using(state) == []
    assert not state.exists()
    assert run("status", state=state).returncode == 1


def test_a_failed_start_raises_with_the_binarys_last_log_lines_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    with pytest.raises(controlplane.ControlPlaneError) as failed:
        controlplane.start(tmp_path / "broken", extra_apiserver_args=["--no-such-flag"])

    message = str(failed.value)
    assert "kube-apiserver exited" in message
    assert "unknown flag: --no-such-flag" in message
    assert processes_using(tmp_path / "broken") == []


def test_cluster_up_with_nodes_runs_the_kubelet_standin_and_down_stops_it(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    try:
        up = run("up", "--nodes", "2", state=state)
        assert up.returncode == 0, up.stderr
        status = run("status", state=state)
        assert status.returncode == 0 and "kubelet-standin:" in status.stdout, status.stdout
        api = kube.cluster_from_kubeconfig(state / "kubeconfig").api_client()
        # Registered, then marked Ready, then the API server's not-ready taint lifted: wait for all three.
        kube.wait_for(
            lambda: kube.get(api, "/api/v1/nodes")["items"],
            lambda nodes: (
                len(nodes) == 2 and all(kube.has_condition("Ready")(n) and not n["spec"].get("taints") for n in nodes)
            ),
            what="2 stand-in Nodes, Ready and untainted",
        )
        api.close()
    finally:
        down = run("down", state=state)
    assert down.returncode == 0, down.stderr
    assert processes_using(state) == []
