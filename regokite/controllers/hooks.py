"""The hook contract, exactly Metacontroller's: request building, evaluation, output translation.

Sync/finalize request: `{controller, parent, children, related, finalizing}`,
children grouped by `"Kind.apiVersion"` then by name (`namespace/name` when a
cluster-scoped parent has namespaced children), every declared type present
even when empty. Response documents: `children` (array or set), `status`,
`resyncAfterSeconds`, `finalized`, and, beyond Metacontroller, `events`
(a list of `{type, reason, message}` that become Kubernetes Events).

A hook target names either a package (its rules are the response fields, as
OPA's `/v0/data/<package>` returns them) or one rule whose value is the whole
response object. Translation is pure and validates everything, so a bad
response is reported with package, rule and value, and never half-applied.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from regokite.bundle import Bundle
from regokite.controllers.schema import HookTarget
from regokite.engine import UNDEFINED, Engine
from regokite.errors import HookError, RegokiteError, show
from regokite.resources import ChildType, HookEvent, type_key

__all__ = ["ChildType", "type_key"]  # re-exported: the hook contract speaks of resource types

RESPONSE_FIELDS = ("children", "status", "resyncAfterSeconds", "finalized", "events")
EVENT_TYPES = ("Normal", "Warning")


@dataclass(frozen=True)
class HookResponse:
    """A validated sync/finalize response; children (a decorator's attachments) carry their namespace.
    `labels` and `annotations` are a decorator's (null removes a key)."""

    children: tuple[dict[str, Any], ...] = ()
    status: dict[str, Any] | None = None
    resync_after_seconds: float | None = None
    finalized: bool = False
    events: tuple[HookEvent, ...] = ()
    evaluation_seconds: float = 0.0
    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)


# ------------------------------------------------------------------------ request


def child_name_key(obj: Mapping[str, Any], parent_namespaced: bool, uniform: bool = False) -> str:
    """An object's key in `children`/`related`: hook version v1's RelativeObjectMap (the name, or
    `namespace/name` for a namespaced object of a cluster-scoped parent) or, `uniform`, v2's
    UniformObjectMap (`namespace/name` for every namespaced object, the name otherwise)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    if (uniform or not parent_namespaced) and ns:
        return f"{ns}/{meta.get('name')}"
    return meta.get("name", "")


def group_children(
    types: Iterable[ChildType],
    observed: Mapping[str, Iterable[Mapping[str, Any]]],
    parent_namespaced: bool,
    uniform: bool = False,
) -> dict[str, dict[str, Any]]:
    """`{"Kind.apiVersion": {key: object}}` (keys per `child_name_key`), every declared type present
    even when empty, in both hook versions as Metacontroller's docs say."""
    grouped: dict[str, dict[str, Any]] = {}
    for t in types:
        grouped[t.key] = {child_name_key(o, parent_namespaced, uniform): o for o in observed.get(t.key, ())}
    return grouped


def sync_request(
    controller: Mapping[str, Any],
    parent: Mapping[str, Any],
    children: Mapping[str, Mapping[str, Any]],
    *,
    related: Mapping[str, Any] | None = None,
    finalizing: bool = False,
    names: tuple[str, str] = ("parent", "children"),
) -> dict[str, Any]:
    """The sync/finalize input; a decorator names its fields `("object", "attachments")`."""
    return {
        "controller": controller,
        names[0]: parent,
        names[1]: children,
        "related": related or {},
        "finalizing": finalizing,
    }


# ---------------------------------------------------------------------- evaluation


@dataclass(frozen=True)
class ResolvedHook:
    """A hook target checked against the bundle: a package of rules, or one rule."""

    target: HookTarget
    rules: tuple[str, ...] = ()  # the response rules a package defines; empty for a rule target
    whole_rule: bool = False

    @property
    def package(self) -> str:
        return self.target.package

    @property
    def timeout(self) -> float:
        return self.target.timeout


def served_package(target: HookTarget, files: Mapping[str, str]) -> HookTarget:
    """A hook server's URL (`http://<service>.<namespace>/<path>`) resolved to the package of the policy
    file `<namespace>/<service>/<path>.rego` (`files`: policy file -> package), which is where a
    kube-mgmt ConfigMap `<service>` in `<namespace>` with key `<path>.rego` lands: a definition written
    for Metacontroller runs unchanged, its hook server's ConfigMap holding Rego. Other targets as they are."""
    if target.served_by is None:
        return target
    found = {
        package for file, package in files.items() if f"/{file.replace(os.sep, '/')}".endswith(f"/{target.served_by}")
    }
    if len(found) != 1:
        namespace, service, key = target.served_by.split("/", 2)
        why = "no policy file" if not found else f"{len(found)} policy files"
        raise HookError(
            target.url or target.served_by,
            None,
            f"{why} {target.served_by} stands in for this hook server (a ConfigMap {service} in namespace "
            f"{namespace} labelled openpolicyagent.org/policy=rego with key {key})",
            reason="HookNotFound",
        )
    return replace(target, package=found.pop())


