"""Gatekeeper's ExpansionTemplates: a workload also yields the resource it will create, judged too.

An `expansion.gatekeeper.sh` ExpansionTemplate names workload kinds
(`applyTo`), where their blueprint is (`templateSource`, e.g.
`spec.template`) and what it becomes (`generatedGVK`, e.g. a v1 Pod). The
expansion is generated Rego (`regokite_gatekeeper.expansion`): the
resultant is the blueprint with the generated apiVersion and kind, the
request's namespace, Gatekeeper's mock name (`<parent>-<kind>`, lowercased)
and an ownerReference to the parent, then mutated by the mutators whose
`source` admits Generated resources, with no operation (as Gatekeeper
expands). A resultant whose kind another template applies to expands again
(a CronJob's Job, the Job's Pod), each level mutated, as Gatekeeper's
expandRecursive; templates that form a cycle are left out, as Gatekeeper's
expansion system leaves out every template of one. Constraints judge each
resultant as a Generated resource; their messages read `[Implied by
<template>] <msg>`, with the template's enforcementAction when it sets one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from regokite.bundle import Module
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.mutation.compile import SYSTEM, mutation_modules
from regokite.gatekeeper.mutation.library import library_module
from regokite.gatekeeper.mutation.mutators import Mutator
from regokite.gatekeeper.resources import EXPANSION_GROUP

PACKAGE = "regokite_gatekeeper.expansion"
MESSAGE_PREFIX = "[Implied by {}]"
ACTIONS = ("", "deny", "dryrun", "warn")


class ExpansionError(PolicyLoadError):
    """An ExpansionTemplate Gatekeeper would not accept."""


@dataclass(frozen=True)
class ExpansionTemplate:
    name: str
    file: str
    apply_to: tuple[dict[str, list[str]], ...]
    source: tuple[str, ...]
    generated: dict[str, str]  # group, version, kind
    enforcement: str = ""

    def applies_to(self, group: str, version: str, kind: str) -> bool:
        return any(group in a["groups"] and version in a["versions"] and kind in a["kinds"] for a in self.apply_to)


def is_expansion_template(doc: Any) -> bool:
    api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
    return (
        isinstance(api_version, str)
        and api_version.partition("/")[0] == EXPANSION_GROUP
        and doc.get("kind") == "ExpansionTemplate"
    )


def parse_expansion_template(doc: dict[str, Any], file: str) -> ExpansionTemplate:
    """An ExpansionTemplate checked as Gatekeeper's ValidateTemplate does; errors name the file and field."""
    name = (doc.get("metadata") or {}).get("name")
    where = f"{file}: ExpansionTemplate {name or '?'}"
    if not isinstance(name, str) or not name:
        raise ExpansionError(f"{where}: ExpansionTemplate has empty name field")
    if len(name) >= 64:
        raise ExpansionError(f"{where}: ExpansionTemplate name must be less than 64 characters")
    spec = doc.get("spec") or {}
    source = spec.get("templateSource")
    if not isinstance(source, str) or not source:
        raise ExpansionError(f"{where}: has empty source field (spec.templateSource)")
    gvk = spec.get("generatedGVK") or {}
    generated = {k: gvk.get(k) or "" for k in ("group", "version", "kind")}
    if not all(isinstance(v, str) for v in generated.values()) or not any(generated.values()):
        raise ExpansionError(f"{where}: has empty generatedGVK field")
    apply_to = []
    for i, entry in enumerate(spec.get("applyTo") or []):
        parts = {k: (entry or {}).get(k) or [] for k in ("groups", "versions", "kinds")}
        if not all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in parts.values()):
            raise ExpansionError(f"{where}: applyTo[{i}] fields must be lists of strings")
        apply_to.append(parts)
    if not apply_to:
        raise ExpansionError(f"{where}: must specify ApplyTo")
    action = spec.get("enforcementAction") or ""
    if action not in ACTIONS:
        raise ExpansionError(f"{where}: enforcementAction must be deny, dryrun or warn, got {action!r}")
    template = ExpansionTemplate(name, file, tuple(apply_to), tuple(source.split(".")), generated, action)
    if template.applies_to(generated["group"], generated["version"], generated["kind"]):
        raise ExpansionError(f"{where}: generates {generated}, but also applies to that same GVK")
    return template


