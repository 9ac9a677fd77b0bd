"""`regokite plan`: offline, what a controller would do for one parent.

Runs the sync (or, for a parent with a deletionTimestamp, the finalize) hook
on a parent file and the observed children found in a directory, and reports
the desired children, the status, and the creates, updates and deletes. No
cluster: resource kinds and scopes come from a table of common resources and
from the objects themselves.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regokite import outline, yamldoc
from regokite.bundle import load_bundle
from regokite.controllers import composite
from regokite.controllers.definitions import CompositeController, ResourceRule, load_definitions
from regokite.controllers.hooks import ChildType, group_children, resolve_hook, run_hook, sync_request
from regokite.engine import open_engine
from regokite.engine.extensions import ExtensionOptions
from regokite.errors import RegokiteError

CLUSTER_SCOPED = {"namespaces", "nodes", "clusterroles", "clusterrolebindings", "persistentvolumes", "storageclasses"}
KINDS = {
    "pods": "Pod",
    "services": "Service",
    "configmaps": "ConfigMap",
    "secrets": "Secret",
    "serviceaccounts": "ServiceAccount",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "deployments": "Deployment",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "replicasets": "ReplicaSet",
    "jobs": "Job",
    "cronjobs": "CronJob",
    "ingresses": "Ingress",
    "networkpolicies": "NetworkPolicy",
    "roles": "Role",
    "rolebindings": "RoleBinding",
    "clusterroles": "ClusterRole",
    "clusterrolebindings": "ClusterRoleBinding",
    "namespaces": "Namespace",
    "poddisruptionbudgets": "PodDisruptionBudget",
    "horizontalpodautoscalers": "HorizontalPodAutoscaler",
}


@dataclass
class PlanReport:
    controller: str
    parent: str
    children: list[dict[str, Any]]
    status: dict[str, Any] | None
    actions: list[composite.Action]
    resync_after_seconds: float | None
    finalized: bool
    finalizing: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "controller": self.controller,
            "parent": self.parent,
            "finalizing": self.finalizing,
            "children": self.children,
            "status": self.status,
            "resyncAfterSeconds": self.resync_after_seconds,
            "finalized": self.finalized,
            "actions": [
                {"verb": a.verb, "kind": a.type.kind, "namespace": a.namespace, "name": a.name, "reason": a.reason}
                for a in self.actions
            ],
        }

    def render(self) -> str:
        lines = [f"controller {self.controller}, parent {self.parent}" + (" (finalizing)" if self.finalizing else "")]
        lines.append(f"desired children ({len(self.children)}):")
        for c in self.children:
            meta = c["metadata"]
            where = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
            lines.append(f"  {c['kind']}.{c['apiVersion']} {where}")
        lines.append("status: " + json.dumps(self.status, sort_keys=True))
        if self.resync_after_seconds:
            lines.append(f"resync after {self.resync_after_seconds:g} s")
        if self.finalizing:
            lines.append(f"finalized: {str(self.finalized).lower()}")
        lines.append("actions:" if self.actions else "actions: none (in sync)")
        lines.extend(f"  {a.describe()}" for a in self.actions)
        return "\n".join(lines)


def _read_objects(path: Path) -> list[dict[str, Any]]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    objs: list[dict[str, Any]] = []
    for f in files:
        try:
            docs = [json.loads(f.read_text())] if f.suffix == ".json" else list(yamldoc.load_all(f.read_text()))
        except (OSError, ValueError, yamldoc.YAMLError) as exc:
            raise RegokiteError(f"{f}: {exc}") from None
        for doc in docs:
            if isinstance(doc, dict) and doc.get("kind", "").endswith("List") and "items" in doc:
                objs.extend(doc["items"])
            elif isinstance(doc, dict):
                objs.append(doc)
    return objs


def _offline_type(rule: ResourceRule, examples: list[dict[str, Any]]) -> ChildType:
    kind = KINDS.get(rule.resource)
    if kind is None:
        for obj in examples:
            k = obj.get("kind", "")
            if obj.get("apiVersion") == rule.api_version and rule.resource in (
                k.lower() + "s",
                k.lower() + "es",
                k.lower()[:-1] + "ies",
            ):
                kind = k
                break
    if kind is None:
        raise RegokiteError(f"cannot tell the kind of {rule} offline: add an observed object of that type")
    return ChildType(rule.api_version, rule.resource, kind, rule.resource not in CLUSTER_SCOPED)


def plan_from_files(
    controllers: list[str],
    policies: list[str],
    parent_file: str,
    observed_dir: str | None = None,
    *,
    controller: str | None = None,
    v0_compatible: bool = False,
    options: ExtensionOptions | None = None,
) -> PlanReport:
    parents = _read_objects(Path(parent_file))
    if len(parents) != 1:
        raise RegokiteError(f"{parent_file}: expected exactly one parent object, found {len(parents)}")
    parent = parents[0]
    parent.setdefault("metadata", {}).setdefault("uid", "00000000-0000-0000-0000-000000000000")
    definition = _pick(load_definitions(controllers), parent, controller)
    observed_objs = _read_objects(Path(observed_dir)) if observed_dir else []
    bundle = load_bundle(policies, v0_compatible=v0_compatible).without_tests()
    packages = outline.packages(outline.outline(bundle.modules))
    finalizing = bool(parent["metadata"].get("deletionTimestamp"))
    target = definition.hooks.finalize if finalizing and definition.hooks.finalize else definition.hooks.sync
    hook = resolve_hook(target, packages)
    parent_type = _offline_type(definition.parent, [parent])
    engine = open_engine(bundle, options=options)
    try:
        types = [_offline_type(c, observed_objs + _children_hint(engine, hook, parent)) for c in definition.children]
        selector = composite.parent_selector(definition, parent)
        observed: dict[str, list[dict[str, Any]]] = {}
        for t in types:
            candidates = [o for o in observed_objs if o.get("kind") == t.kind and o.get("apiVersion") == t.api_version]
            for o in candidates:
                if parent_type.namespaced and t.namespaced:
                    o.setdefault("metadata", {}).setdefault("namespace", parent["metadata"].get("namespace"))
            claims = composite.claim(parent, selector, candidates)
            observed[t.key] = claims.owned + claims.adopt
        request = sync_request(
            definition.raw,
            parent,
            group_children(types, observed, parent_type.namespaced),
            finalizing=finalizing,
        )
        response = run_hook(engine, hook, request, types=types, parent=parent, parent_namespaced=parent_type.namespaced)
    finally:
        engine.close()
    actions = composite.plan_children(definition, parent, types, observed, response.children)
    meta = parent["metadata"]
    return PlanReport(
        controller=definition.name,
        parent=f"{parent.get('kind')} {meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta.get('name')}",
        children=list(response.children),
        status=response.status,
        actions=actions,
        resync_after_seconds=response.resync_after_seconds,
        finalized=response.finalized,
        finalizing=finalizing,
    )


def _children_hint(engine, hook, parent: dict[str, Any]) -> list[dict[str, Any]]:
    """The policy's children for an empty observed state, only to learn kinds offline."""
    from regokite.controllers.hooks import evaluate_hook

    try:
        raw = evaluate_hook(engine, hook, sync_request({}, parent, {}))
    except RegokiteError:
        return []
    children = raw.get("children")
    return [c for c in children if isinstance(c, dict)] if isinstance(children, list) else []


def _pick(loaded: list[Any], parent: dict[str, Any], name: str | None) -> CompositeController:
    definitions = [d for d in loaded if isinstance(d, CompositeController)]
    if not definitions:
        raise RegokiteError("plan works on CompositeControllers, and --controllers has none")
    if name:
        for d in definitions:
            if d.name == name:
                return d
        raise RegokiteError(f"no controller named {name!r} (have: {', '.join(d.name for d in definitions)})")
    api_version, kind = parent.get("apiVersion"), parent.get("kind", "")
    matching = [
        d
        for d in definitions
        if d.parent.api_version == api_version
        and (KINDS.get(d.parent.resource) == kind or d.parent.resource in (kind.lower() + "s", kind.lower() + "es"))
    ]
    if not matching:
        parents = ", ".join(f"{d.name} ({d.parent.api_version} {d.parent.resource})" for d in definitions)
        raise RegokiteError(f"no CompositeController has {kind}.{api_version} parents; have: {parents}")
    if len(matching) > 1:
        names = ", ".join(d.name for d in matching)
        raise RegokiteError(
            f"{len(matching)} controllers match a {kind}.{api_version} parent ({names}): choose one with --controller"
        )
    return matching[0]
