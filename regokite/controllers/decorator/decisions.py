"""DecoratorController, pure: definition, target selection, hook request and response.

A decorator adds behaviour to objects it does not own: for every object of
its `resources` that passes the rule's label and annotation selectors, the
sync hook answers `labels`, `annotations`, `status` and `attachments`.
Attachments are owned by the target (a controller owner reference plus the
annotation `metacontroller.k8s.io/decorator-controller: <name>`, as
Metacontroller marks them), so the garbage collector removes them with it.

Labels and annotations are written with server-side apply under a field
manager of the decorator's own (`regokite-decorator-<name>`): the applied
set is exactly the non-null entries of the response, so a key the policy
maps to null, or stops mentioning, is removed when this decorator was its
only owner, and keys other managers set are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from regokite.controllers import hooks, schema
from regokite.controllers.hooks import HookResponse
from regokite.controllers.schema import ChildResource, Hooks, ResourceRule
from regokite.errors import HookError, show
from regokite.resources import ChildType, controller_ref
from regokite.selectors import Selector, parse_selector

DECORATOR_ANNOTATION = "metacontroller.k8s.io/decorator-controller"
ATTACHMENT_METHODS = ("OnDelete", "Recreate", "InPlace")
RESPONSE_FIELDS = ("labels", "annotations", "status", "attachments", "resyncAfterSeconds", "finalized", "events")


@dataclass(frozen=True)
class TargetResource(ResourceRule):
    label_selector: dict[str, Any] | None = None
    annotation_selector: dict[str, Any] | None = None

    def selects(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.label_selector and not parse_selector(self.label_selector).matches(meta.get("labels")):
            return False
        if self.annotation_selector:
            sel = annotation_selector(self.annotation_selector)
            if not sel.matches(meta.get("annotations")):
                return False
        return True


@dataclass(frozen=True)
class DecoratorController:
    name: str
    resources: tuple[TargetResource, ...]
    attachments: tuple[ChildResource, ...]
    hooks: Hooks
    resync_period_seconds: float | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    generate_selector: bool = False  # attachments carry no selector label (children.decorate_child reads this)

    @property
    def finalizer(self) -> str:
        return f"metacontroller.io/decoratorcontroller-{self.name}"

    @property
    def child_annotations(self) -> dict[str, str]:
        """Every attachment names the decorator that made it."""
        return {DECORATOR_ANNOTATION: self.name}

    @property
    def field_manager(self) -> str:
        return f"regokite-decorator-{self.name}"

    def child_rule(self, api_version: str, resource: str) -> ChildResource | None:
        return next((c for c in self.attachments if c.api_version == api_version and c.resource == resource), None)


def annotation_selector(raw: Mapping[str, Any]) -> Selector:
    """`{matchAnnotations, matchExpressions}` -> a Selector over annotations."""
    return parse_selector(
        {"matchLabels": raw.get("matchAnnotations") or {}, "matchExpressions": raw.get("matchExpressions") or []}
    )


# ----------------------------------------------------------------------- parsing


def parse_decorator(
    c: schema.Checker, doc: dict[str, Any], name: str | None, source: str
) -> DecoratorController | None:
    spec = schema.metacontroller_spec(
        c, doc, ("resources", "attachments", "resyncPeriodSeconds", "hooks"), required=("resources",)
    )
    resources = tuple(
        r
        for i, raw in enumerate(c.array(spec.get("resources"), "spec.resources"))
        if (r := _target(c, raw, f"spec.resources[{i}]")) is not None
    )
    attachments = []
    for i, raw in enumerate(c.array(spec.get("attachments"), "spec.attachments")):
        path = f"spec.attachments[{i}]"
        if isinstance(raw, dict) and isinstance(raw.get("updateStrategy"), dict):
            method = raw["updateStrategy"].get("method")
            if method is not None and method not in ATTACHMENT_METHODS:
                c.error(f"{path}.updateStrategy.method", f"must be one of {', '.join(ATTACHMENT_METHODS)}")
                continue
            if raw["updateStrategy"].get("statusChecks") is not None:
                c.error(f"{path}.updateStrategy.statusChecks", "unknown field (attachments have no rolling updates)")
                continue
        child = schema.parse_child(c, raw, path)
        if child is not None:
            attachments.append(child)
    schema.refuse_duplicates(c, attachments, "spec.attachments")
    hooks = schema.parse_hooks(c, spec.get("hooks"), "spec.hooks")
    resync = c.number(spec.get("resyncPeriodSeconds"), "spec.resyncPeriodSeconds")
    if not c.ok or hooks is None or not name:
        return None
    return DecoratorController(
        name=name,
        resources=resources,
        attachments=tuple(attachments),
        hooks=hooks,
        resync_period_seconds=resync or None,
        source=source,
        raw=doc,
    )


def _target(c: schema.Checker, raw: Any, path: str) -> TargetResource | None:
    obj = c.obj(
        raw, path, ("apiVersion", "resource", "labelSelector", "annotationSelector"), ("apiVersion", "resource")
    )
    api_version = c.string(obj.get("apiVersion"), schema.join(path, "apiVersion"), schema.api_version_name)
    resource = c.string(obj.get("resource"), schema.join(path, "resource"), schema.resource_name)
    labels = schema.parse_label_selector(c, obj.get("labelSelector"), schema.join(path, "labelSelector"))
    annotations = None
    if obj.get("annotationSelector") is not None:
        where = schema.join(path, "annotationSelector")
        raw_sel = c.obj(obj["annotationSelector"], where, ("matchAnnotations", "matchExpressions"))
        as_labels = {
            "matchLabels": raw_sel.get("matchAnnotations"),
            "matchExpressions": raw_sel.get("matchExpressions"),
        }
        start = len(c.problems)
        schema.parse_label_selector(c, {k: v for k, v in as_labels.items() if v is not None}, where)
        for i in range(start, len(c.problems)):
            c.problems[i] = c.problems[i].replace(f"{where}.matchLabels", f"{where}.matchAnnotations")
        annotations = raw_sel
    if api_version is None or resource is None:
        return None
    return TargetResource(api_version, resource, label_selector=labels, annotation_selector=annotations)


# ----------------------------------------------------------------------- the hook


def translate_response(package: str, raw: Mapping[str, Any], **target: Any) -> HookResponse:
    """Validate a raw decorator response (attachments become the response's children); raise HookError
    naming package, rule and value. `target`: `types`, `parent`, `parent_namespaced`, as for a composite."""
    response = hooks.translate_response(package, raw, children_rule="attachments", **target)
    labels = _string_map(package, "labels", raw.get("labels"))
    annotations = _string_map(package, "annotations", raw.get("annotations"))
    return replace(response, labels=labels, annotations=annotations)


def _string_map(package: str, rule: str, value: Any) -> dict[str, str | None]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HookError(package, rule, f"must be an object of strings (null deletes), got {show(value)}")
    for k, v in value.items():
        if v is not None and not isinstance(v, str):
            raise HookError(package, rule, f"{rule}[{k!r}] must be a string or null, got {show(v)}")
    return dict(value)


# ------------------------------------------------------------------- decisions


def metadata_apply(
    t: ChildType, obj: Mapping[str, Any], labels: Mapping[str, str | None], annotations: Mapping[str, str | None]
) -> dict[str, Any]:
    """The server-side apply body for the target's labels and annotations: exactly the
    non-null entries (what this decorator's field manager owns after the apply). The
    resourceVersion makes it an update of the object read, never a create."""
    meta = obj["metadata"]
    body_meta: dict[str, Any] = {"name": meta["name"], "resourceVersion": meta.get("resourceVersion")}
    if meta.get("namespace"):
        body_meta["namespace"] = meta["namespace"]
    body_meta["labels"] = {k: v for k, v in sorted(labels.items()) if v is not None}
    body_meta["annotations"] = {k: v for k, v in sorted(annotations.items()) if v is not None}
    return {
        "apiVersion": obj.get("apiVersion") or t.api_version,
        "kind": obj.get("kind") or t.kind,
        "metadata": body_meta,
    }


def metadata_settled(obj: Mapping[str, Any], labels: Mapping[str, str | None], annotations: Mapping[str, str | None]):
    """True when every non-null entry already has its value and every null key is absent."""
    meta = obj.get("metadata") or {}
    for want, have in ((labels, meta.get("labels") or {}), (annotations, meta.get("annotations") or {})):
        for k, v in want.items():
            if (v is None and k in have) or (v is not None and have.get(k) != v):
                return False
    return True


def owned_attachments(
    definition: DecoratorController, target: Mapping[str, Any], candidates: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Attachments whose controller is `target` and that this decorator made."""
    uid = target["metadata"]["uid"]
    out = []
    for obj in candidates:
        ref = controller_ref(obj)
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if ref is not None and ref.get("uid") == uid and annotations.get(DECORATOR_ANNOTATION) == definition.name:
            out.append(obj)
    return out
