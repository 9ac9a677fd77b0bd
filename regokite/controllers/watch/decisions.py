"""Event-driven watches: `Watch` definitions and the Rego contract, pure (no I/O).

A Watch reacts to every change of one resource type, like Starkite's
`k8s.control()`, with the decision in Rego:

```yaml
apiVersion: regokite.dev/v1alpha1
kind: Watch
metadata: {name: deployment-scaler}
spec:
  resource: {apiVersion: apps/v1, resource: deployments}   # or kind: Deployment
  namespace: shop                      # default: every namespace (or the controller's --namespace)
  labelSelector: {matchLabels: {enforce-max-replicas: "true"}}   # or "a=b,c in (d)"
  fieldSelector: metadata.namespace!=kube-system
  resyncPeriodSeconds: 30              # RESYNC events for every object; 0/absent: never
  workers: 2
  policy: {package: watches.deployment_scaler}
  params: {max_replicas: 3}            # input.params; `--var max_replicas=5` overrides
```

Input: `{event: ADDED|MODIFIED|DELETED|RESYNC, object, oldObject, params}`;
on DELETED `object` is the last state the watch saw. Output rules, all
optional: `patch` (RFC 6902 operations, or a merge patch object, on the
watched object), `apply` (objects to server-side apply), `delete` (object
references), `events` (`{type, reason, message}` Events on the watched
object) and `log` (strings, or `{msg, level}`). A package's other rules are
its helpers; a target naming one rule must produce an object with only those
keys. Every problem names package, rule and value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from regokite import yamldoc
from regokite.controllers import schema
from regokite.controllers.hooks import ResolvedHook, objects_of, resolve_hook, validate_events
from regokite.controllers.schema import HookTarget
from regokite.errors import HookError, show
from regokite.resources import HookEvent
from regokite.selectors import SelectorError, parse_selector

API_GROUP = "regokite.dev"
API_VERSION = f"{API_GROUP}/v1alpha1"
KIND = "Watch"
EVENTS = ("ADDED", "MODIFIED", "DELETED", "RESYNC")
OUTPUTS = ("patch", "apply", "delete", "events", "log")
PATCH_OPS = ("add", "remove", "replace", "move", "copy", "test")
LOG_LEVELS = ("debug", "info", "warning", "error")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_PARAM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ----------------------------------------------------------------------- definitions


@dataclass(frozen=True)
class WatchResource:
    api_version: str
    resource: str | None = None  # plural; None when only the kind is given (resolved by discovery)
    kind: str | None = None

    def __str__(self) -> str:
        return f"{self.resource or self.kind}.{self.api_version}"


@dataclass(frozen=True)
class Watch:
    name: str
    resource: WatchResource
    package: str
    namespace: str | None = None
    label_selector: str | None = None  # the query-parameter form
    field_selector: str | None = None
    resync_period_seconds: float | None = None
    workers: int = 1
    params: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ref(self) -> str:
        return f"data.{self.package}"


def is_watch(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("apiVersion"), str) and doc["apiVersion"].startswith(API_GROUP)


def parse_watch(doc: Mapping[str, Any], source: str, problems: list[str]) -> Watch | None:
    """One `regokite.dev` document -> a Watch, or None with problems appended."""
    meta_raw = doc.get("metadata")
    name = meta_raw.get("name") if isinstance(meta_raw, dict) else None
    kind = doc.get("kind")
    c = schema.Checker(f"{source}: {kind} {name or '(unnamed)'}", problems)
    if doc.get("apiVersion") != API_VERSION:
        c.error("apiVersion", f"must be {API_VERSION}, got {show(doc.get('apiVersion'))}")
    if kind != KIND:
        c.error("kind", f"must be {KIND}, got {show(kind)}")
        return None
    c.obj(doc, "", ("apiVersion", "kind", "metadata", "spec"))
    meta = c.obj(meta_raw, "metadata", ("name", "namespace", "labels", "annotations"), required=("name",))
    c.string(meta.get("name"), "metadata.name", _dns_label_ish)
    spec = c.obj(
        doc.get("spec"),
        "spec",
        (
            "resource",
            "namespace",
            "labelSelector",
            "fieldSelector",
            "resyncPeriodSeconds",
            "workers",
            "policy",
            "params",
        ),
        required=("resource", "policy"),
    )
    resource = _watch_resource(c, spec.get("resource"), "spec.resource")
    namespace = c.string(spec.get("namespace"), "spec.namespace") or None
    label_selector = _selector(c, spec.get("labelSelector"), "spec.labelSelector")
    field_selector = c.string(spec.get("fieldSelector"), "spec.fieldSelector") or None
    resync = c.number(spec.get("resyncPeriodSeconds"), "spec.resyncPeriodSeconds")
    workers = spec.get("workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
        c.error("spec.workers", f"must be an integer from 1 to 64, got {show(workers)}")
    policy = c.obj(spec.get("policy"), "spec.policy", ("package",), required=("package",))
    package = c.string(policy.get("package"), "spec.policy.package", schema.package_name)
    params = c.obj(spec.get("params"), "spec.params", spec.get("params") or ())
    for key in params:
        if not _PARAM.match(str(key)):
            c.error(f"spec.params.{key}", "must be a Rego identifier (letters, digits, _)")
    if not c.ok or resource is None or package is None:
        return None
    return Watch(
        name=name,
        resource=resource,
        package=package.removeprefix("data."),
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        resync_period_seconds=resync or None,
        workers=workers,
        params=dict(params),
        source=source,
        raw=dict(doc),
    )


def _dns_label_ish(value: str) -> str | None:
    if not re.match(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", value) or len(value) > 253:
        return "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')"
    return None


def _watch_resource(c: schema.Checker, raw: Any, path: str) -> WatchResource | None:
    obj = c.obj(raw, path, ("apiVersion", "resource", "kind"), required=("apiVersion",))
    api_version = c.string(obj.get("apiVersion"), schema.join(path, "apiVersion"), schema.api_version_name)
    resource = c.string(obj.get("resource"), schema.join(path, "resource"), schema.resource_name)
    kind = c.string(
        obj.get("kind"),
        schema.join(path, "kind"),
        lambda v: None if _KIND.match(v) else f"must be a Kind like Deployment, got {v!r}",
    )
    if obj and not obj.get("resource") and not obj.get("kind"):
        c.error(path, "set resource (e.g. deployments) or kind (e.g. Deployment)")
    if api_version is None or (resource is None and kind is None):
        return None
    return WatchResource(api_version, resource, kind)


def _selector(c: schema.Checker, raw: Any, path: str) -> str | None:
    """A label selector, as a string (`a=b,c`) or a metav1.LabelSelector object -> query form."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        return raw
    before = len(c.problems)
    obj = schema.parse_label_selector(c, raw, path)
    if obj is None or len(c.problems) > before:
        return None
    try:
        return parse_selector(obj).query() or None
    except SelectorError as exc:
        c.error(path, str(exc))
        return None


