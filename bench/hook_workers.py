"""What evaluating hooks in worker processes costs per call, and what it buys with several cores.

    python -m bench.hook_workers [--calls 2000]

1. The bench's fanout hook (about 0.1 ms of evaluation), in process and through one worker
   process (a pipe round trip with JSON both ways): p50 of each and the difference, the
   per-call overhead.
2. A CPU-heavy hook (about 5 ms) called from 4 threads: calls per second through 1 and 2
   worker processes.
3. Replicated data (`--objects`, default 10,000 ConfigMaps) mirrored in 1 worker process: the
   first call (the whole document sent), a call with nothing new, a call after a creation
   (merged in) and after an edit (the worker's data reloaded), and the worker's RSS.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import percentiles
from bench.controller_converge import HEAVY
from regokite import outline
from regokite.bundle import load_bundle
from regokite.clusterdata.store import ReplicaStore
from regokite.controllers.hook_workers import HookWorkers
from regokite.controllers.hooks import LocalHooks, resolve_hook
from regokite.controllers.schema import HookTarget
from regokite.engine import open_engine
from tests.controllers.fanout import CHILDREN, STATUS

REQUEST = {
    "controller": {"metadata": {"name": "fanout"}},
    "parent": {
        "apiVersion": "example.com/v1",
        "kind": "Fanout",
        "metadata": {"name": "p1", "namespace": "bench", "uid": "u1", "generation": 1},
        "spec": {"value": "v0"},
    },
    "children": {"ConfigMap.v1": {}},
    "related": {},
    "finalizing": False,
}


def timed(evaluate, hook, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        evaluate(hook, REQUEST)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--objects", type=int, default=10_000, help="replicated ConfigMaps for part 3")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "light").mkdir()
        (Path(tmp) / "light" / "fanout.rego").write_text(CHILDREN + STATUS)
        (Path(tmp) / "heavy").mkdir()
        (Path(tmp) / "heavy" / "fanout.rego").write_text(CHILDREN + HEAVY)
        light, heavy = (load_bundle([str(Path(tmp) / d)]) for d in ("light", "heavy"))
    hook = resolve_hook(HookTarget("fanout"), outline.packages(outline.outline(light.modules)))

    local = LocalHooks(open_engine(light))
    workers = HookWorkers(light, processes=1)
    timed(local.evaluate, hook, 200), timed(workers.evaluate, hook, 200)  # warm up
    here = percentiles(timed(local.evaluate, hook, args.calls))
    there = percentiles(timed(workers.evaluate, hook, args.calls))
    workers.close()
    print(f"fanout hook in process      : p50 {here['p50']:.3f} ms  p99 {here['p99']:.3f} ms")
    print(f"fanout hook, 1 worker       : p50 {there['p50']:.3f} ms  p99 {there['p99']:.3f} ms")
    print(f"per-call overhead (p50)     : {there['p50'] - here['p50']:.3f} ms")

    calls = max(40, args.calls // 20)
    for processes in (1, 2):
        pool = HookWorkers(heavy, processes=processes)
        pool.evaluate(hook, REQUEST)
        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as threads:
            list(threads.map(pool.evaluate, [hook] * calls, [REQUEST] * calls))
        elapsed = time.perf_counter() - t0
        pool.close()
        print(f"5 ms hook, {processes} process(es)   : {calls / elapsed:6.1f} calls/s ({calls} calls from 4 threads)")
    replicated(light, hook, args.objects)
    return 0


def configmap(i: int, rv: int) -> dict:
    meta = {"name": f"cm-{i}", "namespace": f"ns-{i % 100}", "resourceVersion": str(rv), "uid": f"u-{i}"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"key": "x" * 200, "n": str(i)}}


def replicated(bundle, hook, objects: int) -> None:
    store = ReplicaStore()
    store.declare("configmaps")
    for i in range(objects):
        store.put("configmaps", configmap(i, 1), namespaced=True)
    pool = HookWorkers(bundle, processes=1, store=store)

    def call() -> float:
        t0 = time.perf_counter()
        pool.evaluate(hook, REQUEST)
        return (time.perf_counter() - t0) * 1000

    first = call()
    idle = percentiles([call() / 1000 for _ in range(200)])["p50"]
    store.put("configmaps", configmap(objects, 1), namespaced=True)
    created = call()
    store.put("configmaps", configmap(0, 2), namespaced=True)
    edited = call()
    rss = Path(f"/proc/{pool.pids()[0]}/status").read_text().split("VmRSS:")[1].split()[0]
    pool.close()
    print(f"{objects:,} replicated objects, 1 worker process:")
    print(f"  first call (whole document) : {first:8.1f} ms")
    print(f"  call, nothing new (p50)     : {idle:8.3f} ms")
    print(f"  call after a creation       : {created:8.2f} ms")
    print(f"  call after an edit (reload) : {edited:8.2f} ms")
    print(f"  worker RSS                  : {int(rss) / 1024:8.1f} MiB")


if __name__ == "__main__":
    sys.exit(main())