def resolve_hook(
    target: HookTarget,
    packages: Mapping[str, set[str]],
    fields: tuple[str, ...] = RESPONSE_FIELDS,
    noun: str = "hook response rules",
    files: Mapping[str, str] | None = None,
) -> ResolvedHook:
    """Check the target exists in the loaded policies; raise HookError naming what is missing.
    `fields` are the response rules of the hook kind (sync/finalize, decorator, customize, a watch's outputs);
    `files` (policy file -> package) resolve a hook server's URL (`served_package`)."""
    target = served_package(target, files or {})
    if target.package in packages:
        rules = tuple(r for r in fields if r in packages[target.package])
        if not rules:
            raise HookError(
                target.package, None, f"defines none of the {noun} ({', '.join(fields)})", reason="HookNotFound"
            )
        return ResolvedHook(target, rules)
    package, _, rule = target.package.rpartition(".")
    if package in packages and rule in packages[package]:
        return ResolvedHook(target, whole_rule=True)
    known = ", ".join(sorted(p for p in packages if not p.endswith("_test"))) or "none"
    raise HookError(
        target.package, None, f"no such package or rule in the policies (packages: {known})", reason="HookNotFound"
    )


def evaluate_hook(engine: Engine, hook: ResolvedHook, request: Mapping[str, Any]) -> dict[str, Any]:
    """The raw response document: `{rule: value}` for the rules that are defined."""
    try:
        if hook.whole_rule:
            value = engine.evaluate(hook.target.ref, request)
            if value is UNDEFINED:
                return {}
            if not isinstance(value, dict):
                raise HookError(hook.package, None, f"must be an object of response fields, got {show(value)}")
            return value
        bound = engine.bind(request)
        raw = {}
        for rule in hook.rules:
            value = bound.evaluate(f"{hook.target.ref}.{rule}")
            if value is not UNDEFINED:
                raw[rule] = value
        return raw
    except HookError:
        raise
    except RegokiteError as exc:
        raise HookError(hook.package, None, str(exc), reason="PolicyError") from exc


class HookEvaluator(Protocol):
    """Where hooks are evaluated: in this process (`LocalHooks`), or in worker processes that
    enforce each hook's timeout (`regokite.controllers.hook_workers.HookWorkers`, the controller's)."""

    @property
    def bundle(self) -> Bundle: ...

    def evaluate(self, hook: ResolvedHook, request: Mapping[str, Any]) -> dict[str, Any]:
        """The raw response document, as `evaluate_hook` returns it; HookError when the call fails."""
        ...


