"""A constraint checked and defaulted as Gatekeeper checks it, against the CRD its template makes.

Gatekeeper builds each template's constraint CRD around the template's
parameters schema (`spec.parameters`), with its own `match`,
`enforcementAction` (default `deny`) and `scopedEnforcementActions`, and a
`metadata.name` of at most 63 characters. A template of `v1beta1`/`v1alpha1`
(or one that says `legacySchema: true`) has its schema opened up first:
every object node keeps unknown fields, as Gatekeeper's conversion does.
A constraint is refused when its match's selectors are not what the API server
accepts, when its name is not a DNS subdomain, when it fails
the schema (`schema validation failed: ...`, the API server's wording), or
when it holds fields the schema does not describe (`invalid Constraint:
unknown fields: [...]`); otherwise the schema's defaults are applied, as
Gatekeeper applies them before its templates see `input.parameters`.

The same schema is the constraint CRD regokite installs in a cluster
(`crds.constraint_crd`), so the API server and every loader agree.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from regokite.errors import RegokiteError
from regokite.gatekeeper.resources import CONSTRAINT_GROUP, Template
from regokite.names import dns1123_subdomain_errors
from regokite.selectors import selector_errors
from regokite.structural.field_errors import INVALID, FieldError, aggregate, go_quote
from regokite.structural.objects import apply_defaults, prune
from regokite.structural.schema import MISSING, Schema, SchemaError, parse
from regokite.structural.validation import validate

CONSTRAINT_VERSIONS = ("v1beta1", "v1alpha1")
_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_SELECTOR = {
    "type": "object",
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {"key": {"type": "string"}, "operator": {"type": "string"}, "values": _STRINGS},
            },
        },
    },
}
_NAMESPACE_GLOBS = {"type": "array", "items": {"type": "string", "pattern": r"^\*?[-:a-z0-9]*\*?$"}}
# spec.match as Gatekeeper documents it (its CRD types it the same way)
MATCH_SCHEMA = {
    "type": "object",
    "properties": {
        "kinds": {
            "type": "array",
            "items": {"type": "object", "properties": {"apiGroups": _STRINGS, "kinds": _STRINGS}},
        },
        "scope": {"type": "string"},
        "namespaces": _NAMESPACE_GLOBS,
        "excludedNamespaces": _NAMESPACE_GLOBS,
        "labelSelector": _SELECTOR,
        "namespaceSelector": _SELECTOR,
        "name": {"type": "string"},
        "source": {"type": "string", "enum": ["All", "Generated", "Original"]},
    },
}
SCOPED_ACTIONS_SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "action": {"type": "string"},
            "enforcementPoints": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
        },
    },
}


class ConstraintInvalid(RegokiteError):
    """A constraint Gatekeeper would refuse for its template's schema; the message is Gatekeeper's."""


def legacy_schema(template: Template) -> bool:
    """`validation.legacySchema`, or its default: true for v1beta1 and v1alpha1 templates, false for v1."""
    validation = ((template.raw.get("spec") or {}).get("crd") or {}).get("spec", {}).get("validation")
    explicit = validation.get("legacySchema") if isinstance(validation, dict) else None
    if isinstance(explicit, bool):
        return explicit
    return str(template.raw.get("apiVersion", "")).rpartition("/")[2] != "v1"


def parameters_schema(template: Template) -> dict[str, Any] | None:
    """The schema of `spec.parameters` in the template's constraint CRD (None: no parameters field)."""
    legacy = legacy_schema(template)
    schema = template.schema if template.schema is not None else ({} if legacy else None)
    if schema is None:
        return None
    schema = copy.deepcopy(schema)
    if legacy:
        preserve_unknown(schema)
    return schema


