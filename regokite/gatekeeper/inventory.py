"""Gatekeeper's `data.inventory` layout for replicated objects.

`data.inventory.cluster[groupVersion][kind][name]` for cluster-scoped objects,
`data.inventory.namespace[ns][groupVersion][kind][name]` for namespaced
ones. `path` places one object, so a view of the replicated-object store
(kube-mgmt's layout, keyed by resource) can translate each change into this
layout incrementally; `inventory` builds the whole document (gator's cases).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def path(api_version: str, kind: str, namespace: str | None, name: str) -> tuple[str, ...]:
    """Where an object lives below `data.inventory`: by its group/version as Go prints one (`/v1`, the
    core group written out, is `v1`)."""
    group, _, version = api_version.rpartition("/")
    group_version = f"{group}/{version}" if group else version
    if namespace:
        return ("namespace", namespace, group_version, kind, name)
    return ("cluster", group_version, kind, name)


def inventory(objects: Iterable[Any], read: Callable[[Any], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The objects placed by their own apiVersion, kind, namespace and name; `read` gives each object's
    fields when it is held otherwise (as JSON text): what is held is what is placed."""
    tree: dict[str, Any] = {"cluster": {}, "namespace": {}}
    for held in objects:
        obj = read(held) if read is not None else held
        meta = obj.get("metadata") or {}
        *parents, name = path(
            str(obj.get("apiVersion", "")), str(obj.get("kind", "")), meta.get("namespace"), meta.get("name", "")
        )
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[name] = held
    return tree


def namespaces(objects: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The Namespaces among `objects` by name: what a namespaceSelector reads. As Gatekeeper's namespace
    cache, by group and kind: the core group's, whatever the version (`v1`, or `/v1` written out)."""
    return {
        (o.get("metadata") or {}).get("name", ""): o
        for o in objects
        if o.get("kind") == "Namespace" and str(o.get("apiVersion", "")).rpartition("/")[0] == ""
    }


def from_replica(document: Mapping[str, Any], texts: bool = False) -> dict[str, Any]:
    """Replicated objects in kube-mgmt's layout (`resource -> [namespace ->] name -> object`,
    below the replica's root) placed in Gatekeeper's layout; with `texts`, each object is held as its
    JSON text (a TextReplicaStore's) and placed as that text."""
    objects: list[Any] = []
    for tree in document.values():
        for key, value in (tree or {}).items():
            if texts:
                objects += [value] if isinstance(value, str) else [o for o in value.values() if isinstance(o, str)]
                continue
            meta = value.get("metadata") if isinstance(value, dict) else None
            if isinstance(meta, dict) and meta.get("name") == key and not meta.get("namespace"):
                objects.append(value)  # a cluster-scoped object
            elif isinstance(value, dict):
                objects += [o for o in value.values() if isinstance(o, dict)]  # a namespace's objects
    return inventory(objects, _read if texts else None)


def _read(held: Any) -> Mapping[str, Any]:
    """An object's fields, parsed from its JSON text when held so (for its place, then dropped)."""
    return json.loads(held) if isinstance(held, str) else held


class InventoryView:
    """A replica store whose objects an engine also sees as `data.inventory`.

    It is the store itself (the same changes, generation and lock) except
    that every document the engine adds below the store's root is added a
    second time in Gatekeeper's layout; engines that replay changes as JSON
    patches (a sidecar OPA) do not call `rooted` and are not served by it.
    """

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def rooted(self, value: Any, path: tuple[str, ...] = ()) -> dict[str, Any]:
        document = self._store.rooted(value, path)
        if path:
            raise ValueError("InventoryView places whole documents below the root only")
        return {**document, "inventory": from_replica(value, self._store.holds_text)}


class ReplicatedNamespaces:
    """A namespaceSelector's Namespaces, from the replica once one is followed (`v1/namespaces`)."""

    def __init__(self) -> None:
        self.store: Any = None

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        if self.store is None:
            return None
        found = self.store.object_at("namespaces", name)
        return found if isinstance(found, dict) and (found.get("metadata") or {}).get("name") == name else None
