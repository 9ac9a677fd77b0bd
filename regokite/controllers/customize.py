"""The customize hook, pure: request, `relatedResources` validation, matching, grouping.

Input `{controller, parent}`; output `relatedResources`, a list of rules
`{apiVersion, resource, labelSelector | names, namespace}`. The objects those
rules select reach the sync and finalize hooks under `related`, grouped like
`children` (`"Kind.apiVersion"`, then name, or `namespace/name` when a
cluster-scoped parent relates namespaced objects; with hook version v2 always
`namespace/name` for namespaced objects). With a v1 customize hook a
namespaced parent only relates objects of its own namespace; with v2 it may
relate cluster-scoped objects and those of any namespace (a rule without
`namespace` selects in all), as Metacontroller's docs say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regokite.controllers.hooks import child_name_key
from regokite.errors import HookError, show
from regokite.resources import ChildType
from regokite.selectors import Selector, SelectorError, parse_selector

RESPONSE_FIELDS = ("relatedResources",)


def customize_request(controller: Mapping[str, Any], parent: Mapping[str, Any]) -> dict[str, Any]:
    return {"controller": controller, "parent": parent}


@dataclass(frozen=True)
class RelatedRule:
    api_version: str
    resource: str
    selector: Selector | None = None  # None with names; an empty selector selects everything
    namespace: str | None = None
    names: tuple[str, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.namespace is not None and (meta.get("namespace") or None) != self.namespace:
            return False
        if self.names and meta.get("name") not in self.names:
            return False
        return self.selector is None or self.selector.matches(meta.get("labels"))


def translate_related(
    package: str,
    raw: Mapping[str, Any],
    *,
    parent: Mapping[str, Any],
    parent_namespaced: bool,
    any_namespace: bool = False,
) -> tuple[RelatedRule, ...]:
    """Validate `relatedResources`; raise HookError naming the package, rule and value.
    `any_namespace` (a v2 customize hook): a namespaced parent's rules are not held to its namespace."""
    value = raw.get("relatedResources")
    if value is None:
        return ()
    rule = "relatedResources"
    if not isinstance(value, list):
        raise HookError(package, rule, f"must be an array of resource rules, got {show(value)}")
    parent_ns = (parent.get("metadata") or {}).get("namespace") if parent_namespaced else None
    out: list[RelatedRule] = []
    for i, r in enumerate(value):

        def bad(message: str, i: int = i, r: Any = r) -> HookError:
            return HookError(package, rule, f"relatedResources[{i}] {message}: {show(r)}")

        if not isinstance(r, dict):
            raise bad("is not an object")
        extra = set(r) - {"apiVersion", "resource", "labelSelector", "namespace", "names"}
        if extra:
            raise bad(f"has unknown fields {sorted(extra)}")
        api_version, resource = r.get("apiVersion"), r.get("resource")
        if not isinstance(api_version, str) or not api_version:
            raise bad("has no apiVersion")
        if not isinstance(resource, str) or not resource or resource != resource.lower():
            raise bad("needs resource, the lowercase plural name (e.g. configmaps)")
        names = r.get("names")
        if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
            raise bad("names must be a list of strings")
        selector = None
        if r.get("labelSelector") is not None:
            if names:
                raise bad("sets both labelSelector and names (choose one)")
            try:
                selector = parse_selector(r["labelSelector"])
            except SelectorError as exc:
                raise bad(f"has an invalid labelSelector ({exc})") from None
        elif not names:
            raise bad("needs labelSelector ({} selects everything) or names")
        ns = r.get("namespace")
        if ns is not None and not isinstance(ns, str):
            raise bad("namespace must be a string")
        if parent_namespaced and not any_namespace:
            if ns and ns != parent_ns:
                raise bad(f"is in namespace {ns!r}, outside the parent's namespace {parent_ns!r}")
            ns = parent_ns
        out.append(RelatedRule(api_version, resource, selector, ns or None, tuple(names or ())))
    return tuple(out)


def group_related(
    rules: Sequence[tuple[RelatedRule, ChildType]],
    objects: Mapping[tuple[str, str], Iterable[Mapping[str, Any]]],
    parent_namespaced: bool,
    uniform: bool = False,
) -> dict[str, dict[str, Any]]:
    """`{"Kind.apiVersion": {key: object}}` for every requested type (present even when
    empty), keys as `child_name_key` makes them (`uniform`: hook version v2); `objects` holds
    the cached objects of each `(apiVersion, resource)`."""
    grouped: dict[str, dict[str, Any]] = {}
    for rule, t in rules:
        group = grouped.setdefault(t.key, {})
        for obj in objects.get((rule.api_version, rule.resource), ()):
            if rule.matches(obj):
                group[child_name_key(obj, parent_namespaced, uniform)] = obj
    return grouped
