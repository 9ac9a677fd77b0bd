"""Audit results as the Policy WG's reports (`wgpolicyk8s.io/v1alpha2`): pure, no I/O.

One PolicyReport per namespace and one ClusterPolicyReport for
cluster-scoped objects, each named `regokite-audit`, holding a result per
finding of a policy on an object; written with server-side apply, so a
report is updated in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from regokite.audit.scan import Results, Subject

API_VERSION = "wgpolicyk8s.io/v1alpha2"
REPORT_NAME = "regokite-audit"
SOURCE = "regokite"
LABELS = {"app.kubernetes.io/managed-by": "regokite", "app.kubernetes.io/component": "audit"}


def report(namespace: str, findings: Iterable[tuple[Subject, Results]], seconds: int) -> dict[str, Any]:
    """The report of `namespace` ("" for cluster-scoped objects), results sorted for stable writes."""
    results = []
    for subject, per_object in findings:
        for r in per_object:
            results.append(
                {
                    "source": SOURCE,
                    "policy": r.policy,
                    "result": r.result,
                    "scored": True,
                    "message": r.message,
                    "timestamp": {"seconds": seconds, "nanos": 0},
                    "resources": [subject.reference()],
                    "properties": {"enforcement": r.enforcement},
                }
            )
    results.sort(key=lambda x: (x["policy"], x["resources"][0]["kind"], x["resources"][0]["name"], x["message"]))
    summary = {k: sum(1 for x in results if x["result"] == k) for k in ("pass", "fail", "warn", "error", "skip")}
    metadata: dict[str, Any] = {"name": REPORT_NAME, "labels": dict(LABELS)}
    if namespace:
        metadata["namespace"] = namespace
    kind = "PolicyReport" if namespace else "ClusterPolicyReport"
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "summary": summary, "results": results}


def by_namespace(results: Mapping[Subject, Results]) -> dict[str, list[tuple[Subject, Results]]]:
    grouped: dict[str, list[tuple[Subject, Results]]] = {}
    for subject, per_object in results.items():
        grouped.setdefault(subject.namespace, []).append((subject, per_object))
    return grouped
