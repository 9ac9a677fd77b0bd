"""Checks on the fields of user documents (a policy's `match`, a constraint's `spec.match`):
each failure raises the caller's error type with the field's path, so the user sees where."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from regokite.errors import show


def strings(value: Any, where: str, error: type[Exception]) -> tuple[str, ...]:
    """`value` as a tuple of strings, or `error` naming `where`."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise error(f"{where} must be an array of strings, got {show(value)}")
    return tuple(value)


def known_fields(doc: Mapping[str, Any], known: Collection[str], where: str, error: type[Exception]) -> None:
    """Refuse fields the document's schema does not have: a typo must not silently match everything."""
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise error(f"{where} has unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def namespace_lists(doc: Mapping[str, Any], where: str, error: type[Exception]) -> dict[str, tuple[str, ...]]:
    """`namespaces` and `excludedNamespaces` (both optional), as a policy's `match` and a
    Constraint's `spec.match` spell them; keyword arguments for either's dataclass."""
    return {
        "namespaces": strings(doc.get("namespaces", []), f"{where}.namespaces", error),
        "excluded_namespaces": strings(doc.get("excludedNamespaces", []), f"{where}.excludedNamespaces", error),
    }
