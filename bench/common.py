"""Shared pieces of the benchmarks: the sample review and percentile maths."""

from __future__ import annotations

import json
import statistics
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
