"""Composite controller convergence on a real API server (private control plane), as ratios to the
API server's own floor in the same run.

    python -m bench.controller_converge [--parents 500] [--workers 8] [--samples 50]
    python -m bench.controller_converge --parents 10000
    python -m bench.controller_converge --heavy-hook --hook-processes 1,2 --parents 200 --no-peer

1. The floor (bench.api_floor): the writes the job needs (per parent its
   create, 3 server-side applies, 1 status patch) made directly, swept over
   1..32 client threads, each parent's writes in sequence or pipelined, at
   `--sweep-parents` parents; the fastest two run again at `--parents` when
   that is larger, and the best is the floor. At the floor's concurrency the
   writes Metacontroller's contract makes (a 6th per parent: the creating
   sync's status, of no children yet) are timed beside the job's 5 (the
   fastest of 3 runs of each, at up to 1,000 parents), and the same under
   the two watches any controller of the job holds (parents and children,
   their events read and decoded: api_floor.watching); each converge ratio
   is also shown divided by those ratios.
   Beside it, the latency floor: a ConfigMap patch until its own watch event
   (a controller's reaction is two such round trips plus the hook), and the
   reaction floor: a bare client's reaction (bench.api_floor's `react`: on
   the parent's event, its three children's applies at once, then the status;
   no cache, queue or hook), sampled as step 3 samples a controller's. Three
   applies at once take the API server longer than one patch, so a
   reaction's floor is that, not twice the write-to-event latency.
2. regokite: the same N parents created from 8 threads, timed from the first
   create until every parent's status reports 3 children (seen through a
   watch; the children are counted after).
3. Reaction latency: once the operator is idle (`settle`: the syncs its own
   last writes bring have run), patch one parent's spec, time until its
   three children show the new value (seen through a watch), p50/p99; 0.2 s
   between samples, so that each is one reaction, not also the last one's
   tail; as ratios to the write-to-event p50 and to the bare client's
   reaction p50.
4. CPU seconds of every process during each phase (API server, etcd,
   controller-manager, this bench, the controller with its hook processes),
   the controller's resident memory (VmRSS / VmHWM) and its hook processes'.
   Beside a run's CPU, the machine's ceiling (bench.common.cpu_budget): the
   cores the whole machine kept busy during the floor's run and the
   controller's (CPU-bound or not), and each side's CPU beyond the floor's
   (the controller's against the floor client's, the API server's, other
   processes') as seconds of the gap at the machine's cores. In the
   summary, the CPU a parent converging within 1.15x the contract's writes
   would leave each operator beside what every other process spent in its
   run (cpu_left), next to the CPU it used.
5. A peer: the same job done by a Kopf operator (bench/kopf_fanout.py), in
   the same run, measured the same way (skipped, saying so, without kopf:
   `pip install kopf`).

Every time is printed as a ratio to the floor of step 1, every latency as a
ratio to the write-to-event p50.

With `--heavy-hook` the hook also burns about 5 ms of evaluation per sync
(a comprehension over 5000 numbers); `--hook-processes 1,2` runs steps 2-4
once per number of hook evaluation processes, each in its own namespace.

    python -m bench.controller_converge --heavy-hook --replicas 1,2,3 --parents 600 --no-peer

`--replicas 1,2,3` runs steps 2-4 once per number of `regokite controller
--shards` replicas (each with one hook process), each in its own namespace,
and prints every replica's share and RSS.

    python -m bench.controller_converge --memory --replicas 2 --parents 10000

`--memory` measures only memory: no floor, no reaction sampling, no peer. A
controller without --shards, then each `--replicas` count of --shards
replicas, each in its own namespace: every process's RSS once ready (idle)
and after converging the parents (now and peak), the objects its informers
hold (with --shards, its share: runtime.shard_cache) and its hook processes' RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests" / "integration")]

import controlplane  # noqa: E402
import kube  # noqa: E402

from bench import api_floor  # noqa: E402
from bench.api_floor import parent  # noqa: E402 - also the other benches' parent
from bench.common import Phase, cpu_budget, machine_busy_seconds, percentiles  # noqa: E402
from tests.controllers.fanout import CHILDREN, STATUS, controller  # noqa: E402
from tests.controllers.process import ControllerProcess  # noqa: E402

HEAVY = """
status := {"configMaps": count(input.children["ConfigMap.v1"]), "burn": burn}