def preserve_unknown(schema: dict[str, Any]) -> None:
    """Gatekeeper's legacy schema: every object or untyped node keeps unknown fields, and an array with
    no items schema gets one that keeps anything."""
    kind = schema.get("type", "")
    if kind in ("", "object"):
        schema["x-kubernetes-preserve-unknown-fields"] = True
    elif kind == "array" and not isinstance(schema.get("items"), dict):
        schema["items"] = {"x-kubernetes-preserve-unknown-fields": True}
    for sub in (schema.get("properties") or {}).values():
        if isinstance(sub, dict):
            preserve_unknown(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            preserve_unknown(schema[key])


def constraint_schema(template: Template) -> dict[str, Any]:
    """The openAPIV3Schema of the template's constraint CRD, as Gatekeeper makes it."""
    spec: dict[str, Any] = {
        "match": copy.deepcopy(MATCH_SCHEMA),
        "enforcementAction": {"type": "string", "default": "deny"},
        "scopedEnforcementActions": copy.deepcopy(SCOPED_ACTIONS_SCHEMA),
    }
    parameters = parameters_schema(template)
    if parameters is not None:
        spec["parameters"] = parameters
    return {
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
            "spec": {"type": "object", "properties": spec},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }


@dataclass(frozen=True)
class ConstraintSchema:
    """A template's constraint schema, parsed once; `check` is what every loader runs on a constraint."""

    kind: str
    schema: Schema

    @classmethod
    def of(cls, template: Template) -> ConstraintSchema:
        """The schema; a template whose parameters schema the API server would refuse raises
        RegokiteError naming the field (`invalid ConstraintTemplate: ...`, Gatekeeper's words)."""
        try:
            schema = parse(constraint_schema(template), "spec.validation.openAPIV3Schema")
        except SchemaError as exc:
            raise RegokiteError(f"invalid ConstraintTemplate: {aggregate(exc.errors)}") from None
        problems = _default_errors(schema.properties["spec"], _CRD_SPEC, "spec")
        if problems:
            raise RegokiteError(f"invalid ConstraintTemplate: {aggregate(problems)}")
        return cls(template.kind, schema)

    def check(self, doc: dict[str, Any]) -> dict[str, Any]:
        """The constraint with the schema's defaults applied; ConstraintInvalid with Gatekeeper's message
        when Gatekeeper would refuse it."""
        name = (doc.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise ConstraintInvalid("invalid Constraint: missing metadata.name")
        match = (doc.get("spec") or {}).get("match") if isinstance(doc.get("spec"), dict) else None
        selectors = []
        for key in ("labelSelector", "namespaceSelector"):
            selector = match.get(key) if isinstance(match, dict) else None
            if isinstance(selector, dict):
                selectors += selector_errors(selector, f"spec.match.{key}")
        if selectors:
            raise ConstraintInvalid(f"invalid Constraint: {aggregate(selectors)}")
        reasons = dns1123_subdomain_errors(name)
        if reasons:
            raise ConstraintInvalid(f"invalid Constraint: invalid name: {go_quote(chr(10).join(reasons))}")
        if doc.get("kind") != self.kind:
            raise ConstraintInvalid(
                f'invalid Constraint: wrong kind "{doc.get("kind")}" for constraint "{name}"; want "{self.kind}"'
            )
        group, _, version = str(doc.get("apiVersion", "")).partition("/")
        if group != CONSTRAINT_GROUP:
            raise ConstraintInvalid(
                f'invalid Constraint: unsupported group "{group}" for constraint "{name}"; '
                f'allowed group: "{CONSTRAINT_GROUP}"'
            )
        if version not in CONSTRAINT_VERSIONS:
            raise ConstraintInvalid(
                f'invalid Constraint: unsupported version "{version}" for Constraint "{name}"; '
                "supported versions: map[v1alpha1:true v1beta1:true]"
            )
        errors = validate(doc, self.schema)
        if errors:
            raise ConstraintInvalid(f"schema validation failed: {aggregate(errors)}")
        unknown = prune(copy.deepcopy(doc), self.schema, root=True)
        if unknown:
            raise ConstraintInvalid(f"invalid Constraint: unknown fields: [{' '.join(unknown)}]")
        defaulted = copy.deepcopy(doc)
        apply_defaults(defaulted, self.schema)
        return defaulted


_CRD_SPEC = "spec.validation.openAPIV3Schema.properties[spec]"


def _default_errors(schema: Schema, where: str, path: str) -> list[FieldError]:
    """Defaults that fail their own node's schema (the API server refuses such a CRD): each named at the
    schema's `default`, the value's errors after it."""
    found = []
    if schema.default is not MISSING:
        for error in validate(schema.default, schema, path):
            found.append(FieldError(f"{where}.default", INVALID, schema.default, str(error)))
    for name, sub in schema.properties.items():
        found += _default_errors(sub, f"{where}.properties[{name}]", f"{path}.{name}")
    if schema.items is not None:
        found += _default_errors(schema.items, f"{where}.items", f"{path}[0]")
    if schema.additional_schema is not None:
        found += _default_errors(schema.additional_schema, f"{where}.additionalProperties", f"{path}[key]")
    return found