CYCLE = "template forms expansion cycle"  # Gatekeeper's refusal of a template that closes a cycle


def _expands_into(t: ExpansionTemplate, templates: Sequence[ExpansionTemplate]) -> list[ExpansionTemplate]:
    """The templates that apply to what `t` generates: an edge of Gatekeeper's template graph."""
    g = t.generated
    return [o for o in templates if o.applies_to(g["group"], g["version"], g["kind"])]


def in_cycles(templates: Sequence[ExpansionTemplate]) -> set[str]:
    """The templates on a cycle of expansions (A's resultant expanded by B, B's by A): Gatekeeper's
    strongly connected components of more than one template (a template expanding its own kind is
    refused on its own)."""
    found = set()
    for start in templates:
        seen: set[str] = set()
        todo = _expands_into(start, templates)
        while todo:
            t = todo.pop()
            if t.name == start.name:
                found.add(start.name)
                break
            if t.name not in seen:
                seen.add(t.name)
                todo += _expands_into(t, templates)
    return found


def without_cycles(templates: Sequence[ExpansionTemplate]) -> tuple[list[ExpansionTemplate], list[str]]:
    """The templates a server applies, and why the others are not: Gatekeeper's expansion system leaves
    out every template of a cycle, the others serving."""
    cycled = in_cycles(templates)
    kept = [t for t in templates if t.name not in cycled]
    return kept, [f"{t.file}: ExpansionTemplate {t.name}: {CYCLE}; not applied" for t in templates if t not in kept]


def refuse_cycles(templates: Sequence[ExpansionTemplate]) -> None:
    """gator's refusal (expand, verify): upserting the templates in order, the first that closes a cycle."""
    for i, t in enumerate(templates):
        if t.name in in_cycles(templates[: i + 1]):
            raise ExpansionError(f"error upserting template {t.name}: {CYCLE}")


def depth(templates: Sequence[ExpansionTemplate]) -> int:
    """How many times a resource may be expanded in a row: the longest chain of templates (no cycles)."""
    longest: dict[str, int] = {}

    def chain(t: ExpansionTemplate) -> int:
        if t.name not in longest:
            longest[t.name] = 1 + max((chain(o) for o in _expands_into(t, templates)), default=0)
        return longest[t.name]

    return max((chain(t) for t in templates), default=0)


def generated_modules(
    mutators: Sequence[Mutator],
    templates: Sequence[ExpansionTemplate],
    excluded: Sequence[str] = (),
    annotate: bool = False,
    replicate_path: str = "kubernetes",
) -> tuple[Module, ...]:
    """The Rego of Gatekeeper's mutators and ExpansionTemplates: library, mutators, system, expansion;
    `excluded`: namespaces the mutation webhook skips; `annotate`: Gatekeeper's --mutation-annotations;
    `replicate_path`: where the replicated Namespaces are. The templates must form no cycle."""
    mutation = mutation_modules(mutators, excluded, annotate, replicate_path)
    if not templates:
        return mutation
    names = [t.name for t in templates]
    if len(set(names)) != len(names):
        raise ExpansionError(f"two ExpansionTemplates share a name: {', '.join(sorted(names))}")
    if in_cycles(templates):
        raise ExpansionError(f"ExpansionTemplates {', '.join(sorted(in_cycles(templates)))}: {CYCLE}")
    expansion = expansion_module(templates, SYSTEM if mutation else None)
    return (*(mutation or (library_module(replicate_path),)), expansion)


