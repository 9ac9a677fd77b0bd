"""Gatekeeper's ExpansionTemplates: a workload also yields the resource it will create, judged too.

An `expansion.gatekeeper.sh` ExpansionTemplate names workload kinds
(`applyTo`), where their blueprint is (`templateSource`, e.g.
`spec.template`) and what it becomes (`generatedGVK`, e.g. a v1 Pod). The
expansion is generated Rego (`regokite_gatekeeper.expansion`): the
resultant is the blueprint with the generated apiVersion and kind, the
request's namespace, Gatekeeper's mock name (`<parent>-<kind>`, lowercased)
and an ownerReference to the parent, then mutated by the mutators whose
`source` admits Generated resources, with no operation (as Gatekeeper
expands). Constraints judge it as a Generated resource; their messages read
`[Implied by <template>] <msg>`, with the template's enforcementAction when
it sets one. A template whose generated kind is itself expanded is refused:
regokite expands one level.
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


def check_chains(templates: Sequence[ExpansionTemplate]) -> None:
    """Refuse expansions of expansions (Gatekeeper recurses; regokite expands one level)."""
    names = [t.name for t in templates]
    if len(set(names)) != len(names):
        raise ExpansionError(f"two ExpansionTemplates share a name: {', '.join(sorted(names))}")
    for t in templates:
        g = t.generated
        chained = [o.name for o in templates if o.applies_to(g["group"], g["version"], g["kind"])]
        if chained:
            raise ExpansionError(
                f"{t.file}: ExpansionTemplate {t.name} generates {g['kind']}, which {', '.join(chained)} expand(s)"
                " again: regokite expands one level"
            )


def generated_modules(
    mutators: Sequence[Mutator], templates: Sequence[ExpansionTemplate], excluded: Sequence[str] = ()
) -> tuple[Module, ...]:
    """The Rego of Gatekeeper's mutators and ExpansionTemplates: library, mutators, system, expansion;
    `excluded`: namespaces the mutation webhook skips."""
    mutation = mutation_modules(mutators, excluded)
    if not templates:
        return mutation
    check_chains(templates)
    expansion = expansion_module(templates, SYSTEM if mutation else None)
    return (*(mutation or (library_module(),)), expansion)


def expansion_module(templates: Sequence[ExpansionTemplate], mutation: str | None) -> Module:
    """`expanded`: the request's resultants, mutated; `errors`: why it could not be expanded."""
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
    mutate = (
        f'data.{mutation}.mutate(o, {{"operation": "", "namespace": ns, "source": "Generated", '
        '"namespace_known": object.get(input, "namespace_known", false)})'
        if mutation
        else '{"object": o}'
    )
    text = EXPANSION.replace("__TEMPLATES__", json.dumps(rows, sort_keys=True)).replace("__MUTATE__", mutate)
    return Module(f"<{PACKAGE}>.rego", text)


EXPANSION = """package regokite_gatekeeper.expansion

import data.regokite_gatekeeper.mutation.lib

templates := __TEMPLATES__

# what the request's object expands to, each {"template", "enforcementAction", "object"} or {"error"}
results := [r |
	some t in templates
	_applies(t, input.request.kind)
	r := _expand(t, input.request)
]

expanded := [r | some r in results; not r.error]

errors := [r.error | some r in results; r.error]

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

_expand(t, req) := {"error": sprintf(
	"could not find source field %q in resource %s",
	[concat(".", t.source), lib.meta(req.object, "name")],
)} if {
	not is_object(object.get(req.object, t.source, null))
} else := r if {
	src := object.get(req.object, t.source, null)
	ns := _namespace(req)
	o := lib.with_namespace(object.union(src, _identity(t, src, req.object)), ns)
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
