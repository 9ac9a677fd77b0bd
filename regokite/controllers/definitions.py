"""Controller definitions: Metacontroller `CompositeController` YAML, parsed and validated.

Definitions written for Metacontroller load verbatim. A hook either names a
Rego package (`rego: {package: a.b}`) or keeps its Metacontroller webhook
pointing at OPA's data API (`http://opa:8181/v0/data/a/b`), which is read as
the package (or rule) it names. Every unknown or invalid field is reported
with its path, e.g. `hello.yaml: CompositeController hello: spec.hooks.sync:
...`, never ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from regokite import yamldoc
from regokite.errors import RegokiteError

API_GROUP = "metacontroller.k8s.io"
API_VERSION = f"{API_GROUP}/v1alpha1"
UPDATE_METHODS = ("OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace")
SUPPORTED_METHODS = UPDATE_METHODS
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_OPA_DATA_PATH = re.compile(r"^/v(?P<version>[01])/data(?P<path>(/[^/]+)*)/?$")


class DefinitionError(RegokiteError):
    """One or more definitions are invalid; every problem is one line of the message."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class HookTarget:
    """What a hook evaluates: `data.<package>` (or one rule of it)."""

    package: str
    source: str = "rego"  # "rego" or "webhook" (a Metacontroller URL at OPA's data API)
    url: str | None = None
    api: str | None = None  # "v0" or "v1" for OPA data API URLs

    @property
    def ref(self) -> str:
        return f"data.{self.package}"


@dataclass(frozen=True)
class Hooks:
    sync: HookTarget | None = None
    finalize: HookTarget | None = None
    customize: HookTarget | None = None


@dataclass(frozen=True)
class ResourceRule:
    """A `group/version` + plural resource name, as Metacontroller's resource rules write it."""

    api_version: str
    resource: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def __str__(self) -> str:
        return f"{self.resource}.{self.api_version}"


@dataclass(frozen=True)
class ParentResource(ResourceRule):
    label_selector: dict[str, Any] | None = None
    ignore_status_changes: bool = False
    revision_history_field_paths: tuple[str, ...] = ("spec",)


@dataclass(frozen=True)
class ChildResource(ResourceRule):
    update_method: str = "OnDelete"
    status_checks: dict[str, Any] | None = None


@dataclass(frozen=True)
class CompositeController:
    name: str
    parent: ParentResource
    children: tuple[ChildResource, ...]
    hooks: Hooks
    generate_selector: bool = False
    resync_period_seconds: float | None = None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def finalizer(self) -> str:
        """The finalizer regokite keeps on parents while a finalize hook has work to do."""
        return f"regokite.dev/{self.name}"

    def child_rule(self, api_version: str, resource: str) -> ChildResource | None:
        return next((c for c in self.children if c.api_version == api_version and c.resource == resource), None)


# ----------------------------------------------------------------------- loading


