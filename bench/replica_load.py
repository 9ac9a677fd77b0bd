"""An admission worker's engine loading the replica, in one process: in a review (the code before) or in steps.

    python -m bench.replica_load [--objects 100000] [--rounds 2]

Each mode runs in a process of its own (its peak RSS its own): N ConfigMaps in
a TextReplicaStore taken whole (as a worker's mirror takes the feeder's copy),
the first load, then one changed ConfigMap and the reload it causes. `inline`
is an engine that loads inside its evaluation (`follow(store)`), `steps` one
whose loads are `load_replica`'s steps (`follow(store, stepped=True)`), run
back to back here as a worker's ReplicaLoader runs them between reviews: the
longest step is the longest a review may wait for one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import TextReplicaStore
from regokite.engine.embedded import EmbeddedEngine

END = object()
POLICY = "package bench\n\nconfigmaps := count(data.kubernetes.configmaps.bench)\n"


def configmap(i: int, version: str = "1") -> dict:
    meta = {
        "name": f"cm-{i}",
        "namespace": "bench",
        "uid": f"6c1f0a6e-1d1b-4a55-9c52-{i:012d}",
        "resourceVersion": version,
        "creationTimestamp": "2026-11-26T23:00:00Z",
        "labels": {"app": "bench", "index": str(i)},
    }
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"key": f"value-{i}", "b": "a: 1\n"}}


def rss_mib() -> tuple[int, int]:
    """(RSS, peak RSS) of this process in MiB."""
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))  # noqa: SIM115
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def measure(mode: str, n: int) -> str:
    listed = TextReplicaStore()
    for i in range(n):
        listed.put("configmaps", configmap(i), namespaced=True)
    store = TextReplicaStore()
    store.replace(listed.document)
    text_mib = store.text_bytes() / 2**20
    del listed
    engine = EmbeddedEngine(Bundle((Module("bench.rego", POLICY),)))
    engine.follow(store, stepped=mode == "steps")
    start, _ = rss_mib()

    def load() -> tuple[float, float]:
        """(seconds, longest step) of a load and the evaluation after it."""
        began, longest = time.perf_counter(), 0.0
        if mode == "steps":
            steps = engine.load_replica()
            while True:
                step = time.perf_counter()
                if next(steps, END) is END:
                    break
                longest = max(longest, time.perf_counter() - step)
        assert engine.evaluate("data.bench.configmaps") == n
        took = time.perf_counter() - began
        return took, longest if mode == "steps" else took

    first, first_step = load()
    loaded, _ = rss_mib()
    store.put("configmaps", configmap(5, version="2"), namespaced=True)
    again, again_step = load()
    now, peak = rss_mib()
    return (
        f"{mode:6s}  text {text_mib:4.1f} MiB  first load {first:5.2f} s (longest step {first_step:4.2f})  "
        f"reload {again:5.2f} s (longest step {again_step:4.2f})  RSS {start} -> {loaded} -> {now} MiB, peak {peak}"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mode", choices=["inline", "steps"], help=argparse.SUPPRESS)  # one process's part
    args = ap.parse_args()
    if args.mode:
        print(measure(args.mode, args.objects), flush=True)
        return 0
    print(f"load average at start: {os.getloadavg()}")
    for _ in range(args.rounds):
        for mode in ("inline", "steps"):
            cmd = [sys.executable, "-m", "bench.replica_load", "--objects", str(args.objects), "--mode", mode]
            subprocess.run(cmd, check=True)
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
