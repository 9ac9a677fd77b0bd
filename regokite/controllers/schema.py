"""The definitions schema: the parsing vocabulary every definitions file shares.

Metacontroller's CompositeController and DecoratorController and regokite's
Watch are all read with these pieces: a `Checker` that collects every
problem as `file: Kind name: path: message` (never stopping at the first),
the checks of names, resource rules, label selectors and hooks, and the
records they produce. `regokite.controllers.definitions.load` reads the files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from regokite.errors import RegokiteError, display_path, show

__all__ = ["display_path"]  # re-exported: how definitions name their files

UPDATE_METHODS = ("OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PACKAGE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_OPA_DATA_PATH = re.compile(r"^/v(?P<version>[01])/data(?P<path>(/[^/]+)*)/?$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SERVICE_HOST = re.compile(rf"^(?P<service>{_DNS_LABEL})\.(?P<namespace>{_DNS_LABEL})(\.svc(\.cluster\.local)?)?$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
ROLLING_HOOKS = ("preUpdateChild", "postUpdateChild")
DEFAULT_HOOK_TIMEOUT = 10.0  # seconds, Metacontroller's default for a webhook


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
    timeout: float = DEFAULT_HOOK_TIMEOUT  # seconds one evaluation may take before its worker is replaced
    version: str = "v1"  # Metacontroller's hook version: v2 keys namespaced objects namespace/name always
    # A hook server's URL (http://<service>.<namespace>/<path>): the policy file that stands in for it,
    # <namespace>/<service>/<path>.rego (a kube-mgmt ConfigMap <service> with key <path>.rego); its
    # package is found when the policies load (`regokite.controllers.hooks.served_package`).
    served_by: str | None = None

    @property
    def uniform(self) -> bool:
        """Hook version v2: `children`, `attachments` and `related` are UniformObjectMaps."""
        return self.version == "v2"

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
class ChildResource(ResourceRule):
    update_method: str = "OnDelete"
    status_checks: dict[str, Any] | None = None


# ----------------------------------------------------------------------- files


def definition_files(paths: Iterable[str | os.PathLike[str]], problems: list[str]) -> list[Path]:
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


# ----------------------------------------------------------------------- checks


class Checker:
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
            self.error(path, f"must be an object, got {show(value)}")
            return {}
        allowed = set(allowed)
        for key in value:
            if key not in allowed:
                hint = f" (known fields: {', '.join(sorted(allowed))})" if allowed else ""
                self.error(join(path, str(key)), f"unknown field{hint}")
        for key in required:
            if value.get(key) in (None, "", [], {}):
                self.error(join(path, key), "required")
        return value

    def string(self, value: Any, path: str, check: Callable[[str], str | None] | None = None) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {show(value)}")
            return None
        problem = check(value) if check else None
        if problem:
            self.error(path, problem)
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None or isinstance(value, bool):
            return value
        self.error(path, f"must be true or false, got {show(value)}")
        return None

    def number(self, value: Any, path: str, minimum: float = 0) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.error(path, f"must be a number, got {show(value)}")
            return None
        if value < minimum:
            self.error(path, f"must be >= {minimum:g}, got {value}")
            return None
        return float(value)

    def array(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.error(path, f"must be a list, got {show(value)}")
            return []
        return value


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


METADATA_FIELDS = (
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


def refuse_duplicates(c: Checker, rules: Iterable[ResourceRule], path: str) -> None:
    """A resource type listed twice would be claimed twice: name the second listing."""
    seen: set[tuple[str, str]] = set()
    for i, rule in enumerate(rules):
        if (rule.api_version, rule.resource) in seen:
            c.error(f"{path}[{i}]", f"{rule} is listed twice")
        seen.add((rule.api_version, rule.resource))


def dns_subdomain(value: str) -> str | None:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        return "must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')"
    return None


def api_version_name(value: str) -> str | None:
    parts = value.split("/")
    if len(parts) > 2 or not all(parts):
        return f"must be <group>/<version> or <version> (e.g. v1, apps/v1), got {value!r}"
    return None


def resource_name(value: str) -> str | None:
    if value != value.lower() or "/" in value or not value:
        return f"must be the lowercase plural resource name (e.g. pods, deployments), got {value!r}"
    return None


def parse_rule(c: Checker, raw: Any, path: str, extra: Iterable[str]) -> tuple[dict[str, Any], str, str] | None:
    obj = c.obj(raw, path, ("apiVersion", "resource", *extra), required=("apiVersion", "resource"))
    api_version = c.string(obj.get("apiVersion"), join(path, "apiVersion"), api_version_name)
    resource = c.string(obj.get("resource"), join(path, "resource"), resource_name)
    if api_version is None or resource is None:
        return None
    return obj, api_version, resource


def parse_label_selector(c: Checker, raw: Any, path: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    obj = c.obj(raw, path, ("matchLabels", "matchExpressions"))
    raw_labels = obj.get("matchLabels")
    labels = c.obj(raw_labels, join(path, "matchLabels"), raw_labels if isinstance(raw_labels, dict) else ())
    for key, value in labels.items():
        c.string(value, f"{path}.matchLabels.{key}")
    for i, expr in enumerate(c.array(obj.get("matchExpressions"), join(path, "matchExpressions"))):
        where = f"{path}.matchExpressions[{i}]"
        e = c.obj(expr, where, ("key", "operator", "values"), required=("key", "operator"))
        op = e.get("operator")
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            c.error(f"{where}.operator", f"must be one of In, NotIn, Exists, DoesNotExist, got {show(op)}")
        values = c.array(e.get("values"), f"{where}.values")
        if op in ("In", "NotIn") and not values:
            c.error(f"{where}.values", f"required for operator {op}")
        if op in ("Exists", "DoesNotExist") and values:
            c.error(f"{where}.values", f"must be empty for operator {op}")
    return obj


def parse_child(c: Checker, raw: Any, path: str) -> ChildResource | None:
    rule = parse_rule(c, raw, path, ("updateStrategy",))
    if rule is None:
        return None
    obj, api_version, resource = rule
    strategy = c.obj(obj.get("updateStrategy"), join(path, "updateStrategy"), ("method", "statusChecks"))
    method = strategy.get("method") or "OnDelete"
    where = join(path, "updateStrategy.method")
    if method not in UPDATE_METHODS:
        c.error(where, f"must be one of {', '.join(UPDATE_METHODS)}")
        return None
    checks = c.obj(strategy.get("statusChecks"), join(path, "updateStrategy.statusChecks"), ("conditions",))
    for i, cond in enumerate(c.array(checks.get("conditions"), join(path, "updateStrategy.statusChecks.conditions"))):
        c.obj(cond, f"{path}.updateStrategy.statusChecks.conditions[{i}]", ("type", "status", "reason"), ("type",))
    return ChildResource(api_version, resource, update_method=method, status_checks=checks or None)


def parse_hooks(c: Checker, raw: Any, path: str) -> Hooks | None:
    obj = c.obj(raw, path, ("sync", "finalize", "customize", *ROLLING_HOOKS), required=("sync",))
    for name in ROLLING_HOOKS:
        if name in obj:
            c.error(
                join(path, name),
                f"{name} (Metacontroller's rolling-update hook) is not supported: regokite gates rolling updates "
                "with childResources[].updateStrategy.statusChecks instead; remove the hook",
            )
    sync = parse_hook(c, obj.get("sync"), join(path, "sync"))
    finalize = parse_hook(c, obj.get("finalize"), join(path, "finalize"))
    customize = parse_hook(c, obj.get("customize"), join(path, "customize"))
    return Hooks(sync=sync, finalize=finalize, customize=customize) if c.ok else None


def parse_hook(c: Checker, raw: Any, path: str) -> HookTarget | None:
    if raw is None:
        return None
    obj = c.obj(raw, path, ("version", "webhook", "rego"))
    version = obj.get("version", "v1")
    if version not in ("v1", "v2"):
        c.error(join(path, "version"), f"must be v1 or v2 (Metacontroller's hook versions), got {show(version)}")
        version = "v1"
    if ("webhook" in obj) == ("rego" in obj):
        c.error(path, "set exactly one of rego (a Rego package) or webhook (a URL at OPA's data API)")
        return None
    if "rego" in obj:
        rego = c.obj(obj["rego"], join(path, "rego"), ("package", "timeout"), required=("package",))
        package = c.string(rego.get("package"), join(path, "rego.package"), package_name)
        timeout = parse_timeout(c, rego.get("timeout"), join(path, "rego.timeout"))
        return HookTarget(package.removeprefix("data."), timeout=timeout, version=version) if package else None
    target = parse_webhook(c, obj["webhook"], join(path, "webhook"))
    return replace(target, version=version) if target else None


def package_name(value: str) -> str | None:
    name = value.removeprefix("data.")
    if not _PACKAGE.match(name):
        return f"must be a Rego package path like controllers.hello_world, got {value!r}"
    return None


def parse_webhook(c: Checker, raw: Any, path: str) -> HookTarget | None:
    fields = ("url", "timeout", "path", "service", "etag", "responseUnMarshallMode", "caBundle")
    obj = c.obj(raw, path, fields)
    timeout = parse_timeout(c, obj.get("timeout"), join(path, "timeout"))
    if obj.get("service") is not None:
        c.obj(obj["service"], join(path, "service"), ("name", "namespace", "port", "protocol"), ("name",))
    url = c.string(obj.get("url"), join(path, "url"))
    hook_path = c.string(obj.get("path"), join(path, "path"))
    if url:
        where, target_path = join(path, "url"), urlsplit(url).path
    elif hook_path:
        where, target_path = join(path, "path"), hook_path
    else:
        c.error(path, "set url (or service and path)")
        return None
    match = _OPA_DATA_PATH.match(target_path)
    if not match or not match["path"]:
        served_by = _served_by(url, obj.get("service"), hook_path)
        if served_by is not None:
            return HookTarget("", source="webhook", url=url or hook_path, timeout=timeout, served_by=served_by)
        c.error(
            where,
            f"{url or hook_path!r} is neither OPA's data API (/v0/data/<package> or /v1/data/<package>) nor a "
            "hook server's Service (http://<service>.<namespace>/<path>); regokite evaluates hooks itself: point "
            "the URL at the policy's package or use rego: {package: ...}",
        )
        return None
    package = ".".join(p for p in match["path"].split("/") if p)
    if package_name(package):
        c.error(where, f"{package!r} is not a Rego package path")
        return None
    return HookTarget(package, source="webhook", url=url or hook_path, api=f"v{match['version']}", timeout=timeout)


def _served_by(url: str | None, service: Any, hook_path: str | None) -> str | None:
    """`<namespace>/<service>/<path>.rego` for a hook server's in-cluster URL (or `service` and `path`)."""
    if url:
        parts = urlsplit(url)
        host = _SERVICE_HOST.match(parts.hostname or "")
        if parts.scheme not in ("http", "https") or host is None:
            return None
        namespace, name, path = host["namespace"], host["service"], parts.path
    elif isinstance(service, dict) and isinstance(service.get("namespace"), str) and hook_path:
        namespace, name, path = service["namespace"], service.get("name"), hook_path
    else:
        return None
    path = path.strip("/")
    return f"{namespace}/{name}/{path}.rego" if path and ".." not in path.split("/") else None


def go_duration(value: str) -> str | None:
    return None if _DURATION.match(value) else f"must be a Go duration like 10s or 500ms, got {value!r}"


def parse_timeout(c: Checker, raw: Any, path: str) -> float:
    """A hook's `timeout` (a Go duration, as Metacontroller's webhooks write it) in seconds; default 10 s."""
    value = c.string(raw, path, go_duration)
    if value is None:
        return DEFAULT_HOOK_TIMEOUT
    seconds = sum(float(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(value))
    if seconds <= 0:
        c.error(path, f"must be more than zero, got {value!r}")
        return DEFAULT_HOOK_TIMEOUT
    return seconds


def metacontroller_spec(c: Checker, doc: dict[str, Any], fields: Iterable[str], required: Iterable[str]) -> dict:
    """The top level every Metacontroller kind shares (metadata, a DNS name); returns the checked `spec`."""
    c.obj(doc, "", ("apiVersion", "kind", "metadata", "spec", "status"))
    meta = c.obj(doc.get("metadata"), "metadata", METADATA_FIELDS, required=("name",))
    c.string(meta.get("name"), "metadata.name", dns_subdomain)
    return c.obj(doc.get("spec"), "spec", fields, required=required)
