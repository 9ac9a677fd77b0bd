"""Kubernetes vocabulary shared by the decisions (`controllers/`) and the runtime (`kube/`).

A resource type as the API server describes it, and the few ways code names
an object: its cache key, its controller reference, how it reads in a log
line. Nothing here does I/O, so both layers can stand on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChildType:
    """A resource type (a controller's parent, child or attachment, a watched type) as discovery resolves it."""

    api_version: str
    resource: str
    kind: str
    namespaced: bool
    status_subresource: bool = False

    @property
    def key(self) -> str:
        """The `children` key Metacontroller uses: `Pod.v1`, `Deployment.apps/v1`."""
        return type_key(self.kind, self.api_version)


def type_key(kind: str, api_version: str) -> str:
    return f"{kind}.{api_version}"


def api_group(api_version: str) -> str:
    """`apps/v1` -> `apps`; `v1` -> `` (the core group)."""
    return api_version.rpartition("/")[0]


def key_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    """`(namespace or "", name)`: how caches and work queues key an object."""
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name", "")


def where(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object (log lines and messages)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))


def same_version(new: Mapping[str, Any] | None, old: Mapping[str, Any] | None) -> bool:
    """An informer notification that changes nothing: both states at one resourceVersion (a relist)."""
    return (
        new is not None
        and old is not None
        and new["metadata"].get("resourceVersion") == old["metadata"].get("resourceVersion")
    )


def controller_ref(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The owner reference marked `controller: true`, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller reference to `owner`, blocking its deletion until the garbage collector is done."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def refers_to(ref: Mapping[str, Any], t: ChildType) -> bool:
    """Does an owner reference point at an object of type `t`? (the group, not the version, must match)"""
    return ref.get("kind") == t.kind and api_group(ref.get("apiVersion", "")) == api_group(t.api_version)
