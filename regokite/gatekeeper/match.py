"""Which requests a constraint applies to, as Gatekeeper's `spec.match` says.

`kinds` (apiGroups x kinds, `*` for any), `scope` (`*`, `Cluster`,
`Namespaced`), `namespaces` and `excludedNamespaces` (names, or globs with
one `*` at the front or the end), `labelSelector`, `namespaceSelector` and
`name` (a glob like the namespaces'). As in Gatekeeper, a Namespace object
is matched by its own name and labels where the criteria speak of its
namespace, and the namespace criteria do not apply to other cluster-scoped
objects. A namespaceSelector on a namespaced object needs that Namespace:
without it the match fails loudly (NamespaceUnknown) rather than guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from regokite.errors import RegokiteError
from regokite.fields import known_fields, namespace_lists, strings
from regokite.selectors import glob_matches, parse_selector

NamespaceLookup = Callable[[str], Mapping[str, Any] | None]
KNOWN = {"kinds", "scope", "namespaces", "excludedNamespaces", "labelSelector", "namespaceSelector", "name", "source"}


class ConstraintMatchError(RegokiteError):
    """A `spec.match` that is not of Gatekeeper's shape."""


_strings = partial(strings, error=ConstraintMatchError)


MISSING_NAMESPACE = "namespace selector for namespace-scoped object but missing Namespace"


class NamespaceUnknown(RegokiteError):
    """A namespaceSelector needs a Namespace that regokite has not got: `gatekeeper` is Gatekeeper's
    autorejection of the constraint, word for word; the message adds where regokite reads Namespaces."""

    def __init__(self, name: str, namespace: str) -> None:
        self.gatekeeper = (
            f"unable to match constraints: error matching the requested object: {name} :failed to run Match"
            f" criteria: {MISSING_NAMESPACE}"
        )
        super().__init__(
            f"{self.gatekeeper} ({namespace!r}: replicate v1/namespaces: --replicate-cluster v1/namespaces)"
        )


@dataclass(frozen=True)
class ConstraintMatch:
    kinds: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    scope: str = "*"
    namespaces: tuple[str, ...] = ()
    excluded_namespaces: tuple[str, ...] = ()
    label_selector: Mapping[str, Any] | None = None
    namespace_selector: Mapping[str, Any] | None = None
    name: str | None = None
    source: str = "All"  # Original (requests), Generated (expanded resources) or All
    lookup: NamespaceLookup | None = field(default=None, compare=False)
    # the Config's spec.match: namespaces each process (webhook, audit) skips before any constraint
    excluded_by_process: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def applies_to(self, review: Any, source: str = "Original") -> bool:
        """Whether `review` (a request, or `source` Generated: a resource expanded from one) is in scope for
        the process judging it (the Config's exclusions for `review.process`)."""
        return self.matches(review.request, source, skipped=self.skipped(getattr(review, "process", "webhook")))

    def skipped(self, process: str) -> tuple[str, ...]:
        """The namespaces the Config excludes from `process` (webhook, audit)."""
        return next((namespaces for p, namespaces in self.excluded_by_process if p == process), ())

    def matches(self, req: Mapping[str, Any], source: str = "Original", skipped: tuple[str, ...] = ()) -> bool:
        """Whether an AdmissionRequest (or an expanded resource's, `source` Generated) is in scope, the
        `skipped` namespaces aside (the Config's, for this process); NamespaceUnknown when it cannot say."""
        if self.source not in ("All", source):
            return False
        kind = req.get("kind") or {}
        group, kind_name = kind.get("group", ""), kind.get("kind", "")
        if self.kinds and not any(
            ("*" in groups or group in groups) and ("*" in kinds or kind_name in kinds) for groups, kinds in self.kinds
        ):
            return False
        obj = req.get("object") or req.get("oldObject") or {}
        meta = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
        is_namespace = group == "" and kind_name == "Namespace"
        namespace = req.get("namespace") or meta.get("namespace") or ""
        cluster_scoped = not namespace
        if self.scope != "*" and (self.scope == "Cluster") != cluster_scoped:
            return False
        own = (meta.get("name") or req.get("name") or "") if is_namespace else namespace
        if own or is_namespace:
            if self.namespaces and not any(glob_matches(p, own) for p in self.namespaces):
                return False
            if any(glob_matches(p, own) for p in (*self.excluded_namespaces, *skipped)):
                return False
        name = meta.get("name") or req.get("name") or ""
        if self.name is not None and not glob_matches(self.name, name):
            return False
        if self.label_selector is not None and not _selects(self.label_selector, meta.get("labels")):
            return False
        if self.namespace_selector is not None and (is_namespace or namespace):
            labels = meta.get("labels") if is_namespace else self._namespace_labels(namespace, name)
            if not _selects(self.namespace_selector, labels):
                return False
        return True

    def _namespace_labels(self, namespace: str, name: str) -> Any:
        found = self.lookup(namespace) if self.lookup is not None else None
        if found is None:
            raise NamespaceUnknown(name, namespace)
        return (found.get("metadata") or {}).get("labels")


