"""`regokite audit` never drops a result (issue 27), on a private control plane.

The API server goes away as the audit starts its first pass (killed, etcd history compacted, back
after 3 s), then the PolicyReport CRD is deleted (every report with it) and re-created: each time
every report is present and right within 10 s of recovery, the audit process never exits, and its
violation metric agrees with the reports. Before the fix, a connection error ended the audit (its
writes caught only ApiError) and a report deleted under it was never written again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import controlplane
import httpx
import kube
import pytest
from kube import create, get
from kubernetes import client
from kubernetes.client.rest import ApiException

from regokite.audit.crds import report_crds
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
NAMESPACES = 12
RECOVERY = 10.0  # seconds from recovery to every report right
POLICY = """package admission.drill

match := {"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}

deny contains msg if {
	input.request.object.metadata.labels.drill == "bad"
	msg := sprintf("ConfigMap %s is bad", [input.request.object.metadata.name])
}
"""


@contextlib.contextmanager
def audit_process(tmp_path: Path) -> Iterator[dict]:
    """State of an audit the test starts when it chooses (`start_audit`); SIGTERMed afterwards."""
    state: dict = {"log": tmp_path / "audit.log", "port": free_port()}
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "drill.rego").write_text(POLICY)
    state["policies"] = tmp_path / "policies"
    try:
        yield state
    finally:
        stop(state.get("proc"))


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_audit(state: dict, kubeconfig: Path) -> None:
    cmd = [sys.executable, "-m", "regokite.cli", "audit", "--policies", str(state["policies"])]
    cmd += ["--kubeconfig", str(kubeconfig), "--metrics-port", str(state["port"])]
    with state["log"].open("wb") as sink:
        state["proc"] = subprocess.Popen(
            cmd,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            start_new_session=True,
        )


def start_meeting_the_outage(state: dict, cp: object) -> None:
    """Start the audit while the API server is down, and keep it down (etcd history compacted) until
    the audit has met the outage: its first pass runs into it (or, before the fix, it died of it)."""
    start_audit(state, cp.kubeconfig)  # type: ignore[attr-defined]
    kube.compact_etcd(cp.etcd_url)  # type: ignore[attr-defined]
    kube.wait_for(
        lambda: state["proc"].poll() is not None or "failing; retrying" in state["log"].read_text(),
        what="the audit to meet the outage",
        timeout=60,
    )


def wrong_reports(api: client.ApiClient, namespaces: list[str]) -> list[str]:
    """The namespaces whose report is missing or not exactly the one bad ConfigMap's fail."""
    wrong = []
    for ns in namespaces:
        try:
            report = get(api, f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports/regokite-audit")
        except ApiException:
            wrong.append(ns)
            continue
        found = [(r["policy"], r["result"], r["resources"][0]["name"]) for r in report.get("results", [])]
        if found != [("admission.drill", "fail", "bad")]:
            wrong.append(ns)
    return wrong


def violations_metric(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    line = next(x for x in text.splitlines() if x.startswith("regokite_audit_violations{") and "drill" in x)
    return float(line.rsplit(" ", 1)[1])


def all_right_within(api: client.ApiClient, namespaces: list[str], state: dict, what: str) -> float:
    """Seconds until every report is right (the audit process alive throughout); at most RECOVERY."""
    t0 = time.monotonic()
    deadline = t0 + RECOVERY
    while True:
        assert state["proc"].poll() is None, f"the audit exited:\n{state['log'].read_text()[-3000:]}"
        wrong = wrong_reports(api, namespaces)
        if not wrong:
            return time.monotonic() - t0
        assert time.monotonic() < deadline, f"{what}: {len(wrong)} reports wrong {RECOVERY:g}s after recovery"
        time.sleep(0.1)


def bad_namespaces(api: client.ApiClient) -> list[str]:
    """NAMESPACES namespaces, each with one ConfigMap the drill policy fails."""
    for crd in report_crds():
        kube.install_crd(api, crd)
    namespaces = [kube.unique_name("drill") for _ in range(NAMESPACES)]
    for ns in namespaces:
        create(api, "/api/v1/namespaces", {"metadata": {"name": ns}})
        bad = {"metadata": {"name": "bad", "labels": {"drill": "bad"}}, "data": {"k": "v"}}
        create(api, f"/api/v1/namespaces/{ns}/configmaps", bad)
    return namespaces


class Drill(NamedTuple):
    cp: controlplane.ControlPlane
    api: client.ApiClient
    state: dict  # the audit's (audit_process): the test starts it when it chooses
    namespaces: list[str]  # bad_namespaces


@pytest.fixture
def drill(private_plane: controlplane.ControlPlane, tmp_path: Path) -> Iterator[Drill]:
    """A private control plane (the conftest's) holding NAMESPACES bad namespaces, and an audit not started yet."""
    with kube.Cluster.of(private_plane).api_client() as api, audit_process(tmp_path) as state:
        yield Drill(private_plane, api, state, bad_namespaces(api))


def test_every_report_lands_through_an_apiserver_restart_during_the_first_pass(drill: Drill) -> None:
    cp, api, state, namespaces = drill
    # killed as the audit starts (etcd history compacted meanwhile): its first pass runs into the outage
    controlplane.restart_apiserver(cp, 1.0, while_down=lambda: start_meeting_the_outage(state, cp))
    seconds = all_right_within(api, namespaces, state, "after the API server restart")
    print(f"reports right {seconds:.1f}s after the API server came back")
    assert violations_metric(state["port"]) == NAMESPACES


def test_every_report_is_written_again_when_the_report_crd_is_recreated(drill: Drill) -> None:
    cp, api, state, namespaces = drill
    start_audit(state, cp.kubeconfig)
    kube.wait_for(lambda: wrong_reports(api, namespaces), lambda wrong: not wrong, what="the reports", timeout=60)
    name = "policyreports.wgpolicyk8s.io"
    kube.uninstall_crd(api, name)  # every report goes with it
    kube.wait_for_deletion(api, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", timeout=120)
    (crd,) = [c for c in report_crds() if c["metadata"]["name"] == name]
    kube.install_crd(api, crd)
    seconds = all_right_within(api, namespaces, state, "after the report CRD came back")
    print(f"reports right {seconds:.1f}s after the report CRD came back")
    assert violations_metric(state["port"]) == NAMESPACES