def override_params(watches: Iterable[Watch], assignments: Iterable[str]) -> list[Watch]:
    """Apply `--var KEY=VALUE` (every watch) and `--var WATCH/KEY=VALUE` (one watch).

    VALUE is read as YAML (`5` is a number, `true` a boolean, `[a, b]` a list).
    """
    watches = list(watches)
    names = {w.name for w in watches}
    updates: dict[str | None, dict[str, Any]] = {}
    problems = []
    for a in assignments:
        target, sep, value = a.partition("=")
        if not sep or not target:
            problems.append(f"--var {a}: expected KEY=VALUE or WATCH/KEY=VALUE")
            continue
        watch, _, key = target.rpartition("/")
        if not _PARAM.match(key):
            problems.append(f"--var {a}: {key!r} is not a Rego identifier")
            continue
        if watch and watch not in names:
            problems.append(f"--var {a}: no watch named {watch!r} (watches: {', '.join(sorted(names)) or 'none'})")
            continue
        try:
            parsed = yamldoc.load(value) if value else ""
        except yamldoc.YAMLError:
            parsed = value
        updates.setdefault(watch or None, {})[key] = parsed
    if problems:
        raise schema.DefinitionError(problems)
    out = []
    for w in watches:
        params = {**w.params, **updates.get(None, {}), **updates.get(w.name, {})}
        out.append(replace(w, params=params))
    return out


# ----------------------------------------------------------------------- contract


def watch_input(event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, params: Mapping[str, Any]) -> dict:
    return {"event": event, "object": obj, "oldObject": old, "params": params}