burn := count([x | some x in numbers.range(1, 5000); x % 7 == 0])
"""

ROUNDS = 3  # of the job's and the contract's writes, for their ratio
# parents of each of those runs (at most --parents): runs of 500 (2-4 s) once gave the 6th write 2.00x the job's
CONTRACT_PARENTS = 1000
# per parent, the fewest Metacontroller's contract allows (see regokite_run): the status of 3 is an update of the
# parent, which Metacontroller queues a sync for (composite/controller.go updateParentObject: "We used to ignore
# our own status updates, but we don't anymore"; only ignoreStatusChanges, unset here, skips it)
CONTRACT_SYNCS = 3
CONTRACT_WRITES = 5  # per parent, the controller's (the parent's create is the user's)
IDLE_WINDOW, IDLE_CPU = 0.5, 0.05  # seconds, share of a core: an implementation at rest (settle)
TARGET = 1.15  # times the contract's writes: the convergence a controller is held to (cpu_left)
SETTLE = 0.2  # seconds between reaction samples: each is a reaction alone, not the previous one's tail (its status)
THREADS = 8  # the bench's threads creating parents (a user's creates), for every implementation alike


def make_namespace(api, name: str) -> None:
    kube.create(api, "/api/v1/namespaces", {"metadata": {"name": name}})


# ------------------------------------------------------------------ convergence


class ParentsWatch:
    """Watches the parents of `ns` (from before they are created) until `n` of them report three
    children in their status: the moment the job is done, seen without listing thousands of objects."""

    def __init__(self, api, ns: str, n: int) -> None:
        self.api, self.path, self.n = api, f"/apis/example.com/v1/namespaces/{ns}/fanouts", n
        self.good: set[str] = set()
        self.at: float | None = None
        self.done = threading.Event()
        self.rv = kube.get(api, self.path, limit=1)["metadata"]["resourceVersion"]
        threading.Thread(target=self._run, name="parents-watch", daemon=True).start()

    def _run(self) -> None:
        while not self.done.is_set():
            for ev in kube.watch(self.api, self.path, resource_version=self.rv, timeout_seconds=60):
                if ev["type"] == "ERROR":  # too old a version: read them all again
                    listed = kube.get(self.api, self.path)
                    self.good = {p["metadata"]["name"] for p in listed["items"] if _converged(p)}
                    self.rv = listed["metadata"]["resourceVersion"]
                    break
                obj = ev["object"]
                self.rv = obj["metadata"]["resourceVersion"]
                if ev["type"] != "DELETED" and _converged(obj):
                    self.good.add(obj["metadata"]["name"])
                else:
                    self.good.discard(obj["metadata"]["name"])
                if len(self.good) >= self.n:
                    self.at = time.perf_counter()
                    self.done.set()
                    return


def _converged(p: dict) -> bool:
    return (p.get("status") or {}).get("configMaps") == 3


def count_children(api, ns: str) -> int:
    """ConfigMaps of `ns` owned by something, read in pages."""
    owned, token = 0, None
    while True:
        query = {"limit": 2000, **({"continue": token} if token else {})}
        page = kube.get(api, f"/api/v1/namespaces/{ns}/configmaps", **query)
        owned += sum(1 for c in page["items"] if c["metadata"].get("ownerReferences"))
        token = page["metadata"].get("continue")
        if not token:
            return owned


def converge(api, ns: str, n: int, timeout: float | None = None) -> tuple[float, float]:
    """Create n parents; return (seconds to create them, seconds until converged)."""
    parents = f"/apis/example.com/v1/namespaces/{ns}/fanouts"
    timeout = timeout or 600 + 0.1 * n
    watch = ParentsWatch(api, ns, n)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(lambda i: kube.create(api, parents, parent(ns, f"p{i}")), range(n)))
    created = time.perf_counter() - t0
    if not watch.done.wait(max(0.0, t0 + timeout - time.perf_counter())):
        raise TimeoutError(f"did not converge: {len(watch.good)} of {n} parents report 3 children")
    children = count_children(api, ns)
    if children < 3 * n:
        raise AssertionError(f"{n} statuses report 3 children, but only {children} children exist")
    assert watch.at is not None
    return created, watch.at - t0


# ------------------------------------------------------------------ reaction


def reaction_latency(api, ns: str, n: int, samples: int, direct: bool = False) -> list[float]:
    """Patch a parent's spec, time until its three children show the value (seen through a watch). With
    `direct`, patch ConfigMap `probe` itself and time until the watch shows it: one write and one watch
    event, the API server's own floor under a controller's reaction (which takes two of each)."""
    seen: dict[tuple[str, str], float] = {}
    cond = threading.Condition()
    stop = threading.Event()
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = kube.get(api, path, limit=1)["metadata"]["resourceVersion"]

    def watch() -> None:
        nonlocal rv
        try:
            while not stop.is_set():
                for ev in kube.watch(api, path, resource_version=rv, timeout_seconds=60):
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    key = (obj["metadata"]["name"], (obj.get("data") or {}).get("value"))
                    with cond:
                        seen.setdefault(key, time.perf_counter())
                        cond.notify_all()
                    if stop.is_set():
                        return
        except Exception:  # the control plane stops under it at the end
            if not stop.is_set():
                raise

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(0.5)
    latencies = []
    for s in range(samples):
        time.sleep(SETTLE)
        i, value = s % n, f"s{s}"
        t0 = time.perf_counter()
        if direct:
            kube.merge_patch(api, f"{path}/probe", {"data": {"value": value}})
            keys = [("probe", value)]
        else:
            kube.merge_patch(api, f"/apis/example.com/v1/namespaces/{ns}/fanouts/p{i}", {"spec": {"value": value}})
            keys = [(f"p{i}-{c}", value) for c in range(3)]
        with cond:
            if not cond.wait_for(lambda keys=keys: all(k in seen for k in keys), timeout=30):
                raise TimeoutError(f"sample {s}: no child update")
        latencies.append(max(seen[k] for k in keys) - t0)
    stop.set()
    return latencies


def reaction_floor(cp, api, n: int, samples: int) -> dict[str, float]:
    """The reaction of a bare client (bench.api_floor's `react`: the same writes, nothing between them)
    on min(n, samples) parents of its own namespace, sampled as a controller's."""
    ns, k = "bare", max(1, min(n, samples))
    make_namespace(api, ns)
    argv = [sys.executable, "-m", "bench.api_floor", "react", str(cp.kubeconfig), ns]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        fanouts = f"/apis/example.com/v1/namespaces/{ns}/fanouts"
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda i: kube.create(api, fanouts, parent(ns, f"p{i}")), range(k)))
        kube.wait_for(lambda: count_children(api, ns), lambda c: c >= 3 * k, what="the bare reactor's children")
        return percentiles(reaction_latency(api, ns, k, samples))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ------------------------------------------------------------------ processes


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
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
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


