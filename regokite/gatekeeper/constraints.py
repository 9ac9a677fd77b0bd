"""Constraints ready to evaluate: their template compiled, their match parsed.

Read from YAML files beside the `.rego` of `--policies`. A template that does
not compile is a problem reported with file:line and is left out; its
constraints stay in the set, broken, so a request they would have judged is
refused with the reason (fail closed) instead of silently admitted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from regokite.bundle import Module
from regokite.clusterdata.store import CLUSTER_KINDS, ResourceRef, guess_resource
from regokite.engine import EngineSettings
from regokite.engine.extensions.external_data import Provider
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.compile import Compiled, compile_all, violation_ref
from regokite.gatekeeper.constraint_schema import ConstraintInvalid, ConstraintSchema
from regokite.gatekeeper.enforcement import NOT_VALIDATED
from regokite.gatekeeper.expansion import ExpansionTemplate, is_expansion_template, parse_expansion_template
from regokite.gatekeeper.match import ConstraintMatch, NamespaceLookup, parse_constraint_match
from regokite.gatekeeper.mutation.mutators import Mutator, is_mutator, parse_mutator
from regokite.gatekeeper.resources import (
    Constraint,
    Template,
    gatekeeper_files,
    is_config,
    is_constraint,
    is_provider,
    is_syncset,
    is_template,
    may_hold_resources,
    parse_config_match,
    parse_constraint,
    parse_provider,
    parse_sync_only,
    parse_template,
    read_documents,
)

T = TypeVar("T")
NAMESPACE_OBJECT = "namespaceObject"  # input.review's Namespace of the object, as Gatekeeper fills it


@dataclass(frozen=True)
class ReadyConstraint:
    constraint: Constraint
    match: ConstraintMatch
    broken: str | None = None  # why it cannot be evaluated
    operations: tuple[str, ...] = ()  # its template's: the operations the webhook judges (none: all)
    reads_namespace: bool = False  # its template reads input.review.namespaceObject


@dataclass(frozen=True)
class GatekeeperSet:
    templates: tuple[Template, ...]
    modules: tuple[Module, ...]
    constraints: tuple[ReadyConstraint, ...]
    problems: tuple[str, ...]  # templates that did not load, each with file:line
    # constraints whose enforcement Gatekeeper's controller refuses: the webhook and audit leave them out
    refused: tuple[str, ...] = ()
    schemas: Mapping[str, ConstraintSchema] = field(default_factory=dict)  # each served kind's constraints'


@dataclass(frozen=True)
class GatekeeperSources:
    """What the policy roots hold for Gatekeeper, read once: a snapshot of the
    files beside the bundle, so a policy set can be rebuilt without the disk."""

    templates: tuple[Template, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    problems: tuple[str, ...] = ()
    synced: tuple[ResourceRef, ...] = ()
    # Config spec.match: (process, namespace patterns it skips) for webhook, audit and sync
    excluded: tuple[tuple[str, tuple[str, ...]], ...] = ()
    mutators: tuple[Mutator, ...] = ()
    broken_mutators: tuple[str, ...] = ()  # mutators that did not load, each with why: mutation refuses
    mutation_excluded: tuple[str, ...] = ()  # Config spec.match namespaces the mutation webhook skips
    expansions: tuple[ExpansionTemplate, ...] = ()
    broken_expansions: tuple[str, ...] = ()  # ExpansionTemplates that did not load: validation refuses
    providers: tuple[Provider, ...] = ()  # external data Providers, for external_data

    def excluded_from(self, process: str) -> tuple[str, ...]:
        return next((namespaces for p, namespaces in self.excluded if p == process), ())


def read_sources(roots: Iterable[str | Path]) -> GatekeeperSources:
    """One read of every Gatekeeper file below `roots`."""
    templates: list[Template] = []
    constraints: list[Constraint] = []
    syncs: list[tuple[str, str, str]] = []
    problems: list[str] = []
    entries: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    mutators: list[Mutator | str] = []
    expansions: list[ExpansionTemplate | str] = []
    providers: list[Provider] = []
    _read(roots, templates, constraints, syncs, problems, entries, mutators, expansions, providers)
    excluded = tuple((p, _excluded(entries, p)) for p in ("webhook", "audit", "sync") if _excluded(entries, p))
    mutation_excluded = _excluded(entries, "mutation-webhook")
    broken = tuple(m for m in mutators if isinstance(m, str))
    broken_expansions = tuple(t for t in expansions if isinstance(t, str))
    return GatekeeperSources(
        tuple(templates),
        tuple(constraints),
        (*problems, *broken, *broken_expansions),
        _synced(syncs),
        excluded,
        tuple(m for m in mutators if not isinstance(m, str)),
        broken,
        mutation_excluded,
        tuple(t for t in expansions if not isinstance(t, str)),
        broken_expansions,
        tuple(providers),
    )


def _excluded(entries: Iterable[tuple[tuple[str, ...], tuple[str, ...]]], process: str) -> tuple[str, ...]:
    """The namespaces the Config's spec.match excludes from one process (`*` names them all)."""
    return tuple(
        sorted({ns for namespaces, processes in entries if {"*", process} & set(processes) for ns in namespaces})
    )


