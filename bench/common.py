"""Shared pieces of the benchmarks: the sample review and percentile maths."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.admission.reviews import deployment, review

POLICIES = Path(__file__).resolve().parents[1] / "policies"


def standalone_policies() -> list[Path]:
    """policies/lib and the admission policies that read no cluster data: a server
    without Kubernetes credentials refuses what the others match."""
    chosen = [POLICIES / "lib"]
    for policy in sorted((POLICIES / "admission").iterdir()):
        texts = [f.read_text() for f in policy.glob("*.rego") if not f.name.endswith("_test.rego")]
        if not any("\nreplicate :=" in t for t in texts):
            chosen.append(policy)
    return chosen


def sample_review() -> dict[str, Any]:
    """A Deployment that passes every policy in policies/admission: the common, full-work case."""
    labels = {"app.kubernetes.io/name": "web", "owner": "team-a"}
    obj = deployment("web", labels=dict(labels))
    pod = obj["spec"]["template"]
    pod["metadata"]["labels"].update(labels)
    pod["spec"]["securityContext"] = {"runAsNonRoot": True}
    pod["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "500m", "memory": "256Mi"},
        "requests": {"cpu": "100m", "memory": "128Mi"},
    }
    return review(obj)


def sample_body() -> bytes:
    return json.dumps(sample_review()).encode()


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p99/mean in milliseconds."""
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"p50": pick(0.50), "p99": pick(0.99), "mean": statistics.fmean(ordered) * 1000, "n": len(ordered)}


def fmt(stats: dict[str, float]) -> str:
    return f"p50 {stats['p50']:7.3f} ms   p99 {stats['p99']:7.3f} ms   mean {stats['mean']:7.3f} ms   (n={stats['n']})"


@dataclass(frozen=True)
class Phase:
    """Where the CPU went during one timed phase of a bench: `cpu` seconds per process of the run
    (the control plane's, the bench's, a controller's) and `machine` seconds every core was busy,
    other processes' included (/proc/stat), over `wall` seconds."""

    wall: float
    cpu: dict[str, float]
    machine: float

    def cores(self, names: tuple[str, ...] | None = None) -> float:
        """Cores busy on average: the named processes', or the whole machine's."""
        busy = self.machine if names is None else sum(self.cpu.get(k, 0.0) for k in names)
        return busy / self.wall


CLIENT_SIDE = ("controller", "bench")  # the floor's client is the bench itself
SERVER_SIDE = ("apiserver", "etcd", "kcm")
CPU_BOUND = 0.9  # of the cores busy: the run waited on CPU, so CPU spent anywhere is wall time


def machine_busy_seconds() -> float:
    """CPU seconds all cores have been busy since boot (/proc/stat: everything but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def cpu_budget(floor: Phase, run: Phase, cores: int, who: str) -> list[str]:
    """Whether `run` was CPU-bound, and how much of its time beyond the floor's the extra CPU of each
    side explains: on a machine whose cores are all busy, every CPU second spent costs 1/cores of a
    second of wall time, so a controller's CPU is time taken from the API server."""
    bound = run.cores() >= CPU_BOUND * cores
    lines = [
        f"the floor kept {floor.cores():.2f} of {cores} cores busy (the run's processes "
        f"{floor.cores(tuple(floor.cpu)):.2f}); {who} {run.cores():.2f} ({run.cores(tuple(run.cpu)):.2f}): "
        + ("CPU-bound" if bound else f"not CPU-bound (under {CPU_BOUND:.0%} of the cores)")
    ]
    gap = run.wall - floor.wall
    client = _spent(run, CLIENT_SIDE) - _spent(floor, CLIENT_SIDE)
    server = _spent(run, SERVER_SIDE) - _spent(floor, SERVER_SIDE)
    others = (run.machine - sum(run.cpu.values())) - (floor.machine - sum(floor.cpu.values()))
    sides = [("client side (controller + bench over the floor's client)", client)]
    sides += [("API server side (apiserver, etcd, kcm)", server), ("other processes", others)]
    parts = [f"{side} {cpu:+.1f} CPU s = {cpu / cores:+.2f} s{_share(cpu / cores, gap)}" for side, cpu in sides]
    bound_note = "" if bound else " (at most: the run was not CPU-bound)"
    lines.append(f"its {gap:.2f} s beyond the floor, as CPU on {cores} cores{bound_note}: " + "; ".join(parts))
    return lines


def _share(seconds: float, gap: float) -> str:
    return f" ({seconds / gap:.0%} of it)" if gap > 0 else ""


def _spent(phase: Phase, names: tuple[str, ...]) -> float:
    return sum(phase.cpu.get(k, 0.0) for k in names)