def settle(pid: int, timeout: float = 120.0) -> float:
    """Wait until `pid` (with the processes below it) is idle: under IDLE_CPU of a core over IDLE_WINDOW.
    A controller converged by the bench's measure still runs the syncs its last writes bring (the
    contract's third sync of each parent, the status of 3's): a reaction sampled over them times that
    tail, not a reaction. Every implementation waits the same; returns the seconds waited."""
    t0 = time.perf_counter()
    before = cpu_seconds(pid)
    while time.perf_counter() - t0 < timeout:
        time.sleep(IDLE_WINDOW)
        now = cpu_seconds(pid)
        if now - before < IDLE_CPU * IDLE_WINDOW:
            break
        before = now
    return time.perf_counter() - t0


class CpuMeter:
    """CPU seconds per process of the run (the control plane's, this bench's, a controller's) over a phase."""

    SHORT = {"kube-apiserver": "apiserver", "etcd": "etcd", "kube-controller-manager": "kcm"}

    def __init__(self, cp, **pids: int) -> None:
        self.pids = {self.SHORT.get(k, k): p.pid for k, p in cp.procs.items() if k in self.SHORT} | pids
        self.before, self.machine_before = self._now(), machine_busy_seconds()

    def _now(self) -> dict[str, float]:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return {k: cpu_seconds(pid) for k, pid in self.pids.items()} | {"bench": own.ru_utime + own.ru_stime}

    def phase(self, wall: float) -> Phase:
        """What each process (and the whole machine) spent since the meter started, over `wall` seconds."""
        now = self._now()
        spent = {k: now[k] - self.before[k] for k in now}
        return Phase(wall, spent, machine_busy_seconds() - self.machine_before)


def describe_cpu(phase: Phase) -> str:
    parts = ", ".join(f"{k} {v:.1f}" for k, v in phase.cpu.items())
    return f"{parts} (total {sum(phase.cpu.values()):.1f} CPU s; the machine {phase.machine:.1f})"


