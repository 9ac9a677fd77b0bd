"""Replicated cluster data and audit at scale, on a private control plane.

    python -m bench.cluster_data [--objects 10000] [--workers 1 2 4] [--seconds 5] [--samples 20] [--skip-audit]

1. N ConfigMaps created in one namespace (--create-threads client threads):
   how long the setup took.
2. Admission without replication: the standalone shipped policies, closed-loop
   p50/p99 on one worker.
3. The same server plus a policy reading data.kubernetes.configmaps (the
   ConfigMaps replicated): time to /readyz (the initial list in), the worker's
   RSS, the same closed loop.
4. Change-to-visible: a new ConfigMap (merged into the engine at once) and a
   changed one (a data reload, at most every 0.5 s), from the API server's
   answer to the first review decided on it, p50/p99.
5. Flat memory: the replicating server with each --workers count: time until
   every worker has the objects, RSS of the supervisor, the replica feeder
   (named by its log line; "-" for a baseline without one), each worker and
   in total, the total's PSS (pages a fork shares counted once), and the
   LIST requests (each page one) and open WATCHes on configmaps it made,
   from the API server's own metrics (the design is one list+watch per
   resource per pod). --baseline-root DIR runs steps 2-5 with the regokite
   package under DIR first too, for a side-by-side in one run.
6. Audit --once of N objects (the ConfigMaps, judged by a policy matching
   them): time and peak RSS; then continuous audit: time to its first full
   pass and its peak RSS.

Step 5 runs each server with the default --watchdog and --worker-memory-limit,
and reports the workers the supervisor killed as stuck (s), over memory (m),
or saw exit (x), from its log, and when every worker's engine had the whole
replica ("loaded s": the `cluster data loaded into the engine` log lines).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from bench.common import fmt, percentiles, standalone_policies  # noqa: E402
from bench.controller_converge import make_namespace, rss  # noqa: E402
from tests.admission.reviews import deployment, review  # noqa: E402
from tests.admission.server import admission_server  # noqa: E402
from tests.ports import free_port  # noqa: E402
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


AUDITED = """package audit.configmap_index

