"""Kubernetes vocabulary shared by the decisions (`controllers/`) and the runtime (`kube/`).

A resource type as the API server describes it, and the few ways code names
an object: its cache key, its controller reference, how it reads in a log
line. Nothing here does I/O, so both layers can stand on it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
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


# Built-in kinds whose lists server-side apply keys by a field the API server defaults: Service
# ports by (port, protocol), container ports by (containerPort, protocol). The paths to their pod
# specs, by (API group, kind).
_POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("", "PodTemplate"): ("template", "spec"),
    ("", "ReplicationController"): ("spec", "template", "spec"),
    **{("apps", k): ("spec", "template", "spec") for k in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")},
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def with_defaulted_list_keys(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` with `protocol: TCP`, the API server's default, on each Service or container port left without one.

    Server-side apply keys those lists by port and protocol, and the API server (1.20 here) refuses an
    item missing a key ("associative list with keys has an element that omits key field
    \\"protocol\\""), where Metacontroller's client-side apply lets the server default it: hooks
    written for Metacontroller leave it out. The stored object is the same either way. `obj` itself
    is never changed; it is returned as is when nothing is missing.
    """
    if all("protocol" in p for ports in _port_lists(obj) for p in ports if isinstance(p, dict)):
        return obj
    out = copy.deepcopy(obj)
    for ports in _port_lists(out):
        for port in ports:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
    return out


def _port_lists(obj: Mapping[str, Any]) -> Iterator[list[Any]]:
    group, kind = api_group(str(obj.get("apiVersion", ""))), str(obj.get("kind"))
    if (group, kind) == ("", "Service"):
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("ports"), list):
            yield spec["ports"]
        return
    spec = obj
    for key in _POD_SPEC_PATHS.get((group, kind), ()):
        spec = spec.get(key) if isinstance(spec, dict) else None
    if spec is obj or not isinstance(spec, dict):
        return
    for name in _CONTAINER_LISTS:
        containers = spec.get(name)
        for container in containers if isinstance(containers, list) else ():
            if isinstance(container, dict) and isinstance(container.get("ports"), list):
                yield container["ports"]


@dataclass(frozen=True)
class Action:
    """One write: create/update (server-side apply), recreate (delete now, create on the
    next sync), delete, adopt, release."""

    verb: str
    type: ChildType
    namespace: str | None
    name: str
    body: dict[str, Any] | None = None
    uid: str | None = None
    reason: str = ""
    cleanup: dict[str, Any] | None = None  # after the apply: a merge patch removing what a previous applier set

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        text = f"{self.verb} {self.type.kind} {where}"
        return f"{text} ({self.reason})" if self.reason else text


@dataclass(frozen=True)
class HookEvent:
    type: str
    reason: str
    message: str
