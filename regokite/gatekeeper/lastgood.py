"""What a Gatekeeper syncer serves: each object as it is now, or its last good version.

A ConstraintTemplate edit that does not compile, a constraint whose match
does not parse, a Config that does not parse, a mutator that does not load:
each is refused with the error, and the version last served keeps serving
for as long as the object exists, as OPA keeps a module whose replacement it
refused, as Gatekeeper keeps a template's CRD (and so every constraint of
its kind) until the template itself is deleted, and as Gatekeeper's mutator
controller leaves the mutation system as it was when a mutator does not
load (a mutator that never loaded is not served). Nothing here does I/O:
the syncer passes in what the API server holds and a check of each object.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from regokite.errors import RegokiteError
from regokite.gatekeeper.constraint_schema import ConstraintSchema
from regokite.gatekeeper.enforcement import NOT_VALIDATED
from regokite.gatekeeper.match import parse_constraint_match
from regokite.gatekeeper.mutation.mutators import is_mutator, parse_mutator
from regokite.gatekeeper.resources import (
    is_config,
    is_constraint,
    is_template,
    parse_config_match,
    parse_constraint,
    parse_sync_only,
)

Doc = dict[str, Any]
K = TypeVar("K", bound=Hashable)


@dataclass
class Picked:
    """The documents to serve by key, and the error of each object refused now."""

    served: dict[Any, Doc] = field(default_factory=dict)
    errors: dict[Any, str] = field(default_factory=dict)
    kept: set[Any] = field(default_factory=set)  # refused now, served as last good


def pick(current: Mapping[K, Doc], check: Callable[[Doc], str | None], good: dict[K, Doc]) -> Picked:
    """Each current object when `check` passes (it becomes the last good one), else its entry in
    `good`; an object no longer current leaves `good` (deleted: nothing of it is served)."""
    picked = Picked()
    for key, doc in current.items():
        error = check(doc)
        if error is None:
            picked.served[key] = good[key] = doc
            continue
        picked.errors[key] = error
        if key in good:
            picked.served[key] = good[key]
            picked.kept.add(key)
    for key in set(good) - set(current):
        del good[key]
    return picked


def constraint_error(doc: Doc, schemas: Mapping[str, ConstraintSchema] | None = None) -> str | None:
    """Why a constraint cannot be served as written (its match, its enforcementAction, and with its
    template's `schemas` by kind, its fields and parameters), or None."""
    try:
        constraint = parse_constraint(doc, "constraint")
        if constraint.enforcement.refused:  # the controller checks it first, and words it so in the status
            return f"{NOT_VALIDATED}: {constraint.enforcement.refused}"
        parse_constraint_match(constraint.match, f"{constraint.kind} {constraint.name}: spec.match")
        schema = (schemas or {}).get(constraint.kind)
        if schema is not None:
            schema.check(doc)
    except RegokiteError as exc:
        return str(exc)
    return None


def config_error(doc: Doc) -> str | None:
    """Why a Gatekeeper Config cannot be served (its syncOnly, its match), or None."""
    where = f"config/{(doc.get('metadata') or {}).get('namespace', '')}/config"
    try:
        parse_sync_only(doc, where)
        parse_config_match(doc, where)
    except RegokiteError as exc:
        return str(exc)
    return None


def mutator_error(doc: Doc) -> str | None:
    """Why a mutator (Assign, AssignMetadata, ModifySet, AssignImage) does not load, or None."""
    try:
        parse_mutator(doc, f"{str(doc.get('kind', 'mutator')).lower()}/{(doc.get('metadata') or {}).get('name')}")
    except RegokiteError as exc:
        return str(exc)
    return None


def stale_constraint_crds(managed: Iterable[Doc], templates: Iterable[str]) -> list[str]:
    """The constraint CRDs to delete: those whose template (named the lowercased kind, as Gatekeeper
    requires) no longer exists. A template that exists keeps its CRD whatever state it is in."""
    names = set(templates)
    return [c["metadata"]["name"] for c in managed if c["spec"]["names"]["kind"].lower() not in names]


@dataclass
class LastGood:
    """The last good version of every template, constraint and Config, by key."""

    templates: dict[str, Doc] = field(default_factory=dict)  # by template name
    constraints: dict[tuple[str, str], Doc] = field(default_factory=dict)  # by (kind, name)
    configs: dict[str, Doc] = field(default_factory=dict)  # by name (only `config` is read)
    mutators: dict[tuple[str, str], Doc] = field(default_factory=dict)  # by (kind, name)

    @classmethod
    def of(cls, documents: Iterable[Any]) -> LastGood:
        """Seeded from what the syncer last wrote (a restart serves what was served before it)."""
        found = cls()
        for doc in documents:
            if not isinstance(doc, dict) or not isinstance((doc.get("metadata") or {}).get("name"), str):
                continue
            name = doc["metadata"]["name"]
            if is_template(doc):
                found.templates[name] = doc
            elif is_config(doc):
                found.configs[name] = doc
            elif is_constraint(doc) and isinstance(doc.get("kind"), str):
                found.constraints[(doc["kind"], name)] = doc
            elif is_mutator(doc) and mutator_error(doc) is None:  # earlier versions wrote those that failed too
                found.mutators[(doc["kind"], name)] = doc
        return found
