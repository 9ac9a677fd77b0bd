"""Gatekeeper mutators built by the last-good tests (in process and on the API server)."""

from __future__ import annotations

from typing import Any


def pod_assign(
    name: str, location: str, value: Any = "Default", *, namespace: str | None = None, source: str | None = None
) -> dict[str, Any]:
    """An Assign setting `location` of Pods to `value`; with `namespace`, of that namespace's Pods only; with
    `source` (Generated, Original), of those Pods only."""
    match: dict[str, Any] = {"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}]}
    if namespace is not None:
        match |= {"scope": "Namespaced", "namespaces": [namespace]}
    if source is not None:
        match |= {"source": source}
    return {
        "apiVersion": "mutations.gatekeeper.sh/v1",
        "kind": "Assign",
        "metadata": {"name": name},
        "spec": {
            "applyTo": [{"groups": [""], "kinds": ["Pod"], "versions": ["v1"]}],
            "match": match,
            "location": location,
            "parameters": {"assign": {"value": value}},
        },
    }