# ------------------------------------------------------------------ the floor


def floor(cp, api, n: int, args) -> api_floor.FloorRun:
    """The fastest way to make the job's writes for n parents: a sweep at `--sweep-parents`, its
    fastest two again at n when n is larger."""
    size = min(n, args.sweep_parents)
    threads = [int(t) for t in args.sweep_threads.split(",")]
    modes = args.sweep_modes.split(",")
    print(f"floor sweep    : {size} parents x {api_floor.WRITES_PER_PARENT} writes, every concurrency", flush=True)
    runs = [floor_run(cp, api, f"floor-{m[:3]}-{t}", size, t, m) for m in modes for t in threads]
    runs.sort(key=lambda r: r.seconds)
    if n > size:
        print(f"floor at {n:<5}: the sweep's fastest two, {n} parents each")
        runs = sorted((floor_run(cp, api, f"floor-{i}", n, r.threads, r.mode) for i, r in enumerate(runs[:2])),
                      key=lambda r: r.seconds)  # fmt: skip
    best = runs[0]
    print(f"FLOOR          : {best.seconds:6.2f} s for {n} parents ({best.describe().strip()})", flush=True)
    return best


def contract_floor(cp, api, best: api_floor.FloorRun, size: int) -> tuple[float, float, api_floor.FloorRun]:
    """How much longer the writes Metacontroller's contract makes take than the job's at the floor's
    concurrency (one more status write per parent: the creating sync's, of no children yet), the same
    under the two watches a controller of the job holds (api_floor.watching: parents and children,
    their events decoded), and the fastest of those job runs (at `size` parents)."""
    jobs, contract, watched = [], math.inf, math.inf
    for i in range(ROUNDS):  # alternating, the fastest of each: the machine's pace drifts
        jobs.append(floor_run(cp, api, f"floor-job-{i}", size, best.threads, best.mode))
        contract = min(contract, floor_run(cp, api, f"floor-contract-{i}", size, best.threads, best.mode, 2).seconds)
        run = floor_run(cp, api, f"floor-watched-{i}", size, best.threads, best.mode, 2, watched=True)
        watched = min(watched, run.seconds)
    job = min(jobs, key=lambda r: r.seconds)
    print(
        f"{'  contract':<15}: its 6 writes per parent take {contract / job.seconds:4.2f}x the job's 5, "
        f"{watched / job.seconds:4.2f}x under a controller's two watches (fastest of {ROUNDS})"
    )
    return contract / job.seconds, watched / job.seconds, job


def floor_run(
    cp, api, ns: str, n: int, threads: int, mode: str, statuses: int = 1, watched: bool = False
) -> api_floor.FloorRun:
    make_namespace(api, ns)
    cpu = CpuMeter(cp)
    run = api_floor.write_job(str(cp.kubeconfig), ns, n, threads, mode, statuses, watched)
    run = dataclasses.replace(run, cpu=cpu.phase(run.seconds))
    print(
        f"  {run.describe()}: {run.writes} writes{' (watched)' if watched else ''} in {run.seconds:6.2f} s "
        f"({run.rate:4.0f}/s); "
        f"CPU {describe_cpu(run.cpu)}",
        flush=True,
    )
    return run


# ------------------------------------------------------------------ one implementation


def measure(cp, api, ns: str, n: int, samples: int, pid: int, base: dict, who: str, metrics=None) -> dict:
    """Converge n parents in `ns`, then reaction latency and RSS of process `pid`, as ratios to `base`."""
    found = converge_and_react(cp, api, ns, n, samples, base, who, metrics, pid=pid)
    now, peak = rss(pid)
    below = sum(rss(p)[0] for p in descendants(pid))
    print(
        f"{'  RSS':<15}: {now} MiB now, {peak} MiB peak ({n} parents, {3 * n} children); processes below: {below} MiB"
    )
    return {**found, "rss_mib": now}