def expansion_module(templates: Sequence[ExpansionTemplate], mutation: str | None) -> Module:
    """`results`: the request's resultants at every level, mutated; `errors`: why it could not be
    expanded; `base`: the request's object mutated as an Original resource (gator mutates it first)."""
    rows = [
        {
            "name": t.name,
            "applyTo": list(t.apply_to),
            "source": list(t.source),
            "generated": t.generated,
            "enforcementAction": t.enforcement,
        }
        for t in sorted(templates, key=lambda t: t.name)
    ]
    if mutation:
        known = '"namespace_known": object.get(input, "namespace_known", false)'  # gator: expand's input
        mutate = f'data.{mutation}.mutate(o, {{"operation": "", "namespace": ns, "source": "Generated", {known}}})'
        base = (
            f'data.{mutation}.mutate(input.request.object, {{"operation": "", "namespace": _ns, '
            f'"source": "Original", {known}}})'
        )
    else:
        mutate, base = '{"object": o}', '{"object": input.request.object}'
    levels = range(1, depth(templates) + 1)
    text = (
        EXPANSION.replace("__TEMPLATES__", json.dumps(rows, sort_keys=True))
        .replace("__MUTATE__", mutate)
        .replace("__BASE__", base)
        .replace("__DEEPEST_FIRST__", _concat([f"_level_{k}" for k in reversed(levels)]))
        .replace("__SHALLOWEST_FIRST__", _concat([f"_level_{k}" for k in levels]))
    )
    for k in levels[1:]:
        text += (
            f"\n_level_{k} := [r |\n\tsome p in _level_{k - 1}\n\tis_object(p.object)\n"
            f"\tsome r in _children(lib.gvk(p.object), p.object, _ns)\n]\n"
        )
    return Module(f"<{PACKAGE}>.rego", text)


def _concat(arrays: Sequence[str]) -> str:
    """One Rego array of `arrays`, in order."""
    if len(arrays) == 1:
        return arrays[0]
    return f"array.concat({arrays[0]}, {_concat(arrays[1:])})"


EXPANSION = """package regokite_gatekeeper.expansion

import data.regokite_gatekeeper.mutation.lib

templates := __TEMPLATES__

# what the request's object expands to, each {"template", "enforcementAction", "object"} or {"error"}:
# a resultant another template applies to expands again; the deepest come first, as Gatekeeper lists them
results := __DEEPEST_FIRST__

expanded := [r | some r in results; not r.error]

# why it could not be expanded, the shallowest first (where Gatekeeper stops)
errors := [r.error | some r in __SHALLOWEST_FIRST__; r.error]

# the request's object mutated as an Original resource: gator mutates a resource before it expands it
base := __BASE__

_ns := _namespace(input.request)

_level_1 := _children(input.request.kind, input.request.object, _ns)

_children(kind, o, ns) := [r |
	some t in templates
	_applies(t, kind)
	r := _expand(t, o, ns)
]

_applies(t, kind) if {
	some a in t.applyTo
	object.get(kind, "group", "") in a.groups
	kind.version in a.versions
	kind.kind in a.kinds
}

_namespace(req) := ns if {
	ns := req.namespace
	is_string(ns)
	ns != ""
} else := ""

_expand(t, parent, ns) := {"error": sprintf(
	"could not find source field %q in resource %s",
	[concat(".", t.source), lib.meta(parent, "name")],
)} if {
	not is_object(object.get(parent, t.source, null))
} else := r if {
	src := object.get(parent, t.source, null)
	o := lib.with_namespace(object.union(src, _identity(t, src, parent)), ns)
	m := __MUTATE__
	r := _mutated(t, o, m)
}

_mutated(t, o, m) := {"error": sprintf(
	"failed to mutate resultant resource %s: %s",
	[lib.meta(o, "name"), m.error],
)} if m.error

else := {"template": t.name, "enforcementAction": t.enforcementAction, "object": m.object}

_identity(t, src, parent) := {
	"apiVersion": _api_version(t.generated),
	"kind": t.generated.kind,
	"metadata": {
		"name": lower(concat("-", [lib.meta(parent, "name"), t.generated.kind])),
		"ownerReferences": _owners(object.get(src, ["metadata", "ownerReferences"], []), parent),
	},
}

_api_version(g) := g.version if g.group == ""

else := concat("/", [g.group, g.version])

_owners(refs, parent) := refs if {
	some ref in refs
	ref.apiVersion == parent.apiVersion
	ref.kind == parent.kind
	ref.name == lib.meta(parent, "name")
} else := array.concat(refs, [_owner(parent)])

# Gatekeeper's OwnerReference: uid is no omitempty field, so an empty one is written
_owner(parent) := {"apiVersion": parent.apiVersion, "kind": parent.kind, "name": lib.meta(parent, "name"), "uid": ""}
"""
