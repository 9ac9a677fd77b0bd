"""Replicated cluster data and audit at 10,000 objects, on a private control plane.

    python -m bench.cluster_data [--objects 10000] [--seconds 5] [--samples 20]

1. N ConfigMaps created in one namespace (8 client threads).
2. Admission without replication: the standalone shipped policies, closed-loop
   p50/p99 on one worker.
3. The same server plus a policy reading data.kubernetes.configmaps (the
   ConfigMaps replicated): time to /readyz (the initial list in), the worker's
   RSS, the same closed loop.
4. Change-to-visible: a new ConfigMap (merged into the engine at once) and a
   changed one (a data reload, at most every 0.5 s), from the API server's
   answer to the first review decided on it, p50/p99.
5. Audit --once of N Pods x the shipped policies: time and peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests" / "integration")]

import controlplane  # noqa: E402
import httpx  # noqa: E402
import kube  # noqa: E402

from bench.admission_load import closed_loop  # noqa: E402
from bench.common import POLICIES, fmt, percentiles, standalone_policies  # noqa: E402
from bench.controller_converge import make_namespace, rss  # noqa: E402
from tests.admission.reviews import deployment, review  # noqa: E402
from tests.admission.server import admission_server  # noqa: E402
from tests.processes import REGOKITE  # noqa: E402

NS = "bench"
REFS = """package admission.configmap_refs

match := {"rules": [{"operations": ["CREATE"], "apiGroups": ["apps"], "resources": ["deployments"]}]}

replicate := {"namespaced": ["v1/configmaps"]}

refs contains name if {
	some c in input.request.object.spec.template.spec.containers
	some source in c.envFrom
	name := source.configMapRef.name
}

deny contains sprintf("ConfigMap %s does not exist", [name]) if {
	some name in refs
	not data.kubernetes.configmaps[input.request.namespace][name]
}