class LocalHooks:
    """Hooks evaluated in this process (`regokite plan`, tests): nothing can stop a runaway one here."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def bundle(self) -> Bundle:
        return self.engine.bundle

    def evaluate(self, hook: ResolvedHook, request: Mapping[str, Any]) -> dict[str, Any]:
        return evaluate_hook(self.engine, hook, request)


def run_hook(
    evaluator: HookEvaluator,
    hook: ResolvedHook,
    request: Mapping[str, Any],
    *,
    types: Iterable[ChildType],
    parent: Mapping[str, Any],
    parent_namespaced: bool,
    translate: Callable[..., HookResponse] | None = None,
) -> HookResponse:
    """Evaluate, time and validate one hook call (`translate`: a decorator's, or the composite's by default)."""
    started = time.perf_counter()
    raw = evaluator.evaluate(hook, request)
    elapsed = time.perf_counter() - started
    response = (translate or translate_response)(
        hook.package, raw, types=types, parent=parent, parent_namespaced=parent_namespaced
    )
    return replace(response, evaluation_seconds=elapsed)


# --------------------------------------------------------------------- translation


def translate_response(
    package: str,
    raw: Mapping[str, Any],
    *,
    types: Iterable[ChildType],
    parent: Mapping[str, Any],
    parent_namespaced: bool,
    children_rule: str = "children",
) -> HookResponse:
    """Validate a raw response document; raise HookError naming package, rule and value."""
    by_kind = {(t.api_version, t.kind): t for t in types}
    parent_ns = (parent.get("metadata") or {}).get("namespace") if parent_namespaced else None
    children = validate_children(
        package, raw.get(children_rule), by_kind, parent_ns, parent_namespaced, rule=children_rule
    )
    status = raw.get("status")
    if status is not None and not isinstance(status, dict):
        raise HookError(package, "status", f"must be an object, got {show(status)}")
    resync = raw.get("resyncAfterSeconds")
    if resync is not None and (isinstance(resync, bool) or not isinstance(resync, int | float) or resync < 0):
        raise HookError(package, "resyncAfterSeconds", f"must be a number of seconds >= 0, got {show(resync)}")
    finalized = raw.get("finalized", False)
    if finalized is None:
        finalized = False
    if not isinstance(finalized, bool):
        raise HookError(package, "finalized", f"must be true or false, got {show(finalized)}")
    events = validate_events(package, raw.get("events"))
    return HookResponse(
        children=children,
        status=status,
        resync_after_seconds=float(resync) if resync else None,
        finalized=finalized,
        events=events,
    )


def validate_children(
    package: str,
    value: Any,
    by_kind: Mapping[tuple[str, str], ChildType],
    parent_ns: str | None,
    parent_namespaced: bool,
    rule: str = "children",
) -> tuple[dict[str, Any], ...]:
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str | None, str]] = set()
    for i, child in objects_of(package, rule, value, "an array or set of objects"):

        def bad(message: str, i: int = i, child: Any = child) -> HookError:
            return HookError(package, rule, f"{rule}[{i}] {message}: {show(child)}")

        api_version, kind = child.get("apiVersion"), child.get("kind")
        if not isinstance(api_version, str) or not api_version:
            raise bad("has no apiVersion")
        if not isinstance(kind, str) or not kind:
            raise bad("has no kind")
        meta = child.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise bad("has no metadata.name")
        child_type = by_kind.get((api_version, kind))
        if child_type is None:
            declared = ", ".join(sorted(t.key for t in by_kind.values())) or "none"
            noun = "child" if rule == "children" else "attachment"
            raise bad(f"is a {type_key(kind, api_version)}, not a declared {noun} type (declared: {declared})")
        ns = meta.get("namespace")
        if ns is not None and not isinstance(ns, str):
            raise bad("has a metadata.namespace that is not a string")
        if child_type.namespaced:
            if parent_namespaced:
                if ns and ns != parent_ns:
                    raise bad(f"is in namespace {ns!r}, outside the parent's namespace {parent_ns!r}")
                ns = parent_ns
            elif not ns:
                raise bad("needs metadata.namespace: the parent is cluster-scoped")
        elif ns:
            raise bad(f"sets metadata.namespace {ns!r} but {child_type.kind} is cluster-scoped")
        else:
            ns = None
        key = (child_type.key, ns, meta["name"])
        if key in seen:
            raise bad("appears twice")
        seen.add(key)
        if ns != meta.get("namespace"):
            child = {**child, "metadata": {**meta, "namespace": ns}}
            if ns is None:
                del child["metadata"]["namespace"]
        out.append(child)
    return tuple(out)


def objects_of(package: str, rule: str, value: Any, expected: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """A rule's array (or set) of objects, each with its index, checked as the caller goes (so the first
    bad item is the one reported); none for an undefined rule. HookError naming the rule (`must be
    <expected>`) for anything else, or the index of an item that is not an object."""
    if value is None:
        return
    if not isinstance(value, list):
        raise HookError(package, rule, f"must be {expected}, got {show(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise HookError(package, rule, f"{rule}[{i}] is not an object: {show(item)}")
        yield i, item


def validate_events(package: str, value: Any) -> tuple[HookEvent, ...]:
    events = []
    for i, e in objects_of(package, "events", value, "an array or set of {type, reason, message}"):
        etype = e.get("type", "Normal")
        if etype not in EVENT_TYPES:
            raise HookError(package, "events", f"events[{i}].type must be Normal or Warning: {show(e)}")
        reason, message = e.get("reason"), e.get("message")
        if not isinstance(reason, str) or not reason:
            raise HookError(package, "events", f"events[{i}].reason must be a non-empty string: {show(e)}")
        if not isinstance(message, str):
            raise HookError(package, "events", f"events[{i}].message must be a string: {show(e)}")
        extra = set(e) - {"type", "reason", "message"}
        if extra:
            raise HookError(package, "events", f"events[{i}] has unknown fields {sorted(extra)}: {show(e)}")
        events.append(HookEvent(etype, reason, message))
    return tuple(events)