match := {"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "resources": ["configmaps"]}]}

deny contains sprintf("ConfigMap %s: index %s is a round thousand", [input.request.name, index]) if {
	index := input.request.object.metadata.labels.index
	endswith(index, "000")
}
"""


def create_many(cluster: kube.Cluster, path: str, objects: list[dict], threads: int = 8) -> float:
    started = time.perf_counter()

    def batch(part: list[dict]) -> None:
        with cluster.api_client() as api:
            for obj in part:
                kube.create(api, path, obj)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(batch, [objects[i::threads] for i in range(threads)]))
    return time.perf_counter() - started


def api_requests(cluster: kube.Cluster, resource: str) -> dict[str, float]:
    assert cluster.token and cluster.ca_file
    return kube.list_and_watch_requests(cluster.server, cluster.token, cluster.ca_file, resource)


def referring_review(name: str) -> dict:
    obj = deployment("web", labels={"app.kubernetes.io/name": "web", "owner": "team-a"})
    obj["metadata"]["namespace"] = NS
    pod_spec = obj["spec"]["template"]["spec"]
    pod_spec["securityContext"] = {"runAsNonRoot": True}
    pod_spec["containers"][0]["envFrom"] = [{"configMapRef": {"name": name}}]
    pod_spec["containers"][0]["resources"] = {"limits": {"cpu": "500m", "memory": "256Mi"}}
    obj["spec"]["template"]["metadata"]["labels"].update({"app.kubernetes.io/name": "web", "owner": "team-a"})
    return review(obj)


def load(server, seconds: float, connections: int = 2) -> dict:
    ctx = ssl.create_default_context(cafile=str(server.ca))
    url = f"{server.url}/validate"
    asyncio.run(closed_loop(url, ctx, 1.0, connections))  # warm
    _, stats = asyncio.run(closed_loop(url, ctx, seconds, connections))
    return stats


def worker_rss(server) -> tuple[int, int]:
    """(RSS, peak) in MiB of the server's first worker: a child that is not the replica feeder."""
    children = [
        int(c) for c in Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    ]
    feeder = feeder_pid(server.log)
    return rss(next(c for c in children if c != feeder))


def visible(client: httpx.Client, body: dict, allowed: bool, since: float, timeout: float = 5.0) -> float:
    while True:
        answer = client.post("/validate", content=json.dumps(body)).json()["response"]
        if answer["allowed"] is allowed:
            return time.perf_counter() - since
        if time.perf_counter() - since > timeout:
            raise TimeoutError(f"not {'allowed' if allowed else 'denied'} after {timeout}s: {answer}")


def process_tree_rss(pid: int) -> dict[int, tuple[int, int]]:
    """(RSS, peak RSS) in MiB of `pid` and each of its children."""
    found = {pid: rss(pid)}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found[int(child)] = rss(int(child))
    return found


def pss(pid: int) -> int:
    """Proportional set size in MiB: pages shared with other processes (a fork's) count in part."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) // 1024
    return 0


def feeder_pid(log: Path) -> int | None:
    """The replica feeder's pid, from its `replica feeder serving` line (the last, if it was replaced)."""
    found = None
    for line in log.read_text(errors="replace").splitlines():
        if '"msg": "replica feeder serving"' in line:
            found = json.loads(line).get("pid")
    return found


LOADED = "cluster data loaded into the engine"


def marked(log: Path, message: str) -> int:
    """How many log lines say `message`."""
    return sum(f'"msg": "{message}"' in line for line in log.read_text(errors="replace").splitlines())


def kills(log: Path) -> str:
    """Workers the supervisor killed (watchdog, memory) or saw exit, from its log lines."""
    lines = log.read_text(errors="replace").splitlines()
    stuck = sum("stuck in one review" in line for line in lines)
    memory = sum("over its memory limit" in line for line in lines)
    exited = sum("admission worker exited" in line for line in lines)
    return f"{stuck}/{memory}/{exited}"


def loads(log: Path) -> str:
    """Each worker's first load into its engine, from its line: seconds/steps, and the memory allowance."""
    found = [json.loads(line) for line in log.read_text(errors="replace").splitlines() if LOADED in line]
    return ", ".join(
        f"{r['seconds']:.1f} s/{r['steps']} steps, allowance {r.get('replica_allowance_bytes', 0) // 2**20} MiB"
        for r in found
    )


def replicas_held(log: Path, code: Path) -> int:
    """Workers holding the replica: each logs `replica received` once it has it (before the feeder,
    each worker listed for itself and logged `replicated`)."""
    feeds = (code / "regokite" / "kube" / "replica_feed.py").exists()
    marker = '"msg": "replica received"' if feeds else '"msg": "replicated"'
    return sum(marker in line for line in log.read_text(errors="replace").splitlines())


@contextlib.contextmanager
def running_code(code: Path):
    """Admission servers started meanwhile run the regokite package under `code` (the cwd is not on sys.path)."""
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ.update(PYTHONPATH=str(code), PYTHONSAFEPATH="1")
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


def flat_memory(
    cluster: kube.Cluster, plain: list[Path], refs: Path, home: Path, workers: int, code: Path = ROOT
) -> dict:
    """A replicating server with `workers` workers: time until all hold the objects, RSS, list+watch requests."""
    before = api_requests(cluster, "configmaps")
    home.mkdir()
    started = time.perf_counter()
    # the default --watchdog and --worker-memory-limit: a worker they kill is counted below
    args = ("--workers", str(workers), "--reload-interval", "1")
    with running_code(code), admission_server([*plain, refs], home, *args, ready_timeout=1800) as server:
        while replicas_held(server.log, code) < workers:
            if server.process.poll() is not None:
                raise RuntimeError(f"admission server exited:\n{server.logs()[-3000:]}")
            time.sleep(0.2)
        ready = time.perf_counter() - started
        # the code under test (this tree or an older --baseline-root) loads each engine itself where it has it
        if any("ReplicaLoader" in f.read_text() for f in (code / "regokite" / "admission").glob("*.py")):
            while marked(server.log, LOADED) < workers:  # each worker loads its engine itself: until all have
                if server.process.poll() is not None or time.perf_counter() - started > 1800:
                    raise RuntimeError(f"engines not loaded:\n{server.logs()[-3000:]}")
                time.sleep(0.2)
        loaded = time.perf_counter() - started
        # the code before loaded each engine on its first review: a closed loop reaches them all
        load(server, 5.0, connections=8 * workers)
        # an informer opens its watch only after handing the listed objects to its handlers
        after = kube.wait_for(
            lambda: api_requests(cluster, "configmaps"),
            lambda seen: seen["WATCH"] - before["WATCH"] >= 1,
            what="the watches",
            timeout=600,
        )
        time.sleep(5)  # the other workers' watches, if each has its own
        after = api_requests(cluster, "configmaps")
        with server.client() as client:
            objects = client.get("/readyz").json()["replication"]["objects"]
        memory = process_tree_rss(server.process.pid)
        shared_out = sum(pss(p) for p in memory)
    supervisor = memory.pop(server.process.pid)
    feeder = memory.pop(feeder_pid(server.log) or 0, None)
    return {
        "code": "baseline" if code != ROOT else "this",
        "workers": workers,
        "objects": objects,
        "ready": ready,
        "loaded": loaded,
        "kills": kills(server.log),
        "loads": loads(server.log),
        "supervisor": supervisor,
        "workers_rss": sorted(memory.values()),
        "feeder": feeder,
        "total": supervisor[0] + (feeder[0] if feeder else 0) + sum(r for r, _ in memory.values()),
        "pss": shared_out,
        "lists": after["LIST"] - before["LIST"],
        "watches": after["WATCH"] - before["WATCH"],
    }


def print_memory(rows: list[dict]) -> None:
    print("\nflat memory: replicated ConfigMaps in the admission server (RSS MiB, peak in brackets)")
    print(
        " code      workers  objects  ready s  loaded s  kills s/m/x  supervisor  feeder     workers"
        "                     total  (PSS)  LIST requests  watches"
    )
    for row in rows:
        if row["loads"]:
            print(f" engine loads ({row['workers']} workers): {row['loads']}")
        each = ", ".join(f"{now} ({peak})" for now, peak in row["workers_rss"])
        sup = f"{row['supervisor'][0]} ({row['supervisor'][1]})"
        feeder = f"{row['feeder'][0]} ({row['feeder'][1]})" if row["feeder"] else "-"
        print(
            f" {row['code']:8s}  {row['workers']:7d}  {row['objects']:7d}  {row['ready']:7.1f}  {row['loaded']:8.1f}  "
            f"{row['kills']:>11s}  {sup:>10s}  "
            f"{feeder:>9s}  {each:26s}"
            f"  {row['total']:5d}  ({row['pss']:4d})  {row['lists']:13.0f}  {row['watches']:7.0f}"
        )


def audit_once(policies: list[Path]) -> tuple[float, int, dict]:
    cmd = [*REGOKITE, "audit", "--once", "--no-reports", "--format", "json", "--jobs", "2"]
    cmd += [a for p in policies for a in ("--policies", str(p))]
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    took = time.perf_counter() - started
    peak_kib = int(done.stderr.strip().splitlines()[-1])
    return took, peak_kib // 1024, json.loads(done.stdout)


def audit_continuous(policies: list[Path], n: int, timeout: float = 1800) -> tuple[float, int, int]:
    """Continuous audit until its first full pass covers `n` objects: time, peak RSS (MiB), objects."""
    port = free_port()
    cmd = [*REGOKITE, "audit", "--no-reports", "--metrics-port", str(port)]
    cmd += [a for p in policies for a in ("--policies", str(p))]
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    try:
        covered = 0
        while covered < n and time.perf_counter() - started < timeout:
            time.sleep(0.5)
            if proc.poll() is not None:
                raise RuntimeError(f"audit exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                for line in httpx.get(f"http://127.0.0.1:{port}/metrics").text.splitlines():
                    if line.startswith("regokite_audit_objects "):
                        covered = int(float(line.split()[1]))
        took = time.perf_counter() - started
        return took, rss(proc.pid)[1], covered
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--create-threads", type=int, default=16)
    ap.add_argument("--skip-latency", action="store_true", help="leave out steps 2-4")
    ap.add_argument("--skip-audit", action="store_true", help="leave out step 6")
    ap.add_argument(
        "--baseline-root",
        type=Path,
        help="also run step 5 with the regokite package under this directory (e.g. `git archive` of an older commit)",
    )
    ap.add_argument("--baseline-workers", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    n = args.objects
    print(f"load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="regokite-bench-") as tmp:
        tmpdir = Path(tmp)
        cp = controlplane.start(tmpdir / "cp")
        try:
            cluster = kube.Cluster.of(cp)
            with cluster.api_client() as api:
                make_namespace(api, NS)
            objects = [configmap(i) for i in range(n)]
            took = create_many(cluster, f"/api/v1/namespaces/{NS}/configmaps", objects, args.create_threads)
            del objects
            print(f"setup          : {n} ConfigMaps created in {took:5.1f} s ({args.create_threads} client threads)")
            os.environ["KUBECONFIG"] = str(cp.kubeconfig)
            plain = standalone_policies()
            refs = tmpdir / "refs"
            refs.mkdir()
            (refs / "configmap_refs.rego").write_text(REFS)
            if not args.skip_latency:
                codes = [c for c in (args.baseline_root, ROOT) if c is not None]
                for i, code in enumerate(codes):
                    print(f"steps 2-4 with the code under {code}:")
                    (tmpdir / f"latency-{i}").mkdir()
                    with running_code(code):
                        latency(cluster, plain, refs, tmpdir / f"latency-{i}", args, i * args.samples)
            rows = []
            for code in [c for c in (args.baseline_root, ROOT) if c is not None]:
                for w in args.baseline_workers if code != ROOT else args.workers:
                    rows.append(flat_memory(cluster, plain, refs, tmpdir / f"{code.name}-w{w}", w, code))
                    print_memory(rows[-1:])
            print_memory(rows)
            if not args.skip_audit:
                audit_steps(tmpdir, n)
        finally:
            cp.stop()
    print(f"load average at end: {os.getloadavg()}")
    return 0


def audit_steps(tmpdir: Path, n: int) -> None:
    """Step 6: audit --once, then continuous audit, of the n ConfigMaps."""
    audited = tmpdir / "audited"
    audited.mkdir()
    (audited / "configmap_index.rego").write_text(AUDITED)
    took, peak, found = audit_once([audited])
    print(
        f"\naudit --once   : {found['objects']} objects in {took:5.1f} s, peak RSS {peak} MiB, "
        f"{len(found['results'])} results"
    )
    took, peak, covered = audit_continuous([audited], n)
    print(f"audit (continuous): first full pass over {covered} objects in {took:5.1f} s, peak RSS {peak} MiB")


def latency(
    cluster: kube.Cluster, plain: list[Path], refs: Path, tmpdir: Path, args: argparse.Namespace, first: int = 0
) -> None:
    """Steps 2-4: admission with and without the replica, and change-to-visible (of ConfigMaps `first`...)."""
    body = referring_review(f"cm-{args.objects - 1}")  # a ConfigMap no run changes
    (tmpdir / "a").mkdir()
    with admission_server(plain, tmpdir / "a") as server:
        without = load(server, args.seconds)
        base_rss = worker_rss(server)
    print(f"no replication : {fmt(without)}   worker RSS {base_rss[0]} MiB")

    (tmpdir / "b").mkdir()
    started = time.perf_counter()
    with admission_server(
        [*plain, refs], tmpdir / "b", "--replicate-path", "kubernetes", "--worker-memory-limit", "0", ready_timeout=1800
    ) as server:
        ready = time.perf_counter() - started
        with server.client() as client:
            objects = client.get("/readyz").json()["replication"]["objects"]
            assert client.post("/validate", content=json.dumps(body)).json()["response"]["allowed"]
        with_data = load(server, args.seconds)
        now, peak = worker_rss(server)
        print(
            f"replication    : {objects} objects; process start -> /readyz {ready:5.2f} s; "
            f"worker RSS {now} MiB (peak {peak}, +{now - base_rss[0]} MiB)"
        )
        print(f"with replica   : {fmt(with_data)}   p99 {100 * (with_data['p99'] / without['p99'] - 1):+.0f}%")
        created, changed = [], []
        with cluster.api_client() as api, server.client() as client:
            for s in range(first, first + args.samples):  # objects no earlier run created or changed
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


if __name__ == "__main__":
    sys.exit(main())
