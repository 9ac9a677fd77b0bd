"""Gatekeeper mutators built by the last-good tests (in process and on the API server)."""

from __future__ import annotations

from typing import Any


def pod_assign(name: str, location: str, value: str = "Default", *, namespace: str | None = None) -> dict[str, Any]:
    """An Assign setting `location` of Pods to `value`; with `namespace`, of that namespace's Pods only."""
    match: dict[str, Any] = {"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}]}
    if namespace is not None:
        match |= {"scope": "Namespaced", "namespaces": [namespace]}
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