def load_definitions(paths: Iterable[str | os.PathLike[str]]) -> list[Any]:
    """Every CompositeController and DecoratorController in `paths` (files with one or
    more YAML documents, or dirs).

    Documents of other API groups (a CRD kept beside its controller) are skipped;
    other Metacontroller kinds are refused, not ignored.
    """
    problems: list[str] = []
    found: list[Any] = []
    for file in _files(paths, problems):
        shown = _display(file)
        try:
            docs = list(yamldoc.load_all(file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{shown}: {exc}")
            continue
        except yamldoc.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark else shown
            problems.append(f"{where}: invalid YAML: {getattr(exc, 'problem', None) or exc}")
            continue
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            where = shown if len(docs) == 1 else f"{shown}[{index}]"
            definition = parse_definition(doc, where, problems)
            if definition is not None:
                found.append(definition)
    seen: dict[str, str] = {}
    for d in found:
        if d.name in seen:
            kind = type(d).__name__
            problems.append(f"{d.source}: {kind} {d.name}: metadata.name: also defined in {seen[d.name]}")
        seen.setdefault(d.name, d.source)
    if problems:
        raise DefinitionError(problems)
    if not found:
        raise DefinitionError([f"{', '.join(map(str, paths))}: no CompositeController or DecoratorController found"])
    return found


def _files(paths: Iterable[str | os.PathLike[str]], problems: list[str]) -> list[Path]:
    files: list[Path] = []
    for root in map(Path, paths):
        if root.is_file():
            files.append(root)
        elif root.is_dir():
            files.extend(
                p
                for p in sorted(root.rglob("*"))
                if p.is_file()
                and p.suffix in (".yaml", ".yml", ".json")
                and not any(part.startswith(".") for part in p.relative_to(root).parts)
                and p.name not in ("data.json", "data.yaml", "data.yml")  # bundle data, not definitions
            )
        else:
            problems.append(f"{root}: no such file or directory")
    return files


def _display(file: Path) -> str:
    try:
        return str(file.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(file)


# ----------------------------------------------------------------------- parsing


class _Checker:
    """Walks one document, collecting `path: problem` lines under a common prefix."""

    def __init__(self, prefix: str, problems: list[str]) -> None:
        self.prefix = prefix
        self.problems = problems
        self.start = len(problems)

    @property
    def ok(self) -> bool:
        return len(self.problems) == self.start

    def error(self, path: str, message: str) -> None:
        self.problems.append(f"{self.prefix}: {path}: {message}")

    def obj(self, value: Any, path: str, allowed: Iterable[str], required: Iterable[str] = ()) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.error(path, f"must be an object, got {_show(value)}")
            return {}
        allowed = set(allowed)
        for key in value:
            if key not in allowed:
                hint = f" (known fields: {', '.join(sorted(allowed))})" if allowed else ""
                self.error(_join(path, str(key)), f"unknown field{hint}")
        for key in required:
            if value.get(key) in (None, "", [], {}):
                self.error(_join(path, key), "required")
        return value

    def string(self, value: Any, path: str, check: Callable[[str], str | None] | None = None) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {_show(value)}")
            return None
        problem = check(value) if check else None
        if problem:
            self.error(path, problem)
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        self.error(path, f"must be true or false, got {_show(value)}")
        return None

    def number(self, value: Any, path: str, minimum: float = 0) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(path, f"must be a number, got {_show(value)}")
            return None
        if value < minimum:
            self.error(path, f"must be >= {minimum:g}, got {value}")
            return None
        return float(value)

    def array(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(path, f"must be a list, got {_show(value)}")
            return []
        return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_definition(doc: Any, source: str, problems: list[str]) -> Any:
    """One YAML document -> a definition, or None (problems appended, or not ours)."""
    if not isinstance(doc, dict):
        problems.append(f"{source}: expected a Kubernetes object, got {_show(doc)}")
        return None
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or api_version.split("/")[0] != API_GROUP:
        return None  # a CRD or another manifest kept next to the definition
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    c = _Checker(f"{source}: {kind} {name or '(unnamed)'}", problems)
    if api_version != API_VERSION:
        c.error("apiVersion", f"must be {API_VERSION}, got {api_version!r}")
    if kind == "DecoratorController":
        from regokite.controllers.decorator import parse_decorator  # it builds on this module's checkers

        return parse_decorator(c, doc, name, source)
    if kind != "CompositeController":
        c.error("kind", f"must be CompositeController or DecoratorController, got {_show(kind)}")
        return None
    c.obj(doc, "", ("apiVersion", "kind", "metadata", "spec", "status"))
    meta = c.obj(doc.get("metadata"), "metadata", _METADATA_FIELDS, required=("name",))
    c.string(meta.get("name"), "metadata.name", _dns_subdomain)
    spec = c.obj(
        doc.get("spec"),
        "spec",
        ("parentResource", "childResources", "resyncPeriodSeconds", "generateSelector", "hooks"),
        required=("parentResource",),
    )
    parent = _parent(c, spec.get("parentResource"), "spec.parentResource")
    children = tuple(
        child
        for i, raw in enumerate(c.array(spec.get("childResources"), "spec.childResources"))
        if (child := _child(c, raw, f"spec.childResources[{i}]")) is not None
    )
    refuse_duplicates(c, children, "spec.childResources")
    hooks = _hooks(c, spec.get("hooks"), "spec.hooks")
    generate = c.boolean(spec.get("generateSelector"), "spec.generateSelector")
    resync = c.number(spec.get("resyncPeriodSeconds"), "spec.resyncPeriodSeconds")
    if resync == 0:
        resync = None
    if not c.ok or parent is None or hooks is None:
        return None
    return CompositeController(
        name=name,
        parent=parent,
        children=children,
        hooks=hooks,
        generate_selector=bool(generate),
        resync_period_seconds=resync,
        source=source,
        raw=doc,
    )


_METADATA_FIELDS = (
    "name",
    "namespace",
    "labels",
    "annotations",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "finalizers",
    "ownerReferences",
)


def refuse_duplicates(c: _Checker, rules: Iterable[ResourceRule], path: str) -> None:
    """A resource type listed twice would be claimed twice: name the second listing."""
    seen: set[tuple[str, str]] = set()
    for i, rule in enumerate(rules):
        if (rule.api_version, rule.resource) in seen:
            c.error(f"{path}[{i}]", f"{rule} is listed twice")
        seen.add((rule.api_version, rule.resource))


def _dns_subdomain(value: str) -> str | None:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')"
    return None


def _api_version(value: str) -> str | None:
    parts = value.split("/")
    if len(parts) > 2 or not all(parts):
        return f"must be <group>/<version> or <version> (e.g. v1, apps/v1), got {value!r}"
    return None


def _resource(value: str) -> str | None:
    if value != value.lower() or "/" in value or not value:
        return f"must be the lowercase plural resource name (e.g. pods, deployments), got {value!r}"
    return None


def _rule(c: _Checker, raw: Any, path: str, extra: Iterable[str]) -> tuple[dict[str, Any], str, str] | None:
    obj = c.obj(raw, path, ("apiVersion", "resource", *extra), required=("apiVersion", "resource"))
    api_version = c.string(obj.get("apiVersion"), _join(path, "apiVersion"), _api_version)
    resource = c.string(obj.get("resource"), _join(path, "resource"), _resource)
    if api_version is None or resource is None:
        return None
    return obj, api_version, resource


def _parent(c: _Checker, raw: Any, path: str) -> ParentResource | None:
    rule = _rule(c, raw, path, ("labelSelector", "revisionHistory", "ignoreStatusChanges"))
    if rule is None:
        return None
    obj, api_version, resource = rule
    selector = _label_selector(c, obj.get("labelSelector"), _join(path, "labelSelector"))
    history = c.obj(obj.get("revisionHistory"), _join(path, "revisionHistory"), ("fieldPaths",))
    field_paths = tuple(
        p
        for i, p in enumerate(c.array(history.get("fieldPaths"), _join(path, "revisionHistory.fieldPaths")))
        if c.string(p, f"{path}.revisionHistory.fieldPaths[{i}]") is not None
    )
    ignore = c.boolean(obj.get("ignoreStatusChanges"), _join(path, "ignoreStatusChanges"))
    return ParentResource(
        api_version,
        resource,
        label_selector=selector,
        ignore_status_changes=bool(ignore),
        revision_history_field_paths=field_paths or ("spec",),
    )


def _label_selector(c: _Checker, raw: Any, path: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    obj = c.obj(raw, path, ("matchLabels", "matchExpressions"))
    raw_labels = obj.get("matchLabels")
    labels = c.obj(raw_labels, _join(path, "matchLabels"), raw_labels if isinstance(raw_labels, dict) else ())
    for key, value in labels.items():
        c.string(value, f"{path}.matchLabels.{key}")
    for i, expr in enumerate(c.array(obj.get("matchExpressions"), _join(path, "matchExpressions"))):
        where = f"{path}.matchExpressions[{i}]"
        e = c.obj(expr, where, ("key", "operator", "values"), required=("key", "operator"))
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            c.error(f"{where}.operator", f"must be one of In, NotIn, Exists, DoesNotExist, got {_show(op)}")
        values = c.array(e.get("values"), f"{where}.values")
        if op in ("In", "NotIn") and not values:
            c.error(f"{where}.values", f"required for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            c.error(f"{where}.values", f"must be empty for operator {op}")
    return obj


def _child(c: _Checker, raw: Any, path: str) -> ChildResource | None:
    rule = _rule(c, raw, path, ("updateStrategy",))
    if rule is None:
        return None
    obj, api_version, resource = rule
    strategy = c.obj(obj.get("updateStrategy"), _join(path, "updateStrategy"), ("method", "statusChecks"))
    method = strategy.get("method") or "OnDelete"
    where = _join(path, "updateStrategy.method")
    if method not in UPDATE_METHODS:
        c.error(where, f"must be one of {', '.join(UPDATE_METHODS)}")
        return None
    if method not in SUPPORTED_METHODS:
        c.error(where, f"{method} is not supported yet (use one of {', '.join(SUPPORTED_METHODS)})")
        return None
    checks = c.obj(strategy.get("statusChecks"), _join(path, "updateStrategy.statusChecks"), ("conditions",))
    for i, cond in enumerate(c.array(checks.get("conditions"), _join(path, "updateStrategy.statusChecks.conditions"))):
        c.obj(cond, f"{path}.updateStrategy.statusChecks.conditions[{i}]", ("type", "status", "reason"), ("type",))
    return ChildResource(api_version, resource, update_method=method, status_checks=checks or None)


def _hooks(c: _Checker, raw: Any, path: str) -> Hooks | None:
    obj = c.obj(raw, path, ("sync", "finalize", "customize"), required=("sync",))
    sync = _hook(c, obj.get("sync"), _join(path, "sync"))
    finalize = _hook(c, obj.get("finalize"), _join(path, "finalize"))
    customize = _hook(c, obj.get("customize"), _join(path, "customize"))
    return Hooks(sync=sync, finalize=finalize, customize=customize) if c.ok else None


def _hook(c: _Checker, raw: Any, path: str) -> HookTarget | None:
    if raw is None:
        return None
    obj = c.obj(raw, path, ("version", "webhook", "rego"))
    version = obj.get("version")
    if version not in (None, "v1"):
        c.error(_join(path, "version"), f"only hook version v1 is supported, got {_show(version)}")
    if ("webhook" in obj) == ("rego" in obj):
        c.error(path, "set exactly one of rego (a Rego package) or webhook (a URL at OPA's data API)")
        return None
    if "rego" in obj:
        rego = c.obj(obj["rego"], _join(path, "rego"), ("package",), required=("package",))
        package = c.string(rego.get("package"), _join(path, "rego.package"), _package)
        return HookTarget(package.removeprefix("data.")) if package else None
    return _webhook(c, obj["webhook"], _join(path, "webhook"))


def _package(value: str) -> str | None:
    name = value.removeprefix("data.")
    if not _PACKAGE.match(name):
        return f"must be a Rego package path like controllers.hello_world, got {value!r}"
    return None


def _webhook(c: _Checker, raw: Any, path: str) -> HookTarget | None:
    fields = ("url", "timeout", "path", "service", "etag", "responseUnMarshallMode", "caBundle")
    obj = c.obj(raw, path, fields)
    c.string(obj.get("timeout"), _join(path, "timeout"), _duration)
    if obj.get("service") is not None:
        c.obj(obj["service"], _join(path, "service"), ("name", "namespace", "port", "protocol"), ("name",))
    url = c.string(obj.get("url"), _join(path, "url"))
    hook_path = c.string(obj.get("path"), _join(path, "path"))
    if url:
        where, target_path = _join(path, "url"), urlsplit(url).path
    elif hook_path:
        where, target_path = _join(path, "path"), hook_path
    else:
        c.error(path, "set url (or service and path)")
        return None
    match = _OPA_DATA_PATH.match(target_path)
    if not match or not match["path"]:
        c.error(
            where,
            f"{url or hook_path!r} is not OPA's data API (/v0/data/<package> or /v1/data/<package>); "
            "regokite evaluates hooks itself: point the URL at the policy's package or use rego: {package: ...}",
        )
        return None
    package = ".".join(p for p in match["path"].split("/") if p)
    if _package(package):
        c.error(where, f"{package!r} is not a Rego package path")
        return None
    return HookTarget(package, source="webhook", url=url or hook_path, api=f"v{match['version']}")


def _duration(value: str) -> str | None:
    return None if _DURATION.match(value) else f"must be a Go duration like 10s or 500ms, got {value!r}"
