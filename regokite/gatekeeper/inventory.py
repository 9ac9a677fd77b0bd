"""Gatekeeper's `data.inventory` layout for replicated objects.

`data.inventory.cluster[groupVersion][kind][name]` for cluster-scoped objects,
`data.inventory.namespace[ns][groupVersion][kind][name]` for namespaced
ones. `path` places one object, so a view of the replicated-object store
(kube-mgmt's layout, keyed by resource) can translate each change into this
layout incrementally; `inventory` builds the whole document (gator's cases).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def path(api_version: str, kind: str, namespace: str | None, name: str) -> tuple[str, ...]:
    """Where an object lives below `data.inventory`."""
    if namespace:
        return ("namespace", namespace, api_version, kind, name)
    return ("cluster", api_version, kind, name)


def inventory(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    tree: dict[str, Any] = {"cluster": {}, "namespace": {}}
    for obj in objects:
        meta = obj.get("metadata") or {}
        *parents, name = path(
            str(obj.get("apiVersion", "")), str(obj.get("kind", "")), meta.get("namespace"), meta.get("name", "")
        )
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[name] = obj
    return tree


def namespaces(objects: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The Namespaces among `objects` by name: what a namespaceSelector reads."""
    return {
        (o.get("metadata") or {}).get("name", ""): o
        for o in objects
        if o.get("kind") == "Namespace" and o.get("apiVersion") == "v1"
    }
