"""CompositeControllers, DecoratorControllers and regokite Watches read from the API server, each
given a status.

The definitions parse exactly as a `--controllers` file would (the same checker, the same field
paths in every error). Each object's `status` says whether it was accepted: an `Accepted`
condition (True, or False with every problem) and `observedGeneration`, written only when it
changes. Metacontroller's own status for these kinds is an empty object, so nothing it writes
is contradicted. The CRDs not being served (not installed yet, or removed) means no definitions,
not an error: discovery is asked again on every read.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from regokite.controllers import definitions
from regokite.controllers.watch import decisions as watch
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError, KubeClient
from regokite.kube.discovery import Discovery, DiscoveryError
from regokite.resources import ChildType

log = logging.getLogger("regokite.controller")
Obj = dict[str, Any]
KINDS = ("compositecontrollers", "decoratorcontrollers")
STATUS_WRITER = "definitions"  # the `controller` label of the status writes in the actuator's metrics


@dataclass
class ClusterDefinitions:
    """What the API server holds now: the accepted definitions and every object as read."""

    controllers: list[Any] = field(default_factory=list)
    watches: list[watch.Watch] = field(default_factory=list)  # named <namespace>/<name>
    objects: list[tuple[ChildType, Obj, list[str]]] = field(default_factory=list)  # (type, object, its problems)
    kept: set[str] = field(default_factory=set)  # refused edits whose last accepted version keeps running

    def fingerprint(self) -> str:
        """Changes exactly when an accepted definition's spec does (or one comes or goes): when to rebuild."""
        found = [*self.controllers, *self.watches]
        specs = sorted((d.raw["kind"], d.name, json.dumps(d.raw.get("spec"), sort_keys=True)) for d in found)
        return json.dumps(specs)

    def names(self) -> list[str]:
        return sorted(d.name for d in [*self.controllers, *self.watches])


def rules(definition: Any) -> list[Any]:
    """The resource types a definition needs served: parent and children, or resources and attachments."""
    if isinstance(definition, definitions.CompositeController):
        return [definition.parent, *definition.children]
    return [*definition.resources, *definition.attachments]


def read(client: KubeClient, discovery: Discovery, previous: ClusterDefinitions | None = None) -> ClusterDefinitions:
    """The definitions on the server; an edit refused now of one `previous` ran keeps that version
    running (bad input loses nothing: its status says it was refused, its parents stay served)."""
    found = ClusterDefinitions()
    before = {d.name: d for d in [*previous.controllers, *previous.watches]} if previous else {}
    for resource in KINDS:
        try:
            t = discovery.resolve(definitions.API_VERSION, resource, wait=0.0)
        except DiscoveryError:
            continue  # the CRD is not installed (or was removed): no definitions of this kind
        try:
            items = client.get(f"/apis/{definitions.API_VERSION}/{resource}").get("items", [])
        except ApiError as exc:
            if exc.status != 404:
                raise
            continue  # removed since discovery last looked
        for obj in items:
            problems: list[str] = []
            name = obj["metadata"]["name"]
            definition = definitions.parse_definition(as_written(obj), f"{t.kind.lower()}/{name}", problems)
            if definition is not None and not problems:
                found.controllers.append(definition)
            elif name in before and not isinstance(before[name], watch.Watch):
                found.controllers.append(before[name])
                found.kept.add(name)
            found.objects.append((t, obj, problems))
    _read_watches(client, discovery, found, before)
    return found


def _read_watches(client: KubeClient, discovery: Discovery, found: ClusterDefinitions, before: dict[str, Any]) -> None:
    """regokite's Watch objects, in every namespace; each runs under the name `<namespace>/<name>`."""
    try:
        t = discovery.resolve(watch.API_VERSION, "watches", wait=0.0)
    except DiscoveryError:
        return
    try:
        items = client.get(f"/apis/{watch.API_VERSION}/watches").get("items", [])
    except ApiError as exc:
        if exc.status != 404:
            raise
        return
    for obj in items:
        problems: list[str] = []
        key = object_key(obj)
        parsed = watch.parse_watch(as_written(obj), f"watch/{key}", problems)
        if parsed is not None and not problems:
            found.watches.append(replace(parsed, name=key))
        elif isinstance(before.get(key), watch.Watch):
            found.watches.append(before[key])
            found.kept.add(key)
        found.objects.append((t, obj, problems))


def object_key(obj: Obj) -> str:
    """How a definition is named among the running ones: `name`, or `namespace/name` for a Watch."""
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


def status_of(obj: Obj, problems: list[str]) -> Obj:
    """The status a definition object should carry."""
    condition = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "running"}
    if problems:
        message = "; ".join(problems)
        condition = {"type": "Accepted", "status": "False", "reason": "InvalidDefinition", "message": message}
    status = dict(obj.get("status") or {})
    status["observedGeneration"] = obj["metadata"].get("generation", 0)
    status["conditions"] = [condition]
    return status


def report(found: ClusterDefinitions, actuator: Actuator, refused: dict[str, Exception] | None = None) -> None:
    """Write each definition's status where it differs from what it says now; `refused`: definitions that
    parse but cannot run (a hook naming no loaded package, a type not served), by name."""
    for t, obj, parsed in found.objects:
        problems = parsed or [f"{t.kind.lower()}/{object_key(obj)}: {e}" for e in _get(refused, obj)]
        if parsed and object_key(obj) in found.kept:
            problems = [*parsed, "the last accepted version keeps running"]
        wanted = status_of(obj, problems)
        if obj.get("status") == wanted:
            continue
        if problems:
            log.warning("definition refused", extra={"definition": obj["metadata"]["name"], "problems": problems})
        try:
            actuator.set_status(t, obj, wanted, controller=STATUS_WRITER)
        except ApiError as exc:  # deleted meanwhile, or no right to: the controllers run regardless
            log.warning(
                "could not write definition status",
                extra={"definition": obj["metadata"]["name"], "error": str(exc)[:500]},
            )


def _get(refused: dict[str, Exception] | None, obj: Obj) -> list[Exception]:
    found = (refused or {}).get(object_key(obj))
    return [found] if found is not None else []


def as_written(obj: Obj) -> Obj:
    """The object as its author wrote it: what the API server adds is not the author's to answer for."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "labels", "annotations")}
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "spec": obj.get("spec")}