def namespace_object(request: Mapping[str, Any], lookup: NamespaceLookup | None) -> tuple[str, Any]:
    """A request's namespace and Gatekeeper's `input.review.namespaceObject` for it: the Namespace of a
    namespaced object as `lookup` holds it; None for a cluster-scoped object, a Namespace itself (as
    Gatekeeper's webhook reviews one with no namespace), or a Namespace `lookup` has not got."""
    name = request.get("namespace")
    kind = request.get("kind") or {}
    if not isinstance(name, str) or not name or (kind.get("group", "") == "" and kind.get("kind") == "Namespace"):
        return "", None
    return name, lookup(name) if lookup is not None else None


def review_namespace(found: Any) -> Any:
    """`input.review.namespaceObject` for a Namespace found (or not): an empty object where there is
    none, as Gatekeeper's Rego driver passes its missing Namespace (a nil map becomes `{}` in OPA's
    input; its docs say null), so `object.get` and iteration over it work as in Gatekeeper."""
    return found if found is not None else {}


def _selects(selector: Mapping[str, Any], labels: Any) -> bool:
    return parse_selector(dict(selector)).matches(labels if isinstance(labels, dict) else {})


def parse_constraint_match(doc: Any, where: str, lookup: NamespaceLookup | None = None) -> ConstraintMatch:
    """A ConstraintMatch from `spec.match`; errors name the field."""
    if not isinstance(doc, dict):
        raise ConstraintMatchError(f"{where} must be an object")
    known_fields(doc, KNOWN, where, ConstraintMatchError)
    kinds = []
    for i, entry in enumerate(doc.get("kinds") or []):
        if not isinstance(entry, dict):
            raise ConstraintMatchError(f"{where}.kinds[{i}] must be an object")
        kinds.append((_strings(entry.get("apiGroups", ["*"]), f"{where}.kinds[{i}].apiGroups"),
                      _strings(entry.get("kinds", ["*"]), f"{where}.kinds[{i}].kinds")))  # fmt: skip
    scope = doc.get("scope", "*")
    if scope not in ("*", "Cluster", "Namespaced"):
        raise ConstraintMatchError(f"{where}.scope must be *, Cluster or Namespaced, got {scope!r}")
    for key in ("labelSelector", "namespaceSelector"):
        if key in doc:
            try:
                parse_selector(dict(doc[key]))
            except (TypeError, ValueError) as exc:
                raise ConstraintMatchError(f"{where}.{key}: {exc}") from None
    name = doc.get("name")
    if name is not None and not isinstance(name, str):
        raise ConstraintMatchError(f"{where}.name must be a string")
    source = doc.get("source") or "All"
    if source not in ("All", "Generated", "Original"):
        raise ConstraintMatchError(f"{where}.source must be All, Generated or Original, got {source!r}")
    return ConstraintMatch(
        kinds=tuple(kinds),
        scope=scope,
        **namespace_lists(doc, where, ConstraintMatchError),
        label_selector=doc.get("labelSelector"),
        namespace_selector=doc.get("namespaceSelector"),
        name=name,
        source=source,
        lookup=lookup,
    )
