"""The Kubernetes Policy WG's report CRDs (`wgpolicyk8s.io/v1alpha2` PolicyReport and
ClusterPolicyReport), written from the WG's published API types (policy-report/api/v1alpha2),
for clusters that do not have them yet (Kyverno and policy-reporter install the same)."""

from __future__ import annotations

from typing import Any

from regokite import crd

GROUP = "wgpolicyk8s.io"
VERSION = "v1alpha2"

_STRING: dict[str, Any] = {"type": "string"}
_INTEGER: dict[str, Any] = {"type": "integer"}
_OBJECT_REFERENCE = {
    "type": "object",
    "properties": {
        k: _STRING for k in ("apiVersion", "fieldPath", "kind", "name", "namespace", "resourceVersion", "uid")
    },
}
_LABEL_SELECTOR = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_RESULT = {
    "type": "object",
    "required": ["policy"],
    "properties": {
        "source": _STRING,
        "policy": _STRING,
        "rule": _STRING,
        "category": _STRING,
        "severity": {"type": "string", "enum": ["critical", "high", "low", "medium", "info"]},
        "timestamp": {
            "type": "object",
            "properties": {
                "seconds": {"type": "integer", "format": "int64"},
                "nanos": {"type": "integer", "format": "int32"},
            },
        },
        "result": {"type": "string", "enum": ["pass", "fail", "warn", "error", "skip"]},
        "scored": {"type": "boolean"},
        "resources": {"type": "array", "items": _OBJECT_REFERENCE},
        "resourceSelector": _LABEL_SELECTOR,
        "message": _STRING,
        "properties": {"type": "object", "additionalProperties": _STRING},
    },
}
_SCHEMA = {
    "type": "object",
    "properties": {
        "apiVersion": _STRING,
        "kind": _STRING,
        "metadata": {"type": "object"},
        "scope": _OBJECT_REFERENCE,
        "scopeSelector": _LABEL_SELECTOR,
        "summary": {"type": "object", "properties": {k: _INTEGER for k in ("pass", "fail", "warn", "error", "skip")}},
        "results": {"type": "array", "items": _RESULT},
    },
}
_COLUMNS = [
    {"name": "Kind", "type": "string", "jsonPath": ".scope.kind", "priority": 1},
    {"name": "Name", "type": "string", "jsonPath": ".scope.name", "priority": 1},
    *(
        {"name": k.title(), "type": "integer", "jsonPath": f".summary.{k}"}
        for k in ("pass", "fail", "warn", "error", "skip")
    ),
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def report_crd(kind: str, plural: str, short_name: str, scope: str) -> dict[str, Any]:
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _SCHEMA},
        "additionalPrinterColumns": _COLUMNS,
    }
    return crd.document(GROUP, crd.spec_names(kind, plural, short_name), scope, [version])


def report_crds() -> list[dict[str, Any]]:
    return [
        report_crd("PolicyReport", "policyreports", "polr", "Namespaced"),
        report_crd("ClusterPolicyReport", "clusterpolicyreports", "cpolr", "Cluster"),
    ]
