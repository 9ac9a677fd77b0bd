"""`regokite plan`: offline, what a controller would do for one parent.

Runs the sync (or, for a parent with a deletionTimestamp, the finalize) hook
on a parent file and the observed children found in a directory, and reports
the writes in the order the controller makes them: the same `sync.begin` and
`sync.plan` as the controller, one evaluation of the hook. No cluster: kinds
and scopes come from a table of common resources and from the
CustomResourceDefinitions kept beside the definitions (or in the observed
directory). A parent file with a deletionTimestamp is taken to carry the
controller's finalizer, as it would in the cluster.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regokite import outline, yamldoc
from regokite.bundle import load_bundle
from regokite.controllers import composite, definitions, sync
from regokite.controllers.definitions import CompositeController
from regokite.controllers.hooks import group_children, resolve_hook, run_hook, sync_request
from regokite.controllers.schema import ResourceRule
from regokite.engine import open_engine
from regokite.engine.extensions import ExtensionOptions
from regokite.errors import RegokiteError
from regokite.resources import ChildType

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
_APPS = ("deployments", "statefulsets", "daemonsets", "replicasets", "controllerrevisions")
BUILTIN_VERSIONS: dict[str, tuple[str, ...]] = {
    **{r: ("apps/v1",) for r in _APPS},
    **{r: ("batch/v1",) for r in ("jobs", "cronjobs")},
    **{r: ("networking.k8s.io/v1",) for r in ("ingresses", "networkpolicies")},
    **{r: ("rbac.authorization.k8s.io/v1",) for r in ("roles", "rolebindings", "clusterroles", "clusterrolebindings")},
    "poddisruptionbudgets": ("policy/v1",),
    "horizontalpodautoscalers": ("autoscaling/v2", "autoscaling/v1"),
    "storageclasses": ("storage.k8s.io/v1",),
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
    finalizers: list[str] | None = None  # written first: our finalizer added or removed
    release: bool = False  # our finalizer removed at the end

    def steps(self) -> list[str]:
        """Every write, in the order the controller makes them."""
        out = [f"set finalizers {self.finalizers}"] if self.finalizers is not None else []
        out += [a.describe() for a in self.actions]
        if self.release:
            out.append("remove finalizer (finalized)")
        return out

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
        steps = self.steps()
        lines.append("actions:" if steps else "actions: none (in sync)")
        lines.extend(f"  {step}" for step in steps)
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


def _offline_types(crds: list[dict[str, Any]]) -> dict[tuple[str, str], ChildType]:
    """Kinds and scopes known without a cluster: common built-in resources, and the CRDs kept beside
    the definitions (or among the observed objects), by (apiVersion, plural)."""
    known = {
        (api_version, plural): ChildType(api_version, plural, kind, plural not in CLUSTER_SCOPED)
        for plural, kind in KINDS.items()
        for api_version in BUILTIN_VERSIONS.get(plural, ("v1",))
    }
    for crd in crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        for version in spec.get("versions") or ():
            api_version = f"{spec.get('group')}/{version.get('name')}"
            subresources = version.get("subresources") or {}
            known[(api_version, names.get("plural", ""))] = ChildType(
                api_version,
                names.get("plural", ""),
                names.get("kind", ""),
                spec.get("scope") != "Cluster",
                status_subresource="status" in subresources,
            )
    return known


def _offline_type(rule: ResourceRule, known: dict[tuple[str, str], ChildType]) -> ChildType:
    found = known.get((rule.api_version, rule.resource))
    if found is None:
        raise RegokiteError(
            f"cannot tell the kind of {rule} offline: keep its CustomResourceDefinition beside the controller"
        )
    return found


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
    """What one sync of the parent in `parent_file` would do, given the observed objects in `observed_dir`:
    the same `sync.begin` and `sync.plan` the controller runs, with one evaluation of the hook."""
    parents = _read_objects(Path(parent_file))
    if len(parents) != 1:
        raise RegokiteError(f"{parent_file}: expected exactly one parent object, found {len(parents)}")
    parent = parents[0]
    parent.setdefault("metadata", {}).setdefault("uid", "00000000-0000-0000-0000-000000000000")
    loaded = definitions.load(controllers)
    observed_objs = _read_objects(Path(observed_dir)) if observed_dir else []
    crds = [*loaded.crds, *(o for o in observed_objs if o.get("kind") == "CustomResourceDefinition")]
    known = _offline_types(crds)
    definition = _pick(loaded.composites, parent, controller, known)
    bundle = load_bundle(policies, v0_compatible=v0_compatible).without_tests()
    packages = outline.packages(outline.outline(bundle.modules))
    meta, finalizer = parent["metadata"], definition.finalizer
    held = list(meta.get("finalizers") or ())
    if meta.get("deletionTimestamp") and definition.hooks.finalize and finalizer not in held:
        meta["finalizers"] = [*held, finalizer]  # the controller added it on its first sync
    start = sync.begin(parent, definition.finalizer, finalize_hook=definition.hooks.finalize is not None)
    target = definition.hooks.finalize if start.finalizing else definition.hooks.sync
    assert target is not None
    hook = resolve_hook(target, packages)
    parent_namespaced = bool(parent["metadata"].get("namespace"))
    types = [_offline_type(c, known) for c in definition.children]
    selector = composite.parent_selector(definition, parent)
    observed: dict[str, list[dict[str, Any]]] = {}
    for t in types:
        candidates = [o for o in observed_objs if o.get("kind") == t.kind and o.get("apiVersion") == t.api_version]
        for o in candidates:
            if parent_namespaced and t.namespaced:
                o.setdefault("metadata", {}).setdefault("namespace", parent["metadata"].get("namespace"))
        claims = composite.claim(parent, selector, candidates)
        observed[t.key] = claims.owned + claims.adopt
    request = sync_request(
        definition.raw, parent, group_children(types, observed, parent_namespaced), finalizing=start.finalizing
    )
    engine = open_engine(bundle, options=options)
    try:
        response = run_hook(engine, hook, request, types=types, parent=parent, parent_namespaced=parent_namespaced)
    finally:
        engine.close()
    planned = sync.plan(definition, parent, types, observed, response, finalizing=start.finalizing)
    return PlanReport(
        controller=definition.name,
        parent=f"{parent.get('kind')} {meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta.get('name')}",
        children=list(response.children),
        status=response.status,
        actions=list(planned.actions),
        resync_after_seconds=response.resync_after_seconds,
        finalized=response.finalized,
        finalizing=start.finalizing,
        finalizers=start.finalizers,
        release=planned.release,
    )


def _pick(
    composites: list[CompositeController],
    parent: dict[str, Any],
    name: str | None,
    known: dict[tuple[str, str], ChildType],
) -> CompositeController:
    if not composites:
        raise RegokiteError("plan works on CompositeControllers, and --controllers has none")
    if name:
        for d in composites:
            if d.name == name:
                return d
        raise RegokiteError(f"no controller named {name!r} (have: {', '.join(d.name for d in composites)})")
    api_version, kind = parent.get("apiVersion"), parent.get("kind", "")

    def parents_of_kind(d: CompositeController) -> bool:
        t = known.get((d.parent.api_version, d.parent.resource))
        return d.parent.api_version == api_version and (t is None or t.kind == kind)

    matching = [d for d in composites if parents_of_kind(d)]
    if len(matching) > 1:  # a parent type known offline decides; one that is not cannot
        matching = [d for d in matching if (d.parent.api_version, d.parent.resource) in known] or matching
    if not matching:
        parents = ", ".join(f"{d.name} ({d.parent.api_version} {d.parent.resource})" for d in composites)
        raise RegokiteError(f"no CompositeController has {kind}.{api_version} parents; have: {parents}")
    if len(matching) > 1:
        names = ", ".join(d.name for d in matching)
        raise RegokiteError(
            f"{len(matching)} controllers match a {kind}.{api_version} parent ({names}): choose one with --controller"
        )
    return matching[0]
