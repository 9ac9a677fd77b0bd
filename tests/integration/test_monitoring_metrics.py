"""Every metric name the Grafana dashboard and the Prometheus rules in deploy/monitoring use is in the
/metrics of a running regokite: the admission server (after a review, a reload and a worker restart,
since its multiprocess metrics appear once written), a sharded controller and a continuous audit."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kube import Cluster

from tests.admission.reviews import deployment, review
from tests.admission.server import RunningServer, admission_server
from tests.controllers.process import ControllerProcess
from tests.ports import free_port
from tests.test_monitoring_kit import used_metrics

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}


def sample_names(exposition: str) -> set[str]:
    """The names a query can use: every sample's, and those a declared family will have."""
    names = {line.split("{")[0].split(" ")[0] for line in exposition.splitlines() if line and line[0] != "#"}
    for family, kind in re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M):
        names.add(family)
        names.update(family.removesuffix("_total") + s for s in SUFFIXES.get(kind, ()))
    return names


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def worker_pids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def admission_metrics(tmp_path: Path) -> str:
    policies = tmp_path / "policies"
    (policies / "admission").mkdir(parents=True)
    (policies / "admission/cap.rego").write_text(
        'package admission.cap\n\ndeny contains "too many" if input.request.object.spec.replicas > 3\n'
    )
    with admission_server(policies, tmp_path, "--workers", "2") as server, server.client() as client:
        assert client.post("/validate", content=json.dumps(review(deployment(replicas=5)))).status_code == 200
        (policies / "admission/other.rego").write_text('package admission.other\n\nwarn contains "x" if false\n')
        deadline = time.monotonic() + 30
        while "admission.other" not in client.get("/readyz").text:
            assert time.monotonic() < deadline, "the reload did not happen"
            time.sleep(0.2)
        victim = worker_pids(server.process.pid)[0]
        os.kill(victim, signal.SIGKILL)  # a kept-alive connection may have been the victim's: new ones from here
        while 'reason="exited"' not in (text := _metrics(server)):
            assert time.monotonic() < deadline + 30, "the restart was not counted"
            time.sleep(0.2)
        return text


def _metrics(server: RunningServer) -> str:
    try:
        with server.client() as fresh:
            return fresh.get("/metrics").text
    except httpx.TransportError:
        return ""  # the killed worker's connection, or none accepting yet


@pytest.fixture
def audit_metrics_url(cluster: Cluster, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "audit.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "regokite.cli", "audit", "--policies", str(ROOT / "policies"), "--no-reports"),
                *("--kubeconfig", str(cluster.kubeconfig), "--metrics-port", str(port)),
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if "regokite_audit_passes_total 1.0" in scrape(url):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no audit pass within 60 s:\n{log.read_text()}"
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_every_metric_of_the_monitoring_kit_is_served(
    cluster: Cluster, namespace: str, hello_crd: None, audit_metrics_url: str, tmp_path: Path
) -> None:
    served = sample_names(admission_metrics(tmp_path))
    with ControllerProcess(
        cluster.kubeconfig, policies=[HELLO], controllers=[HELLO / "controller.yaml"], namespace=namespace,
        extra=["--shards", "--leader-election-namespace", namespace],
    ) as ctl:  # fmt: skip
        served |= sample_names(ctl.metrics())
    served |= sample_names(scrape(audit_metrics_url))
    used = used_metrics()
    assert len(used) > 15
    assert sorted(used - served) == []
