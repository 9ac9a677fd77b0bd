"""Composite controller convergence on a real API server (private control plane).

    python -m bench.controller_converge [--parents 500] [--workers 8] [--samples 50]
    python -m bench.controller_converge --heavy-hook --hook-processes 1,2 --parents 200 --no-peer

1. Bare client: the writes a controller must make for N parents x 3 children
   (N parent creates, 3N server-side applies, N status patches) from 8
   threads: the API server's own limit on this machine.
2. regokite: the same N parents created the same way, timed until every
   child exists and every parent's status reports 3 children.
3. Reaction latency: patch one parent's spec, time until the child shows the
   new value (seen through a watch), p50/p99.
   Beside it, the API server's floor: a ConfigMap patch until its own watch
   event (a controller's reaction is two such round trips).
4. The controller's resident memory (VmRSS / VmHWM), and its hook processes'.
5. A peer: the same job done by a Kopf operator (bench/kopf_fanout.py), in
   the same run, measured the same way (skipped, saying so, without kopf:
   `pip install kopf`).

With `--heavy-hook` the hook also burns about 5 ms of evaluation per sync
(a comprehension over 5000 numbers); `--hook-processes 1,2` runs steps 2-4
once per number of hook evaluation processes, each in its own namespace.

    python -m bench.controller_converge --heavy-hook --replicas 1,2,3 --parents 600 --no-peer

`--replicas 1,2,3` runs steps 2-4 once per number of `regokite controller
--shards` replicas (each with one hook process), each in its own namespace,
and prints every replica's share and RSS.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests" / "integration")]

import controlplane  # noqa: E402
import kube  # noqa: E402

from bench.common import percentiles  # noqa: E402
from tests.controllers.fanout import CHILDREN, STATUS, controller  # noqa: E402
from tests.controllers.process import ControllerProcess  # noqa: E402

HEAVY = """
status := {"configMaps": count(input.children["ConfigMap.v1"]), "burn": burn}