def converge_and_react(
    cp, api, ns: str, n: int, samples: int, base: dict, who: str, metrics: Callable[[], str] | None = None, pid=None
) -> dict:
    """With `metrics` (a regokite controller's /metrics), also where a reaction's time goes."""
    cpu = CpuMeter(cp, **({"controller": pid} if pid else {}))
    created, converged = converge(api, ns, n)
    spent = cpu.phase(converged)
    print(
        f"{who:<15}: created {n} parents in {created:6.2f} s; converged "
        f"({3 * n} children, {n} statuses) {converged:6.2f} s after the first create: "
        f"{converged / base['floor_s']:4.2f}x the floor",
        flush=True,
    )
    print(f"{'  CPU':<15}: {describe_cpu(spent)}")
    own = spent.cpu.get("controller")  # the operator's own process and those below it (hook processes)
    if own is not None:
        print(f"{'':<15}  {who}: {1000 * own / n:.2f} ms CPU a parent ({own:.1f} CPU s for {n} parents)")
    if base.get("floor_cpu") is not None:
        for line in cpu_budget(base["floor_cpu"], spent, len(os.sched_getaffinity(0)), who):
            print(f"{'  cores':<15}: {line}")
    before = counted(metrics()) if metrics else None
    idle = None if pid is None else settle(pid)
    settled = counted(metrics()) if metrics else None
    stats = percentiles(reaction_latency(api, ns, n, samples))
    edge = base["edge_ms"]
    print(
        f"{'  reaction':<15}: parent patch -> 3 children updated p50 {stats['p50']:6.1f} ms "
        f"({stats['p50'] / edge:4.1f}x the write-to-event p50)  "
        f"p99 {stats['p99']:6.1f} ms ({stats['p99'] / edge:4.1f}x); p50 {stats['p50'] / base['react_ms']:4.2f}x "
        "the bare client's" + ("" if idle is None else f"; sampled once idle, {idle:.1f} s after converging")
    )
    if settled is not None and metrics is not None:
        after = counted(metrics())
        d = {k: after[k] - settled[k] for k in after}
        print(
            f"{'':<15}  while reacting: {d['syncs']:.0f} syncs of {1000 * d['sync_s'] / max(1, d['syncs']):.1f} ms "
            f"on average, their hooks {1000 * d['hook_s'] / max(1, d['hooks']):.1f} ms"
        )
    found = {"converge_s": converged, "ratio": converged / base["floor_s"], "latency_ms": stats}
    found["cpu_ms_per_parent"] = None if own is None else 1000 * own / n
    found["others_cpu_s"] = None if own is None else spent.machine - own  # the machine's, but the operator's
    if before is not None and settled is not None:  # read right after converging, and once idle
        found |= {"converge_syncs": before["syncs"], "converge_writes": before["writes"]}
        found |= {"settled_syncs": settled["syncs"], "settled_writes": settled["writes"]}
    return found


def regokite_run(cp, api, tmpdir: Path, n: int, args, base: dict, count: int | None) -> dict:
    """Steps 2-4 for one `regokite controller` (`count` hook processes, or its default)."""
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
        assert ctl.proc is not None
        who = "regokite" if count is None else f"regokite p={count}"
        found = measure(cp, api, ns, n, args.samples, ctl.proc.pid, base, who, ctl.metrics)
        errors = [r for r in ctl.log_records() if r.get("msg") == "sync failed"]
        c = counted(ctl.metrics())
        print(
            f"{'  work':<15}: {c['syncs']:.0f} syncs, {c['writes']:.0f} writes "
            f"({c['syncs'] / n:.2f} syncs per parent, sampling included); sync errors: {len(errors)}; "
            f"a sync {1000 * c['sync_s'] / c['syncs']:.1f} ms on average, "
            f"its hook {1000 * c['hook_s'] / c['hooks']:.1f} ms"
        )
        print(
            f"{'  to converge':<15}: {found['converge_syncs'] / n:.2f} syncs and {found['converge_writes'] / n:.2f} "
            f"writes per parent (once idle: {found['settled_syncs'] / n:.2f} and {found['settled_writes'] / n:.2f}); "
            f"the contract's least: {CONTRACT_SYNCS} syncs (the creating one, the one that sees the children, the "
            "one the status of 3 brings; one more per later event that comes while its parent's sync runs, which "
            f"client-go's queue and regokite's run again after it) and {CONTRACT_WRITES} writes "
            "(3 children, the creating sync's status, the status of 3)"
        )
        return {**found, "writes": c["writes"], "sync_errors": len(errors)}


