"""Gatekeeper's objects checked when they are applied: what would not load is refused at the API server.

Gatekeeper's validating webhook checks its own objects before it reviews
them (ConstraintTemplates, constraints, the mutators, ExpansionTemplates,
Providers, its Config) and refuses one it could not ingest, so `kubectl
apply` says why. This does the same with the loaders the servers run: a
template is parsed and compiled (its Rego, its parameters schema), a
constraint needs a served template of its kind and must pass its schema,
match and enforcementAction, a mutator, ExpansionTemplate, Provider, Config
or SyncSet must parse. The messages are the loaders' (file:line:col inside a
template's Rego; `<kind>/<name>` where a file would be) and Gatekeeper's own
where it has them. An edit that reaches a server anyway (the webhook down:
its failurePolicy is Ignore, as Gatekeeper's) is refused there and its last
good version serves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from regokite.engine import EngineSettings
from regokite.errors import RegokiteError
from regokite.gatekeeper.compile import compile_template
from regokite.gatekeeper.constraint_schema import ConstraintSchema
from regokite.gatekeeper.expansion import parse_expansion_template
from regokite.gatekeeper.match import parse_constraint_match
from regokite.gatekeeper.mutation.mutators import KINDS as MUTATOR_KINDS
from regokite.gatekeeper.mutation.mutators import parse_mutator
from regokite.gatekeeper.resources import (
    CONFIG_GROUP,
    CONSTRAINT_GROUP,
    EXPANSION_GROUP,
    MUTATION_GROUP,
    PROVIDER_GROUP,
    SYNCSET_GROUP,
    TEMPLATE_GROUP,
    parse_config_match,
    parse_constraint,
    parse_provider,
    parse_sync_only,
    parse_template,
)

STATUS_GROUP = "status.gatekeeper.sh"
# the groups Gatekeeper's webhook checks (status: only the name rule's exception); SyncSets are regokite's
# addition: a SyncSet that does not parse fails a server's whole load
CHECKED_GROUPS = (
    TEMPLATE_GROUP, CONSTRAINT_GROUP, MUTATION_GROUP, CONFIG_GROUP, PROVIDER_GROUP, EXPANSION_GROUP, STATUS_GROUP,
)  # fmt: skip
USER_ERROR = 422  # Gatekeeper answers what the user got wrong with 422, what it could not process with 500
INTERNAL = 500


@dataclass(frozen=True)
class Refusal:
    message: str
    code: int = USER_ERROR


@dataclass(frozen=True)
class PolicyObjects:
    """What checking Gatekeeper's objects needs from the set being served: each served template's
    constraint schema by kind (a constraint of another kind has no template here), and the engine
    settings templates are compiled with."""

    schemas: Mapping[str, ConstraintSchema] = field(default_factory=dict)
    engine: EngineSettings | None = None

    def refusal(self, request: Mapping[str, Any]) -> Refusal | None:
        """Why this AdmissionRequest's object would not load (None: not one of Gatekeeper's, or it would)."""
        kind = request.get("kind") if isinstance(request.get("kind"), dict) else {}
        group, kind_name = kind.get("group"), str(kind.get("kind", ""))
        if group not in (*CHECKED_GROUPS, SYNCSET_GROUP):
            return None
        name = request.get("name") or ""
        deleting = request.get("operation") == "DELETE"
        if deleting and not name:
            return None  # a collection's DELETE, as Gatekeeper lets it through
        if group not in (STATUS_GROUP, SYNCSET_GROUP) and len(name) > 63:
            return Refusal(f"resource cannot have metadata.name larger than 63 char; length: {len(name)}", INTERNAL)
        if group == CONFIG_GROUP and kind_name == "Config" and name != "config":
            return Refusal("config resource must have name 'config'")
        obj = request.get("oldObject" if deleting else "object")
        if group == STATUS_GROUP:
            return None
        if not isinstance(obj, dict):
            return Refusal(f"{kind_name} {name}: the request holds no object", INTERNAL)
        try:
            return self._check(group, kind_name, obj, f"{kind_name.lower()}/{name}")
        except RegokiteError as exc:
            return Refusal(str(exc))

    def _check(self, group: Any, kind: str, obj: dict[str, Any], where: str) -> Refusal | None:
        """The loader of one object; a RegokiteError from it is the refusal."""
        if group == TEMPLATE_GROUP and kind == "ConstraintTemplate":
            return _template(obj, where, self.engine)
        if group == CONSTRAINT_GROUP:
            return self._constraint(kind, obj, where)
        if group == MUTATION_GROUP and kind in MUTATOR_KINDS:
            parse_mutator(obj, where)
        elif group == EXPANSION_GROUP and kind == "ExpansionTemplate":
            parse_expansion_template(obj, where)
        elif group == PROVIDER_GROUP and kind == "Provider":
            parse_provider(obj, where)
        elif group == CONFIG_GROUP and kind == "Config":
            parse_sync_only(obj, where)
            parse_config_match(obj, where)
        elif group == SYNCSET_GROUP and kind == "SyncSet":
            parse_sync_only(obj, where)
        return None

    def _constraint(self, kind: str, obj: dict[str, Any], where: str) -> Refusal | None:
        """Gatekeeper's order: its template, its match's selectors, its schema, its enforcementAction."""
        schema = self.schemas.get(kind)
        if schema is None:
            return Refusal(f'missing ConstraintTemplate: template "{kind.lower()}" not found')
        constraint = parse_constraint(obj, where)
        try:
            parse_constraint_match(constraint.match, "spec.match")
        except RegokiteError as exc:
            return Refusal(f"invalid Constraint: {exc}")
        schema.check(obj)
        if constraint.enforcement.refused:  # Gatekeeper's ValidateEnforcementAction, an internal error there
            return Refusal(constraint.enforcement.refused, INTERNAL)
        return None


def _template(obj: dict[str, Any], where: str, engine: EngineSettings | None) -> Refusal | None:
    template = parse_template(obj, None, where)
    for target in (obj.get("spec") or {}).get("targets") or []:
        operations = target.get("operations") if isinstance(target, dict) else None
        if isinstance(operations, list) and "*" in operations and len(operations) > 1:
            return Refusal("if '*' is present, must not specify other operations", INTERNAL)
    compile_template(template, engine)
    return None