@dataclass(frozen=True)
class Ref:
    """An object to delete: `apiVersion`, `kind`, `name`, `namespace` (optional), `uid` (a precondition)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind}.{self.api_version} {where}"


@dataclass(frozen=True)
class LogLine:
    level: str
    msg: str


@dataclass(frozen=True)
class WatchDecision:
    patch: list[dict[str, Any]] | dict[str, Any] | None = None  # RFC 6902 ops, or a merge patch
    apply: tuple[dict[str, Any], ...] = ()
    delete: tuple[Ref, ...] = ()
    events: tuple[HookEvent, ...] = ()
    log: tuple[LogLine, ...] = ()
    evaluation_seconds: float = 0.0

    @property
    def json_patch(self) -> bool:
        return isinstance(self.patch, list)

    @property
    def writes(self) -> bool:
        return bool(self.patch or self.apply or self.delete)


def translate(package: str, raw: Mapping[str, Any], *, event: str) -> WatchDecision:
    """Validate a raw output document `{rule: value}`; raise HookError naming package, rule and value."""
    unknown = sorted(set(raw) - set(OUTPUTS))
    if unknown:
        raise HookError(package, unknown[0], f"is not a watch output (outputs: {', '.join(OUTPUTS)})")
    patch = _patch(package, raw.get("patch"))
    if patch and event == "DELETED":
        raise HookError(package, "patch", f"the object is gone (event DELETED); got {show(patch)}")
    return WatchDecision(
        patch=patch,
        apply=_apply(package, raw.get("apply")),
        delete=_delete(package, raw.get("delete")),
        events=validate_events(package, raw.get("events")),
        log=_log(package, raw.get("log")),
    )


def _patch(package: str, value: Any) -> list[dict[str, Any]] | dict[str, Any] | None:
    if value is None or value == [] or value == {}:
        return None
    if isinstance(value, dict):
        if "op" in value and "path" in value:
            raise HookError(package, "patch", f"a single RFC 6902 operation must be in an array: {show(value)}")
        return value  # a JSON merge patch
    if not isinstance(value, list):
        raise HookError(
            package, "patch", f"must be an array of RFC 6902 operations or a merge patch object: {show(value)}"
        )
    for i, op in enumerate(value):
        if not isinstance(op, dict):
            raise HookError(package, "patch", f"patch[{i}] is not an operation object: {show(op)}")
        if op.get("op") not in PATCH_OPS:
            raise HookError(package, "patch", f"patch[{i}].op must be one of {', '.join(PATCH_OPS)}: {show(op)}")
        path = op.get("path")
        if not isinstance(path, str) or not (path == "" or path.startswith("/")):
            raise HookError(package, "patch", f"patch[{i}].path must be a JSON pointer (/spec/replicas): {show(op)}")
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise HookError(package, "patch", f"patch[{i}] ({op['op']}) needs a value: {show(op)}")
        if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
            raise HookError(package, "patch", f"patch[{i}] ({op['op']}) needs from: {show(op)}")
        extra = set(op) - {"op", "path", "value", "from"}
        if extra:
            raise HookError(package, "patch", f"patch[{i}] has unknown fields {sorted(extra)}: {show(op)}")
    return list(value)


def _apply(package: str, value: Any) -> tuple[dict[str, Any], ...]:
    seen: set[tuple[str, str, str | None, str]] = set()
    for i, obj in objects_of(package, "apply", value, "an array or set of objects"):
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise HookError(package, "apply", f"apply[{i}] has no {key}: {show(obj)}")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise HookError(package, "apply", f"apply[{i}] has no metadata.name: {show(obj)}")
        ns = meta.get("namespace")
        if ns is not None and not isinstance(ns, str):
            raise HookError(package, "apply", f"apply[{i}].metadata.namespace is not a string: {show(obj)}")
        key = (obj["apiVersion"], obj["kind"], ns, meta["name"])
        if key in seen:
            raise HookError(package, "apply", f"apply[{i}] appears twice: {show(obj)}")
        seen.add(key)
    return tuple(value or ())


def _delete(package: str, value: Any) -> tuple[Ref, ...]:
    refs = []
    for i, r in objects_of(package, "delete", value, "an array or set of object references"):
        if isinstance(r.get("metadata"), dict):  # a whole object: take its reference
            meta = r["metadata"]
            r = {k: v for k, v in (("apiVersion", r.get("apiVersion")), ("kind", r.get("kind"))) if v is not None} | {
                k: meta[k] for k in ("name", "namespace", "uid") if k in meta
            }
        extra = set(r) - {"apiVersion", "kind", "name", "namespace", "uid"}
        if extra:
            raise HookError(package, "delete", f"delete[{i}] has unknown fields {sorted(extra)}: {show(r)}")
        for key in ("apiVersion", "kind", "name"):
            if not isinstance(r.get(key), str) or not r[key]:
                raise HookError(package, "delete", f"delete[{i}] has no {key}: {show(r)}")
        for key in ("namespace", "uid"):
            if r.get(key) is not None and not isinstance(r[key], str):
                raise HookError(package, "delete", f"delete[{i}].{key} is not a string: {show(r)}")
        refs.append(Ref(r["apiVersion"], r["kind"], r["name"], r.get("namespace") or None, r.get("uid") or None))
    return tuple(refs)


def _log(package: str, value: Any) -> tuple[LogLine, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise HookError(package, "log", f"must be a string, or an array or set of messages, got {show(value)}")
    lines = []
    for i, m in enumerate(value):
        if isinstance(m, str):
            lines.append(LogLine("info", m))
            continue
        if not isinstance(m, dict) or not isinstance(m.get("msg"), str):
            raise HookError(package, "log", f"log[{i}] must be a string or {{msg, level}}: {show(m)}")
        level = m.get("level", "info")
        if level not in LOG_LEVELS:
            raise HookError(package, "log", f"log[{i}].level must be one of {', '.join(LOG_LEVELS)}: {show(m)}")
        extra = set(m) - {"msg", "level"}
        if extra:
            raise HookError(package, "log", f"log[{i}] has unknown fields {sorted(extra)}: {show(m)}")
        lines.append(LogLine(level, m["msg"]))
    return tuple(lines)


def resolve_outputs(package: str, packages: Mapping[str, set[str]]) -> ResolvedHook:
    """The watch's policy checked against the bundle (its output rules, or one rule whose value is the
    output object); evaluated by the same `evaluate_hook` as every controller hook. Raises HookError."""
    return resolve_hook(HookTarget(package), packages, OUTPUTS, noun="watch outputs")