@contextlib.contextmanager
def shard_replicas(cp, api, tmpdir: Path, ns: str, count: int, workers: int) -> Iterator[list[ControllerProcess]]:
    """`count` replicas of `regokite controller --shards` (one hook process each) over `ns`, started and
    agreeing on their view."""
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
            workers=workers,
            extra=[*extra, "--leader-election-id", f"r{i}"],
            log_level="info",
        )
        for i in range(count)
    ]
    try:
        for r in replicas:
            r.__enter__()
        view = [f"r{i}" for i in range(count)]
        for r in replicas:
            kube.wait_for(
                lambda r=r: r.readiness().get("shards", {}),
                lambda s: s.get("view") == view and s.get("agreed"),
                what="the replicas agree",
            )
        yield replicas
    finally:
        for r in replicas:
            r.stop()


def cached(replica: ControllerProcess) -> int:
    """Objects in the replica's informers (its share of them with --shards), as its gauge last said."""
    lines = replica.metrics().splitlines()
    return int(
        sum(float(line.split()[-1]) for line in lines if line.startswith("regokite_controller_informer_objects{"))
    )


def owned(replica: ControllerProcess) -> float:
    lines = replica.metrics().splitlines()
    return next(float(line.split()[1]) for line in lines if line.startswith("regokite_shard_owned_objects "))


def sharded(api, cp, tmpdir: Path, n: int, count: int, args, base: dict) -> dict:
    """Steps 2-4 with `count` replicas of `regokite controller --shards` sharing the parents."""
    with shard_replicas(cp, api, tmpdir, f"shards-{count}", count, args.workers) as replicas:
        cpu_before = [cpu_seconds(r.proc.pid) for r in replicas]
        found = converge_and_react(cp, api, f"shards-{count}", n, args.samples, base, f"regokite x{count}")
        shares = []
        for i, r in enumerate(replicas):
            cpu = cpu_seconds(r.proc.pid) - cpu_before[i]
            share = owned(r)
            now, peak = rss(r.proc.pid)
            below = sum(rss(p)[0] for p in descendants(r.proc.pid))
            shares.append({"owned": share, "cpu_s": cpu, "rss_mib": now, "peak_mib": peak, "hook_processes_mib": below})
            print(
                f"{f'  replica r{i}':<15}: owns {share:4.0f} parents; CPU {cpu:5.2f} s (hooks included); "
                f"RSS {now} MiB ({peak} peak), hook processes {below} MiB"
            )
        return {**found, "replicas": shares}


# ------------------------------------------------------------------ memory only


def memory_rows(cp, api, tmpdir: Path, n: int, args) -> list[dict]:
    """--memory: each controller's RSS idle and after converging n parents, for one replica without
    --shards and for each --replicas count; no floor, no reaction sampling."""
    rows = []
    make_namespace(api, "mem")
    with ControllerProcess(
        cp.kubeconfig,
        policies=[tmpdir / "policies"],
        controllers=[tmpdir / "controller.yaml"],
        namespace="mem",
        workers=args.workers,
        log_level="info",
    ) as ctl:
        rows.append(memory_row(api, "mem", n, "1 replica", [ctl]))
    for count in [int(x) for x in args.replicas.split(",") if x]:
        with shard_replicas(cp, api, tmpdir, f"mem-shards-{count}", count, args.workers) as replicas:
            rows.append(memory_row(api, f"mem-shards-{count}", n, f"--shards x{count}", replicas))
    return rows


def memory_row(api, ns: str, n: int, who: str, replicas: list[ControllerProcess]) -> dict:
    pids = [r.proc.pid for r in replicas if r.proc is not None]
    idle = [rss(p)[0] for p in pids]
    created, converged = converge(api, ns, n)
    print(f"{who:<15}: created {n} parents in {created:6.1f} s, converged after {converged:6.1f} s", flush=True)
    row = {"who": who, "parents": n, "converge_s": converged, "replicas": []}
    time.sleep(3)  # the informer gauges are set every 2 s
    for i, (r, pid) in enumerate(zip(replicas, pids, strict=True)):
        now, peak = rss(pid)
        below = sum(rss(p)[0] for p in descendants(pid))
        share = owned(r) if "--shards" in r.argv else n
        objects = cached(r)
        row["replicas"].append(
            {"owned": share, "cached": objects, "idle_mib": idle[i], "rss_mib": now, "peak_mib": peak,
             "below_mib": below}
        )  # fmt: skip
        print(
            f"{f'  replica {i}':<15}: owns {share:5.0f} parents; RSS idle {idle[i]} MiB, after {now} MiB "
            f"({peak} peak), {objects} cached objects (of {4 * n} parents and children), "
            f"+{(now - idle[i]) * 1024 * 1024 / max(objects, 1):,.0f} bytes each; hook processes {below} MiB",
            flush=True,
        )
    return row