burn := count([x | some x in numbers.range(1, 5000); x % 7 == 0])
"""

THREADS = 8


def parent(ns: str, name: str, value: str = "v0") -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Fanout",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"value": value},
    }


def make_namespace(api, name: str) -> None:
    kube.create(api, "/api/v1/namespaces", {"metadata": {"name": name}})


def bare_client(api, ns: str, n: int) -> float:
    """What a controller must write for n parents, done directly."""
    parents = f"/apis/example.com/v1/namespaces/{ns}/fanouts"

    def one(i: int) -> None:
        p = kube.create(api, parents, parent(ns, f"p{i}"))
        ref = {
            "apiVersion": "example.com/v1",
            "kind": "Fanout",
            "name": p["metadata"]["name"],
            "uid": p["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        for c in range(3):
            name = f"p{i}-{c}"
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns, "ownerReferences": [ref]},
                "data": {"value": "v0"},
            }
            kube.apply(api, f"/api/v1/namespaces/{ns}/configmaps/{name}", body, "bench", force=True)
        kube.request(
            api,
            "PATCH",
            f"{parents}/p{i}/status",
            [{"op": "add", "path": "/status", "value": {"configMaps": 3}}],
            content_type="application/json-patch+json",
        )

    t0 = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(one, range(n)))
    return time.perf_counter() - t0


def converge(api, ns: str, n: int, timeout: float = 600) -> tuple[float, float]:
    """Create n parents; return (seconds to create them, seconds until converged)."""
    parents = f"/apis/example.com/v1/namespaces/{ns}/fanouts"
    t0 = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: kube.create(api, parents, parent(ns, f"p{i}")), range(n)))
    created = time.perf_counter() - t0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cms = kube.get(api, f"/api/v1/namespaces/{ns}/configmaps")["items"]
        owned = sum(1 for c in cms if c["metadata"].get("ownerReferences"))
        if owned >= 3 * n:
            ps = kube.get(api, parents)["items"]
            if sum(1 for p in ps if (p.get("status") or {}).get("configMaps") == 3) == n:
                return created, time.perf_counter() - t0
        time.sleep(0.2)
    raise TimeoutError("did not converge")


def reaction_latency(api, ns: str, n: int, samples: int, direct: bool = False) -> list[float]:
    """Patch a parent's spec, time until its third child shows the value (seen through a watch). With
    `direct`, patch a ConfigMap itself and time until the watch shows it: one write and one watch event,
    the API server's own floor under a controller's reaction (which takes two of each)."""
    seen: dict[tuple[str, str], float] = {}
    cond = threading.Condition()
    stop = threading.Event()
    rv = kube.get(api, f"/api/v1/namespaces/{ns}/configmaps", limit=1)["metadata"]["resourceVersion"]

    def watch() -> None:
        try:
            _watch()
        except Exception:  # the control plane stops under it at the end
            if not stop.is_set():
                raise

    def _watch() -> None:
        nonlocal rv
        while not stop.is_set():
            for ev in kube.watch(api, f"/api/v1/namespaces/{ns}/configmaps", resource_version=rv, timeout_seconds=60):
                obj = ev["object"]
                rv = obj["metadata"].get("resourceVersion", rv)
                key = (obj["metadata"]["name"], (obj.get("data") or {}).get("value"))
                with cond:
                    seen.setdefault(key, time.perf_counter())
                    cond.notify_all()
                if stop.is_set():
                    return

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(0.5)
    latencies = []
    for s in range(samples):
        i = s % n
        value = f"s{s}"
        t0 = time.perf_counter()
        if direct:
            kube.merge_patch(api, f"/api/v1/namespaces/{ns}/configmaps/probe", {"data": {"value": value}})
        else:
            kube.merge_patch(api, f"/apis/example.com/v1/namespaces/{ns}/fanouts/p{i}", {"spec": {"value": value}})
        key = ("probe", value) if direct else (f"p{i}-2", value)
        with cond:
            ok = cond.wait_for(lambda key=key: key in seen, timeout=30)
        if not ok:
            raise TimeoutError(f"sample {s}: no child update")
        latencies.append(seen[key] - t0)
    stop.set()
    return latencies


def rss(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        fields[k] = v.strip()
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def counted(metrics: str) -> dict[str, float]:
    """Sums from a controller's /metrics: syncs, writes, and the seconds spent in syncs and in hooks."""
    names = {
        "regokite_controller_reconciles_total{": "syncs",
        "regokite_controller_writes_total{": "writes",
        "regokite_controller_reconcile_duration_seconds_sum{": "sync_s",
        "regokite_controller_policy_evaluation_duration_seconds_sum{": "hook_s",
        "regokite_controller_policy_evaluation_duration_seconds_count{": "hooks",
    }
    found = dict.fromkeys(names.values(), 0.0)
    for line in metrics.splitlines():
        for prefix, name in names.items():
            if line.startswith(prefix):
                found[name] += float(line.rsplit(" ", 1)[1])
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of `pid` and the processes below it (hook evaluation), so far."""
    total = 0
    for p in [pid, *descendants(pid)]:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (the controller's fork server and hook evaluation processes)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:  # a thread that ended meanwhile
            continue
        for child in children:
            found += [int(child), *descendants(int(child))]
    return found


def measure(api, ns: str, n: int, samples: int, pid: int, bare: float, who: str, metrics=None) -> dict:
    """Converge n parents in `ns`, then reaction latency and RSS of process `pid`; print each beside the bare client."""
    found = converge_and_react(api, ns, n, samples, bare, who, metrics)
    now, peak = rss(pid)
    below = sum(rss(p)[0] for p in descendants(pid))
    print(
        f"{'  RSS':<15}: {now} MiB now, {peak} MiB peak ({n} parents, {3 * n} children); processes below: {below} MiB"
    )
    return {**found, "rss_mib": now}


def converge_and_react(api, ns: str, n: int, samples: int, bare: float, who: str, metrics=None) -> dict:
    """With `metrics` (a regokite controller's /metrics), also where a reaction's time goes."""
    created, converged = converge(api, ns, n)
    print(
        f"{who:<15}: created {n} parents in {created:6.2f} s; converged "
        f"({3 * n} children, {n} statuses) {converged:6.2f} s after the first create "
        f"({converged / bare:4.2f}x the bare client)"
    )
    before = counted(metrics()) if metrics else None
    stats = percentiles(reaction_latency(api, ns, n, samples))
    print(f"{'  reaction':<15}: parent patch -> child updated p50 {stats['p50']:6.1f} ms  p99 {stats['p99']:6.1f} ms")
    if before is not None:
        after = counted(metrics())
        d = {k: after[k] - before[k] for k in after}
        print(
            f"{'':<15}  while reacting: {d['syncs']:.0f} syncs of {1000 * d['sync_s'] / max(1, d['syncs']):.1f} ms "
            f"on average, their hooks {1000 * d['hook_s'] / max(1, d['hooks']):.1f} ms"
        )
    return {"converge_s": converged, "latency_ms": stats}


def sharded(api, cp, tmpdir: Path, n: int, count: int, args, bare: float) -> dict:
    """Steps 2-4 with `count` replicas of `regokite controller --shards` sharing the parents."""
    ns = f"shards-{count}"
    make_namespace(api, ns)
    extra = ["--shards", "--leader-election-namespace", ns, "--hook-processes", "1"]
    extra += ["--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3"]
    extra += ["--leader-election-retry-period", "0.5"]
    replicas = [
        ControllerProcess(
            cp.kubeconfig,
            policies=[tmpdir / "policies"],
            controllers=[tmpdir / "controller.yaml"],
            namespace=ns,
            workers=args.workers,
            extra=[*extra, "--leader-election-id", f"r{i}"],
            log_level="info",
        )
        for i in range(count)
    ]
    for r in replicas:
        r.__enter__()
    try:
        view = [f"r{i}" for i in range(count)]
        for r in replicas:
            kube.wait_for(
                lambda r=r: r.readiness().get("shards", {}),
                lambda s: s.get("view") == view and s.get("agreed"),
                what="the replicas agree",
            )
        cpu_before = [cpu_seconds(r.proc.pid) for r in replicas]
        found = converge_and_react(api, ns, n, args.samples, bare, f"regokite x{count}")
        shares = []
        for i, r in enumerate(replicas):
            cpu = cpu_seconds(r.proc.pid) - cpu_before[i]
            metrics = r.metrics().splitlines()
            owned = next(float(line.split()[1]) for line in metrics if line.startswith("regokite_shard_owned_objects "))
            now, peak = rss(r.proc.pid)
            below = sum(rss(p)[0] for p in descendants(r.proc.pid))
            shares.append({"owned": owned, "cpu_s": cpu, "rss_mib": now, "peak_mib": peak, "hook_processes_mib": below})
            print(
                f"{f'  replica r{i}':<15}: owns {owned:4.0f} parents; CPU {cpu:5.2f} s (hooks included); "
                f"RSS {now} MiB ({peak} peak), hook processes {below} MiB"
            )
        return {**found, "replicas": shares}
    finally:
        for r in replicas:
            r.stop()


def kopf_peer(api, cp, n: int, samples: int, bare: float) -> dict | None:
    if importlib.util.find_spec("kopf") is None:
        print("kopf           : not installed (pip install kopf): no peer in this run")
        return None
    make_namespace(api, "kopf")
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
    argv = [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "kopf", "--quiet"]
    log = open(Path(cp.kubeconfig).parent / "kopf.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*argv, str(ROOT / "bench" / "kopf_fanout.py")], env=env, stdout=log, stderr=log)
    try:
        return measure(api, "kopf", n, samples, proc.pid, bare, "kopf")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parents", type=int, default=500)
    ap.add_argument("--workers", type=int, default=8)  # regokite controller's default
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--no-peer", action="store_true", help="skip the Kopf operator")
    ap.add_argument("--heavy-hook", action="store_true", help="the hook burns about 5 ms of evaluation per sync")
    ap.add_argument("--hook-processes", default="", help="comma-separated counts, one controller run each")
    ap.add_argument("--replicas", default="", help="comma-separated counts of --shards replicas, one run each")
    args = ap.parse_args()
    n = args.parents
    policy = CHILDREN + (HEAVY if args.heavy_hook else STATUS)
    processes = [int(x) for x in args.hook_processes.split(",") if x] or [None]

    with tempfile.TemporaryDirectory(prefix="regokite-bench-") as tmp:
        tmpdir = Path(tmp)
        (tmpdir / "policies").mkdir()
        (tmpdir / "policies" / "fanout.rego").write_text(policy)
        (tmpdir / "controller.yaml").write_text(controller("example.com"))
        cp = controlplane.start(tmpdir / "cp")
        try:
            cluster = kube.Cluster(cp.kubeconfig, cp.server, cp.ca_file, cp.token, cp.etcd_url)
            with cluster.api_client() as api:
                kube.install_crd(api, kube.crd_manifest("example.com", "Fanout"))
                make_namespace(api, "bare")
                bare = bare_client(api, "bare", n)
                writes = n * 5
                rate = writes / bare
                print(f"bare client    : {n} parents x 3 children, {writes} writes in {bare:6.2f} s ({rate:6.0f}/s)")
                kube.create(api, "/api/v1/namespaces/bare/configmaps", {"metadata": {"name": "probe"}})
                floor = percentiles(reaction_latency(api, "bare", n, args.samples, direct=True))
                print(
                    f"{'  API floor':<15}: ConfigMap patch -> its watch event p50 {floor['p50']:6.1f} ms  "
                    f"p99 {floor['p99']:6.1f} ms (a controller's reaction is two of these)"
                )

                runs = {}
                for count in processes:
                    ns = "ctl" if count is None else f"ctl-p{count}"
                    make_namespace(api, ns)
                    with ControllerProcess(
                        cp.kubeconfig,
                        policies=[tmpdir / "policies"],
                        controllers=[tmpdir / "controller.yaml"],
                        namespace=ns,
                        workers=args.workers,
                        extra=[] if count is None else ["--hook-processes", str(count)],
                        log_level="info",  # as deployed (the Kopf peer runs --quiet)
                    ) as ctl:
                        who = "regokite" if count is None else f"regokite p={count}"
                        runs[who] = measure(api, ns, n, args.samples, ctl.proc.pid, bare, who, ctl.metrics)
                        errors = [r for r in ctl.log_records() if r.get("msg") == "sync failed"]
                        c = counted(ctl.metrics())
                        print(
                            f"{'  work':<15}: {c['syncs']:.0f} syncs, {c['writes']:.0f} writes "
                            f"({c['syncs'] / n:.2f} syncs per parent, sampling included); sync errors: {len(errors)}; "
                            f"a sync {1000 * c['sync_s'] / c['syncs']:.1f} ms on average, "
                            f"its hook {1000 * c['hook_s'] / c['hooks']:.1f} ms"
                        )
                for count in [int(x) for x in args.replicas.split(",") if x]:
                    runs[f"{count} replicas"] = sharded(api, cp, tmpdir, n, count, args, bare)
                ours = next(iter(runs.values()))
                peer = None if args.no_peer else kopf_peer(api, cp, n, args.samples, bare)
                if peer:
                    print(f"regokite vs kopf: converged {peer['converge_s'] / ours['converge_s']:4.2f}x faster")
                print(json.dumps({"bare_s": bare, "regokite": runs, "kopf": peer}))
        finally:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
