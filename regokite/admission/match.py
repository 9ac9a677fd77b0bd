"""Which requests a policy applies to.

A policy declares `match` in the shape of a webhook configuration's rules
(operations, apiGroups, apiVersions, resources, scope) plus namespaces,
excludedNamespaces and an objectSelector, so the same declaration both
filters requests here and generates webhook configurations. The
namespaceSelector cannot be checked without the namespace's labels; it is
carried into generated webhook configurations, where the API server applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from regokite.admission.review import OPERATIONS, Review
from regokite.errors import show
from regokite.fields import known_fields, namespace_lists, strings
from regokite.selectors import parse_selector


class Matcher(Protocol):
    """Whether a policy judges a review: a policy's own `match` (`Match`) or a Gatekeeper constraint's
    (`regokite.gatekeeper.match.ConstraintMatch`). `source` is Gatekeeper's: `Original` for a request,
    `Generated` for a resource an ExpansionTemplate made of one."""

    def applies_to(self, review: Review, source: str = "Original") -> bool: ...


class MatchError(ValueError):
    """A `match` declaration that is not of the documented shape."""


_strings = partial(strings, error=MatchError)


@dataclass(frozen=True)
class Rule:
    operations: tuple[str, ...] = ("*",)
    api_groups: tuple[str, ...] = ("*",)
    api_versions: tuple[str, ...] = ("*",)
    resources: tuple[str, ...] = ("*",)
    scope: str = "*"

    def matches(self, req: Mapping[str, Any]) -> bool:
        res = req["resource"]
        if "*" not in self.operations and req["operation"] not in self.operations:
            return False
        if "*" not in self.api_groups and res.get("group", "") not in self.api_groups:
            return False
        if "*" not in self.api_versions and res.get("version") not in self.api_versions:
            return False
        if self.scope != "*":
            namespaced = bool(req.get("namespace"))
            if namespaced != (self.scope == "Namespaced"):
                return False
        return _resource_matches(self.resources, res.get("resource", ""), req.get("subResource"))

    def as_webhook_rule(self) -> dict[str, Any]:
        return {
            "operations": list(self.operations),
            "apiGroups": list(self.api_groups),
            "apiVersions": list(self.api_versions),
            "resources": list(self.resources),
            "scope": self.scope,
        }


def _resource_matches(patterns: tuple[str, ...], resource: str, sub: str | None) -> bool:
    for pattern in patterns:
        name, _, sub_pattern = pattern.partition("/")
        if name not in ("*", resource):
            continue
        if not sub and not sub_pattern:
            return True
        if sub and sub_pattern in ("*", sub):
            return True
    return False


@dataclass(frozen=True)
class Match:
    rules: tuple[Rule, ...] = (Rule(),)
    namespaces: tuple[str, ...] = ()
    excluded_namespaces: tuple[str, ...] = ()
    object_selector: Mapping[str, Any] | None = None
    namespace_selector: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)

    def applies_to(self, review: Review, source: str = "Original") -> bool:
        """A policy's own match judges an expanded resource as it would a request (`source` aside)."""
        req = review.request
        if not any(rule.matches(req) for rule in self.rules):
            return False
        namespace = req.get("namespace") or ""
        if self.namespaces and namespace not in self.namespaces:
            return False
        if namespace and namespace in self.excluded_namespaces:
            return False
        if self.object_selector is not None:
            labels_new = _labels(req.get("object"))
            labels_old = _labels(req.get("oldObject"))
            if not (
                selector_matches(self.object_selector, labels_new) or selector_matches(self.object_selector, labels_old)
            ):
                return False
        return True


def _labels(obj: Any) -> dict[str, str] | None:
    if not isinstance(obj, dict):
        return None
    return (obj.get("metadata") or {}).get("labels") or {}


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str] | None) -> bool:
    """Kubernetes LabelSelector semantics; no object never matches."""
    return labels is not None and parse_selector(dict(selector)).matches(labels)


def parse_match(doc: Any, where: str) -> Match:
    """Build a Match from a policy's `match` document; errors name the field."""
    if doc is None:
        return Match()
    if not isinstance(doc, dict):
        raise MatchError(f"{where} must be an object, got {show(doc)}")
    known_fields(
        doc, ("rules", "namespaces", "excludedNamespaces", "objectSelector", "namespaceSelector"), where, MatchError
    )
    rules_doc = doc.get("rules", [{}])
    if not isinstance(rules_doc, list) or not rules_doc:
        raise MatchError(f"{where}.rules must be a non-empty array")
    rules = tuple(_parse_rule(r, f"{where}.rules[{i}]") for i, r in enumerate(rules_doc))
    for key in ("objectSelector", "namespaceSelector"):
        if key in doc:
            _check_selector(doc[key], f"{where}.{key}")
    return Match(
        rules=rules,
        **namespace_lists(doc, where, MatchError),
        object_selector=doc.get("objectSelector"),
        namespace_selector=doc.get("namespaceSelector"),
        raw=doc,
    )


def _parse_rule(doc: Any, where: str) -> Rule:
    if not isinstance(doc, dict):
        raise MatchError(f"{where} must be an object, got {show(doc)}")
    known_fields(doc, ("operations", "apiGroups", "apiVersions", "resources", "scope"), where, MatchError)
    operations = _strings(doc.get("operations", ["*"]), f"{where}.operations")
    bad = [op for op in operations if op != "*" and op not in OPERATIONS]
    if bad:
        raise MatchError(f"{where}.operations has unknown operation(s) {', '.join(bad)}")
    scope = doc.get("scope", "*")
    if scope not in ("*", "Namespaced", "Cluster"):
        raise MatchError(f"{where}.scope must be *, Namespaced or Cluster, got {show(scope)}")
    return Rule(
        operations=operations,
        api_groups=_strings(doc.get("apiGroups", ["*"]), f"{where}.apiGroups"),
        api_versions=_strings(doc.get("apiVersions", ["*"]), f"{where}.apiVersions"),
        resources=_strings(doc.get("resources", ["*"]), f"{where}.resources"),
        scope=scope,
    )


def _check_selector(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise MatchError(f"{where} must be a label selector object, got {show(value)}")
    labels = value.get("matchLabels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise MatchError(f"{where}.matchLabels must map strings to strings")
    for i, expr in enumerate(value.get("matchExpressions", [])):
        ok_op = isinstance(expr, dict) and expr.get("operator") in (
            "In",
            "NotIn",
            "Exists",
            "DoesNotExist",
        )
        if not ok_op or not isinstance(expr.get("key"), str):
            raise MatchError(
                f"{where}.matchExpressions[{i}] needs a key and an operator In, NotIn, Exists or DoesNotExist"
            )