def kopf_peer(api, cp, n: int, samples: int, base: dict) -> dict | None:
    if importlib.util.find_spec("kopf") is None:
        print("kopf           : not installed (pip install kopf): no peer in this run")
        return None
    make_namespace(api, "kopf")
    env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig)}
    argv = [sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", "kopf", "--quiet"]
    log = open(Path(cp.kubeconfig).parent / "kopf.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*argv, str(ROOT / "bench" / "kopf_fanout.py")], env=env, stdout=log, stderr=log)
    try:
        return measure(cp, api, "kopf", n, samples, proc.pid, base, "kopf")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


# ------------------------------------------------------------------ the run


def summary(n: int, base: dict, runs: dict[str, dict], peer: dict | None) -> None:
    print(
        f"SUMMARY ({n} parents; floor {base['floor_s']:.2f} s = {api_floor.WRITES_PER_PARENT * n} writes at "
        f"{base['floor']}; write-to-event p50 {base['edge_ms']:.1f} ms)"
    )
    for who, found in [*runs.items(), *([("kopf", peer)] if peer else [])]:
        lat, edge = found["latency_ms"], base["edge_ms"]
        print(
            f"  {who:<13}: converge {found['converge_s']:.2f} s, {found['ratio']:4.2f}x the floor "
            f"({found['ratio'] / base['contract']:4.2f}x the contract's writes at its pace, "
            f"{found['ratio'] / base['watched']:4.2f}x them under a controller's watches); "
            f"reaction p50 {lat['p50'] / edge:4.1f}x, p99 {lat['p99'] / edge:4.1f}x the write-to-event p50, "
            f"p50 {lat['p50'] / base['react_ms']:4.2f}x the bare client's"
        )
        work = [f"CPU {found['cpu_ms_per_parent']:.2f} ms a parent"] if found.get("cpu_ms_per_parent") else []
        if "converge_syncs" in found:
            work.append(
                f"{found['converge_syncs'] / n:.2f} syncs and {found['converge_writes'] / n:.2f} writes a parent "
                f"(the contract's least: {CONTRACT_SYNCS} and {CONTRACT_WRITES})"
            )
        if work:
            print(f"  {'':<13}  while converging: {'; '.join(work)}")
        if found.get("others_cpu_s") is not None and found.get("cpu_ms_per_parent") is not None:
            print(f"  {'':<13}  {cpu_left(n, base, found)}")
    ours = next(iter(runs.values()), None)
    if peer and ours:
        cpu = [peer.get("cpu_ms_per_parent"), ours.get("cpu_ms_per_parent")]
        ratio = f"; CPU a parent {cpu[0] / cpu[1]:4.2f}x" if all(cpu) else ""
        print(f"  kopf / regokite: converge {peer['converge_s'] / ours['converge_s']:4.2f}x slower{ratio}")


def cpu_left(n: int, base: dict, found: dict, within: float = TARGET) -> str:
    """What converging within `within` times the contract's writes would leave the operator, as CPU a
    parent: the machine's cores over that time, less what every other process (API server, etcd,
    controller-manager, this bench) spent in this run. The others' share is the API server's work
    for this operator's writes and watches, which a faster operator does not shrink."""
    wall = within * base["floor_s"] * base["contract"]
    cores = len(os.sched_getaffinity(0))
    left = 1000 * (wall * cores - found["others_cpu_s"]) / n
    client = base["floor_cpu"].cpu.get("bench") if base.get("floor_cpu") is not None else None
    return (
        f"within {within:.2f}x the contract's writes ({wall:.2f} s on {cores} cores) the other processes' CPU "
        f"of this run ({found['others_cpu_s']:.1f} s) leaves it "
        + (f"{left:.2f} ms CPU a parent" if left > 0 else "no CPU")
        + f"; it used {found['cpu_ms_per_parent']:.2f}"
        + (f" (the floor's bare client {1000 * client / n:.2f} for the job's 5 writes)" if client else "")
    )


@contextlib.contextmanager
def fanout_plane(tmp: Path, policy: str, audit: bool = False) -> Iterator[tuple[controlplane.ControlPlane, Any]]:
    """A private control plane serving the Fanout CRD, and in `tmp` the fanout controller to run on it
    (policies/fanout.rego holding `policy`, controller.yaml); yields the plane and an API client.
    With `audit`, its API server logs every write (controlplane.audit_writes)."""
    (tmp / "policies").mkdir()
    (tmp / "policies" / "fanout.rego").write_text(policy)
    (tmp / "controller.yaml").write_text(controller("example.com"))
    cp = controlplane.start(tmp / "cp", audit=audit)
    try:
        with kube.Cluster.of(cp).api_client() as api:
            kube.install_crd(api, kube.crd_manifest("example.com", "Fanout"))
            yield cp, api
    finally:
        cp.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parents", type=int, default=500)
    ap.add_argument("--workers", type=int, default=8)  # regokite controller's default
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--sweep-parents", type=int, default=500, help="parents per point of the floor's sweep")
    ap.add_argument("--sweep-threads", default=",".join(map(str, api_floor.THREADS)), help="the floor's client threads")
    ap.add_argument("--sweep-modes", default=",".join(api_floor.MODES), help="sequential, pipelined or both")
    ap.add_argument("--no-peer", action="store_true", help="skip the Kopf operator")
    ap.add_argument("--heavy-hook", action="store_true", help="the hook burns about 5 ms of evaluation per sync")
    ap.add_argument("--hook-processes", default="", help="comma-separated counts, one controller run each")
    ap.add_argument("--replicas", default="", help="comma-separated counts of --shards replicas, one run each")
    ap.add_argument("--memory", action="store_true", help="only each controller's RSS, idle and converged")
    args = ap.parse_args()
    n = args.parents
    policy = CHILDREN + (HEAVY if args.heavy_hook else STATUS)
    processes = [int(x) for x in args.hook_processes.split(",") if x] or [None]

    with tempfile.TemporaryDirectory(prefix="regokite-bench-") as tmp, fanout_plane(Path(tmp), policy) as (cp, api):
        tmpdir = Path(tmp)
        if args.memory:
            print(f"load average at start: {os.getloadavg()}", flush=True)
            rows = memory_rows(cp, api, tmpdir, n, args)
            print(f"load average at end: {os.getloadavg()}")
            print(json.dumps({"parents": n, "memory": rows}))
            return 0
        best = floor(cp, api, n, args)
        extra, watched, again = contract_floor(cp, api, best, min(n, max(CONTRACT_PARENTS, args.sweep_parents)))
        if n <= args.sweep_parents and again.seconds < best.seconds:  # the floor's own configuration, faster since
            best = again
            print(f"FLOOR          : {best.seconds:6.2f} s for {n} parents (the same, run again beside the contract's)")
        make_namespace(api, "probe")
        kube.create(api, "/api/v1/namespaces/probe/configmaps", {"metadata": {"name": "probe"}})
        edge = percentiles(reaction_latency(api, "probe", 1, args.samples, direct=True))
        print(
            f"{'  latency floor':<15}: ConfigMap patch -> its watch event p50 {edge['p50']:6.1f} ms  "
            f"p99 {edge['p99']:6.1f} ms (a controller's reaction is two of these, plus the hook)"
        )
        bare = reaction_floor(cp, api, n, args.samples)
        print(
            f"{'  reaction floor':<15}: a bare client's parent patch -> 3 children updated p50 {bare['p50']:6.1f} ms "
            f"({bare['p50'] / edge['p50']:4.1f}x the write-to-event p50)  p99 {bare['p99']:6.1f} ms "
            "(the same writes, nothing between them)"
        )
        base = {"floor_s": best.seconds, "floor": best.describe().strip(), "edge_ms": edge["p50"], "contract": extra,
                "watched": watched, "react_ms": bare["p50"], "floor_cpu": best.cpu}  # fmt: skip

        runs = {}
        for count in processes:
            who = "regokite" if count is None else f"regokite p={count}"
            runs[who] = regokite_run(cp, api, tmpdir, n, args, base, count)
        for count in [int(x) for x in args.replicas.split(",") if x]:
            runs[f"{count} replicas"] = sharded(api, cp, tmpdir, n, count, args, base)
        peer = None if args.no_peer else kopf_peer(api, cp, n, args.samples, base)
        summary(n, base, runs, peer)
        chosen = {"threads": best.threads, "mode": best.mode, "seconds": best.seconds}
        found = {"parents": n, "floor": chosen, "contract": extra, "watched": watched, "edge": edge}
        print(json.dumps(found | {"regokite": runs, "kopf": peer}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
