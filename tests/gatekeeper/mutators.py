"""Gatekeeper Assign mutators, as the tests build them (in process and on the API server)."""

from __future__ import annotations

from typing import Any


def assign(
    name: str,
    location: str,
    parameters: dict[str, Any],
    *,
    apply_to: dict[str, list[str]] | None = None,
    match: dict[str, Any] | None = None,
    version: str = "v1",
) -> dict[str, Any]:
    """An Assign (mutations.gatekeeper.sh/`version`) setting `location` of the `apply_to` objects (v1 Pods unless
    given) as its `parameters` say (`{"value": ...}`, `{"externalData": ...}`), only where `match` matches."""
    return {
        "apiVersion": f"mutations.gatekeeper.sh/{version}",
        "kind": "Assign",
        "metadata": {"name": name},
        "spec": {
            "applyTo": [apply_to or {"groups": [""], "kinds": ["Pod"], "versions": ["v1"]}],
            **({"match": match} if match is not None else {}),
            "location": location,
            "parameters": {"assign": parameters},
        },
    }


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
    return assign(name, location, {"value": value}, match=match)
