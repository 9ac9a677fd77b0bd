"""A hook that never finishes, beside HelloWorld, on the real API server with leader election.

The runaway hook's calls are cut at its timeout (2 s) and their process replaced:
HelloWorld parents created meanwhile converge, `/healthz` answers within 1 s all along,
the leader keeps renewing its Lease, and the stuck parent gets a Warning Event naming
the package and the timeout.
"""

from __future__ import annotations

import shutil
import threading
import time
import urllib.request
from pathlib import Path

import kube
import yaml
from kube import Cluster, create, get
from kubernetes import client

from tests.controllers.definitions_text import composite_controller
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
RUNAWAY = """package controllers.runaway

status := {"n": count([x | some x in numbers.range(1, 1e10)])}
"""
SPINNER = composite_controller(
    "spinner", "spinners", "configmaps", "rego: {package: controllers.runaway, timeout: 2s}", method=None
)
LEASE = ["--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3"]
LEASE += ["--leader-election-retry-period", "0.5"]


def lease(api: client.ApiClient, namespace: str) -> dict:
    return get(api, f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/regokite-controller")["spec"]


def test_a_runaway_hook_fails_alone_while_others_converge_health_answers_and_the_lease_is_renewed(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    kube.install_crd(api, yaml.safe_load((HELLO / "crd.yaml").read_text()))
    kube.install_crd(api, kube.crd_manifest("example.com", "Spinner"))
    policies = tmp_path / "policies"
    shutil.copytree(HELLO, policies / "hello_world", ignore=shutil.ignore_patterns("*.yaml"))
    (policies / "runaway.rego").write_text(RUNAWAY)
    (tmp_path / "spinner.yaml").write_text(SPINNER)
    extra = ["--leader-elect", "--leader-election-namespace", namespace, "--leader-election-id", "me", *LEASE]
    extra += ["--hook-processes", "2"]
    with ControllerProcess(
        cluster.kubeconfig,
        policies=[policies],
        controllers=[HELLO / "controller.yaml", tmp_path / "spinner.yaml"],
        namespace=namespace,
        extra=extra,
    ) as ctl:
        kube.wait_for(lambda: lease(api, namespace), lambda s: s.get("holderIdentity") == "me", what="leading")
        slow: list[str] = []
        stop = threading.Event()

        def probe_health() -> None:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{ctl.port}/healthz", timeout=1) as r:
                        answer = str(r.status)
                except OSError as exc:
                    answer = str(exc)
                if answer != "200" or time.monotonic() - started > 1:
                    slow.append(f"/healthz: {answer} after {time.monotonic() - started:.2f}s")
                time.sleep(0.1)

        prober = threading.Thread(target=probe_health, daemon=True)
        prober.start()
        spinner = {"apiVersion": "example.com/v1", "kind": "Spinner", "metadata": {"name": "spin"}, "spec": {}}
        create(api, f"/apis/example.com/v1/namespaces/{namespace}/spinners", spinner)
        time.sleep(0.5)  # its hook is running now
        renewed = lease(api, namespace)["renewTime"]
        for i in range(3):
            create(api, kube.helloworlds(namespace), kube.hello_world(f"h{i}", f"W{i}"))
        for i in range(3):
            pod = kube.wait_for(lambda i=i: get(api, f"/api/v1/namespaces/{namespace}/pods/h{i}"), what=f"pod h{i}")
            assert pod["spec"]["containers"][0]["command"] == ["echo", f"Hello, W{i}!"]
        warning = kube.wait_for(
            lambda: [
                e
                for e in get(api, f"/api/v1/namespaces/{namespace}/events")["items"]
                if e["involvedObject"]["name"] == "spin" and e["reason"] == "HookTimeout"
            ],
            what="a HookTimeout Event on the spinner",
        )[0]
        assert warning["type"] == "Warning"
        assert "controllers.runaway" in warning["message"] and "timeout of 2s" in warning["message"]
        spec = kube.wait_for(lambda: lease(api, namespace), lambda s: s["renewTime"] != renewed, what="a renewal")
        assert spec["holderIdentity"] == "me"
        stop.set()
        prober.join(5)
        assert slow == []
        assert 'regokite_controller_hook_worker_restarts_total{reason="stuck"}' in ctl.metrics()