deny contains sprintf("ConfigMap %s is blocked", [name]) if {
	some name in refs
	data.kubernetes.configmaps[input.request.namespace][name].metadata.labels.blocked == "true"
}
"""


def configmap(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i}", "labels": {"app": "bench", "index": str(i)}},
        "data": {"key": f"value-{i}", "config.yaml": "a: 1\nb: 2\n"},
    }


def pod(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "app", "image": "nginx" if i % 2 else "registry.k8s.io/pause:3.9"}]},
    }


def create_many(cluster: kube.Cluster, path: str, objects: list[dict]) -> float:
    started = time.perf_counter()

    def batch(part: list[dict]) -> None:
        with cluster.api_client() as api:
            for obj in part:
                kube.create(api, path, obj)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(batch, [objects[i::8] for i in range(8)]))
    return time.perf_counter() - started


def referring_review(name: str) -> dict:
    obj = deployment("web", labels={"app.kubernetes.io/name": "web", "owner": "team-a"})
    obj["metadata"]["namespace"] = NS
    pod_spec = obj["spec"]["template"]["spec"]
    pod_spec["securityContext"] = {"runAsNonRoot": True}
    pod_spec["containers"][0]["envFrom"] = [{"configMapRef": {"name": name}}]
    pod_spec["containers"][0]["resources"] = {"limits": {"cpu": "500m", "memory": "256Mi"}}
    obj["spec"]["template"]["metadata"]["labels"].update({"app.kubernetes.io/name": "web", "owner": "team-a"})
    return review(obj)


def load(server, seconds: float) -> dict:
    ctx = ssl.create_default_context(cafile=str(server.ca))
    url = f"{server.url}/validate"
    asyncio.run(closed_loop(url, ctx, 1.0, 2))  # warm
    _, stats = asyncio.run(closed_loop(url, ctx, seconds, 2))
    return stats


def worker_rss(pid: int) -> tuple[int, int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return rss(int(children[0]))


def visible(client: httpx.Client, body: dict, allowed: bool, since: float, timeout: float = 5.0) -> float:
    while True:
        answer = client.post("/validate", content=json.dumps(body)).json()["response"]
        if answer["allowed"] is allowed:
            return time.perf_counter() - since
        if time.perf_counter() - since > timeout:
            raise TimeoutError(f"not {'allowed' if allowed else 'denied'} after {timeout}s: {answer}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--samples", type=int, default=20)
    args = ap.parse_args()
    n = args.objects
    with tempfile.TemporaryDirectory(prefix="regokite-bench-") as tmp:
        tmpdir = Path(tmp)
        cp = controlplane.start(tmpdir / "cp")
        try:
            cluster = kube.Cluster.of(cp)
            with cluster.api_client() as api:
                make_namespace(api, NS)
            took = create_many(cluster, f"/api/v1/namespaces/{NS}/configmaps", [configmap(i) for i in range(n)])
            print(f"setup          : {n} ConfigMaps created in {took:5.1f} s")
            os.environ["KUBECONFIG"] = str(cp.kubeconfig)
            plain = standalone_policies()
            refs = tmpdir / "refs"
            refs.mkdir()
            (refs / "configmap_refs.rego").write_text(REFS)
            body = referring_review("cm-1")
            (tmpdir / "review.json").write_text(json.dumps(body))

            (tmpdir / "a").mkdir()
            with admission_server(plain, tmpdir / "a") as server:
                without = load(server, args.seconds)
                base_rss = worker_rss(server.process.pid)
            print(f"no replication : {fmt(without)}   worker RSS {base_rss[0]} MiB")

            (tmpdir / "b").mkdir()
            started = time.perf_counter()
            with admission_server([*plain, refs], tmpdir / "b", "--replicate-path", "kubernetes") as server:
                ready = time.perf_counter() - started
                with server.client() as client:
                    objects = client.get("/readyz").json()["replication"]["objects"]
                    assert client.post("/validate", content=json.dumps(body)).json()["response"]["allowed"]
                with_data = load(server, args.seconds)
                now, peak = worker_rss(server.process.pid)
                print(
                    f"replication    : {objects} objects; process start -> /readyz {ready:5.2f} s; "
                    f"worker RSS {now} MiB (peak {peak}, +{now - base_rss[0]} MiB)"
                )
                print(f"with replica   : {fmt(with_data)}   p99 {100 * (with_data['p99'] / without['p99'] - 1):+.0f}%")
                created, changed = [], []
                with cluster.api_client() as api, server.client() as client:
                    for s in range(args.samples):
                        probe = referring_review(f"new-{s}")
                        kube.create(
                            api,
                            f"/api/v1/namespaces/{NS}/configmaps",
                            {**configmap(0), "metadata": {"name": f"new-{s}"}},
                        )
                        created.append(visible(client, probe, True, time.perf_counter()))
                        target = f"/api/v1/namespaces/{NS}/configmaps/cm-{s}"
                        kube.merge_patch(api, target, {"metadata": {"labels": {"blocked": "true"}}})
                        changed.append(visible(client, referring_review(f"cm-{s}"), False, time.perf_counter()))
                print(f"new object     : change -> visible {fmt(percentiles(created))}")
                print(f"changed object : change -> visible {fmt(percentiles(changed))}")

            with cluster.api_client() as api:
                make_namespace(api, "audited")
            took = create_many(cluster, "/api/v1/namespaces/audited/pods", [pod(i) for i in range(n)])
            print(f"setup          : {n} Pods created in {took:5.1f} s")
            shipped = [POLICIES / "admission", POLICIES / "lib"]
            cmd = [*REGOKITE, "audit", "--once", "--no-reports", "--format", "json", "--jobs", "2"]
            cmd += [a for p in shipped for a in ("--policies", str(p))]
            started = time.perf_counter()
            done = subprocess.run(
                ["/usr/bin/time", "-f", "%M", *cmd],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            took = time.perf_counter() - started
            found = json.loads(done.stdout)
            peak_kib = int(done.stderr.strip().splitlines()[-1])
            print(
                f"audit --once   : {found['objects']} objects x the shipped policies "
                f"in {took:5.1f} s, peak RSS {peak_kib // 1024} MiB, {len(found['results'])} results"
            )
        finally:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