def read_resources(roots: Iterable[str | Path]) -> tuple[list[Template], list[Constraint], list[str]]:
    """Every template and constraint in YAML below `roots`; unreadable ones become problems."""
    templates: list[Template] = []
    constraints: list[Constraint] = []
    problems: list[str] = []
    _read(roots, templates, constraints, [], problems)
    return templates, constraints, problems


def _synced(syncs: Iterable[tuple[str, str, str]]) -> tuple[ResourceRef, ...]:
    return tuple(sorted({ResourceRef(g, v, guess_resource(k), namespaced=k not in CLUSTER_KINDS) for g, v, k in syncs}))


def _read(
    roots: Iterable[str | Path],
    templates: list[Template],
    constraints: list[Constraint],
    syncs: list[tuple[str, str, str]],
    problems: list[str],
    exclusions: list[tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
    mutators: list[Mutator | str] | None = None,
    expansions: list[ExpansionTemplate | str] | None = None,
    providers: list[Provider] | None = None,
) -> None:
    for path in gatekeeper_files(roots):
        if not may_hold_resources(path):
            continue  # other YAML (controller definitions, manifests) is not read here
        try:
            documents = read_documents(path, str(path))
        except PolicyLoadError as exc:
            problems.append(str(exc))
            continue
        for doc, node in documents:
            if is_config(doc):  # a bad Config fails the load: constraints would see no inventory
                syncs.extend(parse_sync_only(doc, str(path)))
                if exclusions is not None:
                    exclusions.extend(parse_config_match(doc, str(path)))
                continue
            if is_mutator(doc):
                if mutators is not None:
                    mutators.append(_parsed(parse_mutator, doc, str(path)))
                continue
            if is_expansion_template(doc):
                if expansions is not None:
                    expansions.append(_parsed(parse_expansion_template, doc, str(path)))
                continue
            if is_syncset(doc):  # likewise a SyncSet: the union of them all and the Config's is replicated
                syncs.extend(parse_sync_only(doc, str(path)))
                continue
            try:
                if is_template(doc):
                    templates.append(parse_template(doc, node, str(path)))
                elif is_provider(doc) and providers is not None:
                    providers.append(parse_provider(doc, str(path)))
                elif is_constraint(doc):
                    constraints.append(parse_constraint(doc, str(path)))
            except PolicyLoadError as exc:
                problems.append(str(exc))


def _parsed(parse: Callable[[dict, str], T], doc: dict, file: str) -> T | str:
    """What `parse` makes of a document, or why it could not."""
    try:
        return parse(doc, file)
    except PolicyLoadError as exc:
        return str(exc)


def prepare(
    templates: Sequence[Template],
    constraints: Sequence[Constraint],
    *,
    lookup: NamespaceLookup | None = None,
    excluded: Sequence[tuple[str, tuple[str, ...]]] = (),
    engine: EngineSettings | None = None,
) -> GatekeeperSet:
    """Compile the templates and ready each constraint; `excluded` namespaces (the Config's, per
    process) are skipped by every constraint in that process (webhook or audit), as Gatekeeper skips
    them before any constraint."""
    good, bad = compile_all(templates, engine)
    problems = [str(exc) for exc in bad.values()]
    refused = []
    ready = []
    seen: set[tuple[str, str]] = set()
    for c in constraints:
        where = f"{c.file}: {c.kind} {c.name}"
        if (c.kind, c.name) in seen:
            raise PolicyLoadError(f"{where}: a second constraint of this kind and name")
        seen.add((c.kind, c.name))
        match = parse_constraint_match(c.match, f"{where}: spec.match", lookup)
        if excluded:
            match = replace(match, excluded_by_process=tuple(excluded))
        broken = None
        if c.kind in bad:
            broken = f"its ConstraintTemplate did not load: {bad[c.kind]}"
        elif c.kind not in good:
            broken = f"no ConstraintTemplate defines kind {c.kind}"
        else:
            c, broken = checked(c, good[c.kind])
        compiled = good.get(c.kind)
        operations = compiled.template.operations if compiled else ()
        reads_namespace = compiled is not None and any(NAMESPACE_OBJECT in m.text for m in compiled.modules)
        ready.append(ReadyConstraint(c, match, broken, operations, reads_namespace))
        if broken and c.kind not in bad:  # a template's own error is listed once, above
            problems.append(f"{where}: {broken}")
        if c.enforcement.refused:  # Gatekeeper's controller does not enforce it: neither webhook nor audit
            refused.append(f"{where}: {NOT_VALIDATED}: {c.enforcement.refused}")
    modules = tuple(m for compiled in good.values() for m in compiled.modules)
    schemas = {kind: compiled.constraint_schema for kind, compiled in good.items()}
    served = tuple(t for t in templates if t.kind in good)
    return GatekeeperSet(served, modules, tuple(ready), tuple(problems), tuple(refused), schemas)


def checked(c: Constraint, template: Compiled) -> tuple[Constraint, str | None]:
    """The constraint as its template's schema makes it (defaults applied), or why Gatekeeper refuses it."""
    try:
        doc = template.constraint_schema.check(c.raw)
    except ConstraintInvalid as exc:
        return c, str(exc)
    return replace(c, parameters=(doc.get("spec") or {}).get("parameters", {}), raw=doc), None


REVIEW_RULE = "gatekeeper_review"
# Gatekeeper's review: on DELETE, `object` is the object being deleted (the request's oldObject)
REVIEW_RULE_TEXT = f"""
{REVIEW_RULE} := object.union(input.request, {{"object": object.get(input.request, "oldObject", null)}}) if {{
\tinput.request.operation == "DELETE"
}} else := input.request
"""


def constraint_rule(name: str, c: ReadyConstraint) -> list[str]:
    """The generated rule evaluating one constraint: its template's violations under
    Gatekeeper's input (`review` = the AdmissionRequest, `parameters`)."""
    if c.broken:
        return []
    parameters = json.dumps(c.constraint.parameters if c.constraint.parameters is not None else {})
    gatekeeper_input = f'{{"review": {REVIEW_RULE}, "parameters": {parameters}}}'
    return [
        f"# {c.constraint.kind} {c.constraint.name}",
        f'{name} := {{"violation": [v]}} if {{',
        f"\tv := {violation_ref(c.constraint.kind)} with input as {gatekeeper_input}",
        "}",
        "",
    ]
