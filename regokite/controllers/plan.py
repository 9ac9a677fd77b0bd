"""`regokite plan`: offline, what a controller would do for one parent.

The object file may be a CompositeController's parent, a DecoratorController's
target (its attachments, then its labels and annotations) or the object of a
Watch (one event, `--event`, default ADDED: its patch, applies, deletes,
Events and log lines). For controllers it runs the sync (or, for a parent with a deletionTimestamp, the finalize) hook
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regokite import outline, yamldoc
from regokite.controllers import definitions, failing, sync
from regokite.controllers.composite import decisions as composite
from regokite.controllers.decorator import decisions as decorator
from regokite.controllers.decorator.decisions import DecoratorController
from regokite.controllers.definitions import CompositeController
from regokite.controllers.hooks import RESPONSE_FIELDS, LocalHooks, group_children, resolve_hook, run_hook, sync_request
from regokite.controllers.schema import ResourceRule
from regokite.controllers.watch import decisions as watches
from regokite.engine import EngineSettings, open_engine
from regokite.errors import RegokiteError
from regokite.resources import Action, ChildType

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
    actions: list[Action]
    resync_after_seconds: float | None
    finalized: bool
    finalizing: bool
    finalizers: list[str] | None = None  # written first: our finalizer added or removed
    release: bool = False  # our finalizer removed at the end
    kind: str = "CompositeController"
    beside: list[str] = field(default_factory=list)  # writes after the children's: a decorator's labels, a watch's
    events: list[str] = field(default_factory=list)

    def steps(self) -> list[str]:
        """Every write, in the order the controller makes them."""
        out = [f"set finalizers {self.finalizers}"] if self.finalizers is not None else []
        out += [a.describe() for a in self.actions]
        out += self.beside
        if self.release:
            out.append("remove finalizer (finalized)")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
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
            "steps": self.steps(),
            "events": self.events,
        }

    def render(self) -> str:
        noun = {"CompositeController": "children", "DecoratorController": "attachments"}.get(self.kind, "applies")
        lines = [f"{self.kind} {self.controller}, {self.parent}" + (" (finalizing)" if self.finalizing else "")]
        lines.append(f"desired {noun} ({len(self.children)}):")
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
        lines.extend(f"event {e}" for e in self.events)
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
    engine: EngineSettings | None = None,
    event: str = "ADDED",
) -> PlanReport:
    """What one sync of the object in `parent_file` would do, given the observed objects in `observed_dir`:
    the same `sync.begin` and `sync.plan` the controller runs (for a Watch, the same output checks), with
    one evaluation of the hook."""
    parents = _read_objects(Path(parent_file))
    if len(parents) != 1:
        raise RegokiteError(f"{parent_file}: expected exactly one parent object, found {len(parents)}")
    parent = parents[0]
    parent.setdefault("metadata", {}).setdefault("uid", "00000000-0000-0000-0000-000000000000")
    loaded = definitions.load(controllers)
    observed_objs = _read_objects(Path(observed_dir)) if observed_dir else []
    crds = [*loaded.crds, *(o for o in observed_objs if o.get("kind") == "CustomResourceDefinition")]
    known = _offline_types(crds)
    definition = _pick([*loaded.controllers, *loaded.watches], parent, controller, known)
    engine = engine or EngineSettings()
    bundle = engine.load(policies).without_tests()
    outlines = outline.outline(bundle.modules)
    packages, files = outline.packages(outlines), outline.package_files(outlines)
    opened = open_engine(bundle, engine)
    try:
        hooks = LocalHooks(opened)
        if isinstance(definition, watches.Watch):
            return _plan_watch(definition, parent, packages, hooks, event)
        return _plan_sync(definition, parent, observed_objs, packages, hooks, known, files)
    finally:
        opened.close()


def _plan_sync(
    definition: CompositeController | DecoratorController,
    parent: dict[str, Any],
    observed_objs: list[dict[str, Any]],
    packages: dict[str, set[str]],
    hooks: LocalHooks,
    known: dict[tuple[str, str], ChildType],
    files: dict[str, str],
) -> PlanReport:
    is_decorator = isinstance(definition, DecoratorController)
    meta, finalizer = parent["metadata"], definition.finalizer
    held = list(meta.get("finalizers") or ())
    if meta.get("deletionTimestamp") and definition.hooks.finalize and finalizer not in held:
        meta["finalizers"] = [*held, finalizer]  # the controller added it on its first sync
    selected = True
    if isinstance(definition, DecoratorController):
        selected = any(
            r.selects(parent) for r in definition.resources if _acts_on(r.api_version, r.resource, None, parent, known)
        )
    start = sync.begin(parent, finalizer, finalize_hook=definition.hooks.finalize is not None, selected=selected)
    name = f"{parent.get('kind')} {meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta.get('name')}"
    kind = "DecoratorController" if is_decorator else "CompositeController"
    if start.hook is None:
        return PlanReport(definition.name, name, [], None, [], None, False, False, start.finalizers, kind=kind)
    target = definition.hooks.finalize if start.finalizing else definition.hooks.sync
    assert target is not None
    fields = decorator.RESPONSE_FIELDS if is_decorator else RESPONSE_FIELDS
    hook = resolve_hook(target, packages, fields, files=files)
    parent_namespaced = bool(meta.get("namespace"))
    rules = definition.attachments if isinstance(definition, DecoratorController) else definition.children
    types = [_offline_type(c, known) for c in rules]
    observed = _observed_children(definition, parent, types, observed_objs)
    names = ("object", "attachments") if is_decorator else ("parent", "children")
    grouped = group_children(types, observed, parent_namespaced, hook.target.uniform)
    request = sync_request(definition.raw, failing.hidden(parent), grouped, finalizing=start.finalizing, names=names)
    response = run_hook(
        hooks,
        hook,
        request,
        types=types,
        parent=parent,
        parent_namespaced=parent_namespaced,
        translate=decorator.translate_response if is_decorator else None,
    )
    planned = sync.plan(
        definition,
        parent,
        types,
        observed,
        response,
        finalizing=start.finalizing,
        observed_generation=not is_decorator,
    )
    beside = []
    if is_decorator and not decorator.metadata_settled(parent, response.labels, response.annotations):
        labels = {"labels": response.labels, "annotations": response.annotations}
        beside.append(
            f"apply labels and annotations {json.dumps(labels, sort_keys=True)} as {definition.field_manager}"
        )
    return PlanReport(
        controller=definition.name,
        parent=name,
        children=list(response.children),
        status=response.status,
        actions=list(planned.actions),
        resync_after_seconds=response.resync_after_seconds,
        finalized=response.finalized,
        finalizing=start.finalizing,
        finalizers=start.finalizers,
        release=planned.release,
        kind=kind,
        beside=beside,
        events=[f"{e.type} {e.reason}: {e.message}" for e in response.events],
    )


def _observed_children(
    definition: CompositeController | DecoratorController,
    parent: dict[str, Any],
    types: list[ChildType],
    observed_objs: list[dict[str, Any]],
) -> dict[str, list[dict[str, Any]]]:
    """The given objects the parent owns (or would adopt), by child type, as its controller would observe them."""
    namespace = parent["metadata"].get("namespace")
    observed: dict[str, list[dict[str, Any]]] = {}
    for t in types:
        candidates = [o for o in observed_objs if o.get("kind") == t.kind and o.get("apiVersion") == t.api_version]
        for o in candidates:
            if namespace and t.namespaced:
                o.setdefault("metadata", {}).setdefault("namespace", namespace)
        if isinstance(definition, DecoratorController):
            observed[t.key] = [dict(o) for o in decorator.owned_attachments(definition, parent, candidates)]
        else:
            claims = composite.claim(parent, composite.parent_selector(definition, parent), candidates)
            observed[t.key] = claims.owned + claims.adopt
    return observed


def _plan_watch(
    w: watches.Watch, obj: dict[str, Any], packages: dict[str, set[str]], hooks: LocalHooks, event: str
) -> PlanReport:
    hook = watches.resolve_outputs(w.package, packages)
    decision = watches.translate(
        w.package, hooks.evaluate(hook, watches.watch_input(event, obj, None, w.params)), event=event
    )
    meta = obj["metadata"]
    where = f"{meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta.get('name')}"
    steps = []
    if decision.patch:
        steps.append(f"patch {obj.get('kind')} {where} {json.dumps(decision.patch, sort_keys=True)}")
    for body in decision.apply:
        m = body["metadata"]
        ns = m.get("namespace") or meta.get("namespace")
        steps.append(f"apply {body['kind']} {ns + '/' if ns else ''}{m['name']}")
    steps += [f"delete {ref.describe()}" for ref in decision.delete]
    steps += [f"log {line.level}: {line.msg}" for line in decision.log]
    return PlanReport(
        controller=w.name,
        parent=f"{obj.get('kind')} {where}, event {event}",
        children=list(decision.apply),
        status=None,
        actions=[],
        resync_after_seconds=None,
        finalized=False,
        finalizing=False,
        kind="Watch",
        beside=steps,
        events=[f"{e.type} {e.reason}: {e.message}" for e in decision.events],
    )


Definition = CompositeController | DecoratorController | watches.Watch


def _acts_on(
    api_version: str,
    resource: str | None,
    kind: str | None,
    obj: dict[str, Any],
    known: dict[tuple[str, str], ChildType],
) -> bool:
    """Whether a rule (apiVersion with a plural resource or a kind) covers `obj`; a resource whose
    kind is not known offline is taken at its apiVersion."""
    if api_version != obj.get("apiVersion"):
        return False
    if kind:
        return kind == obj.get("kind")
    t = known.get((api_version, resource or ""))
    return t is None or t.kind == obj.get("kind")


def _rules(d: Definition) -> list[tuple[str, str | None, str | None]]:
    if isinstance(d, watches.Watch):
        return [(d.resource.api_version, d.resource.resource, d.resource.kind)]
    if isinstance(d, DecoratorController):
        return [(r.api_version, r.resource, None) for r in d.resources]
    return [(d.parent.api_version, d.parent.resource, None)]


def _pick(
    candidates: list[Definition],
    parent: dict[str, Any],
    name: str | None,
    known: dict[tuple[str, str], ChildType],
) -> Definition:
    if not candidates:
        raise RegokiteError(
            "plan works on CompositeControllers, DecoratorControllers and Watches; --controllers has none"
        )
    if name:
        for d in candidates:
            if d.name == name:
                return d
        raise RegokiteError(f"no controller named {name!r} (have: {', '.join(d.name for d in candidates)})")
    api_version, kind = parent.get("apiVersion"), parent.get("kind", "")
    matching = [d for d in candidates if any(_acts_on(*r, parent, known) for r in _rules(d))]
    if len(matching) > 1:  # a type known offline decides; one that is not cannot
        matching = [d for d in matching if any(r[2] or (r[0], r[1]) in known for r in _rules(d))] or matching
    if not matching:
        have = ", ".join(f"{d.name} ({'; '.join(f'{r[0]} {r[1] or r[2]}' for r in _rules(d))})" for d in candidates)
        raise RegokiteError(
            f"no CompositeController, DecoratorController or Watch acts on {kind}.{api_version}; have: {have}"
        )
    if len(matching) > 1:
        names = ", ".join(d.name for d in matching)
        raise RegokiteError(
            f"{len(matching)} definitions act on a {kind}.{api_version} object ({names}): choose one with --controller"
        )
    return matching[0]
