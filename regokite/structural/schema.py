"""A CRD's openAPIV3Schema read as the API server reads it: a structural schema.

`parse` takes the schema as written (a template's parameters schema, the
constraint CRD built around it) and refuses what the API server refuses in a
CRD — a node with no `type` where one is needed, an array with no `items`,
`properties` beside `additionalProperties`, `uniqueItems: true` — with the
API server's wording. What regokite cannot check exactly as the API server
does (`x-kubernetes-validations` CEL rules, a few string formats) is refused
too, naming the field: a schema is enforced exactly or not loaded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from regokite.structural.field_errors import FORBIDDEN, INVALID, OMITTED, REQUIRED, UNSUPPORTED, FieldError
from regokite.structural.formats import UNCHECKED

TYPES = ("array", "boolean", "integer", "number", "object", "string")
MISSING: Any = type("Missing", (), {"__repr__": lambda _: "MISSING"})()  # a node without `default`

_FORBIDDEN_KEYS = {
    "$ref": "$ref is not supported",
    "patternProperties": "patternProperties is not supported",
    "dependencies": "dependencies is not supported",
    "additionalItems": "additionalItems is not supported",
    "definitions": "definitions is not supported",
    "id": "id is not supported",
    "$schema": "$schema is not supported",
}


@dataclass(frozen=True, eq=False)
class Schema:
    """One node of a structural schema, with its value validations."""

    type: str = ""
    format: str = ""
    nullable: bool = False
    default: Any = MISSING
    properties: Mapping[str, Schema] = field(default_factory=dict)
    additional: Schema | bool | None = None  # additionalProperties: a schema, or a boolean
    items: Schema | None = None
    preserve_unknown: bool = False
    int_or_string: bool = False
    embedded_resource: bool = False
    enum: tuple[Any, ...] | None = None
    maximum: int | float | None = None
    exclusive_maximum: bool = False
    minimum: int | float | None = None
    exclusive_minimum: bool = False
    max_length: int | None = None
    min_length: int | None = None
    pattern: re.Pattern[str] | None = None
    max_items: int | None = None
    min_items: int | None = None
    unique_items: bool = False
    multiple_of: int | float | None = None
    max_properties: int | None = None
    min_properties: int | None = None
    required: tuple[str, ...] = ()
    all_of: tuple[Schema, ...] = ()
    any_of: tuple[Schema, ...] = ()
    one_of: tuple[Schema, ...] = ()
    not_: Schema | None = None
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()

    @property
    def additional_schema(self) -> Schema | None:
        return self.additional if isinstance(self.additional, Schema) else None


class SchemaError(ValueError):
    """A schema the API server would refuse in a CRD: every field error found."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(map(str, errors)))


def parse(doc: Any, path: str) -> Schema:
    """The structural schema `doc` describes; `path` names it in errors (the field holding it).
    Raises SchemaError with every problem, each at its field."""
    errors: list[FieldError] = []
    schema = _node(doc, path, errors, "root")
    if errors:
        raise SchemaError(errors)
    return schema


def _node(doc: Any, path: str, errors: list[FieldError], role: str) -> Schema:
    """One node; `role` says what holds it (root, object field, array items, value validation)."""
    if not isinstance(doc, dict):
        errors.append(FieldError(path, INVALID, doc, "must be an object"))
        return Schema()
    for key, reason in _FORBIDDEN_KEYS.items():
        if key in doc:
            errors.append(FieldError(f"{path}.{key}", FORBIDDEN, detail=reason))
    if doc.get("x-kubernetes-validations"):
        errors.append(
            FieldError(f"{path}.x-kubernetes-validations", FORBIDDEN, detail="CEL rules are not evaluated by regokite")
        )
    kind = doc.get("type", "")
    if kind not in ("", *TYPES):
        errors.append(FieldError(f"{path}.type", UNSUPPORTED, kind, _supported(TYPES)))
    preserve = doc.get("x-kubernetes-preserve-unknown-fields") is True
    int_or_string = doc.get("x-kubernetes-int-or-string") is True
    if role != "value validation":
        _structural(doc, path, errors, role, preserve, int_or_string)
    else:
        _value_validation(doc, path, errors)
    fmt = doc.get("format", "")
    if fmt in UNCHECKED:
        errors.append(FieldError(f"{path}.format", FORBIDDEN, detail=f"format {fmt} is not checked by regokite"))
    nested = "value validation" if role == "value validation" else "object field"
    properties = {
        name: _node(sub, f"{path}.properties[{name}]", errors, nested)
        for name, sub in (doc.get("properties") or {}).items()
    }
    additional = doc.get("additionalProperties")
    if isinstance(additional, dict):
        additional = _node(additional, f"{path}.additionalProperties", errors, nested)
    elif additional is not None and not isinstance(additional, bool):
        errors.append(FieldError(f"{path}.additionalProperties", INVALID, additional, "must be a schema or a boolean"))
        additional = None
    items = doc.get("items")
    if items is not None:
        if isinstance(items, list):
            errors.append(
                FieldError(f"{path}.items", FORBIDDEN, detail="items must be a schema object and not an array")
            )
            items = None
        else:
            items = _node(
                items, f"{path}.items", errors, "value validation" if nested == "value validation" else "items"
            )
    return Schema(
        type=kind if kind in TYPES else "",
        format=fmt if isinstance(fmt, str) else "",
        nullable=doc.get("nullable") is True,
        default=doc.get("default", MISSING),
        properties=properties,
        additional=additional,
        items=items,
        preserve_unknown=preserve,
        int_or_string=int_or_string,
        embedded_resource=doc.get("x-kubernetes-embedded-resource") is True,
        enum=tuple(doc["enum"]) if isinstance(doc.get("enum"), list) else None,
        maximum=_number(doc, "maximum", path, errors),
        exclusive_maximum=doc.get("exclusiveMaximum") is True,
        minimum=_number(doc, "minimum", path, errors),
        exclusive_minimum=doc.get("exclusiveMinimum") is True,
        max_length=_count(doc, "maxLength", path, errors),
        min_length=_count(doc, "minLength", path, errors),
        pattern=_pattern(doc, path, errors),
        max_items=_count(doc, "maxItems", path, errors),
        min_items=_count(doc, "minItems", path, errors),
        unique_items=doc.get("uniqueItems") is True,
        multiple_of=_number(doc, "multipleOf", path, errors),
        max_properties=_count(doc, "maxProperties", path, errors),
        min_properties=_count(doc, "minProperties", path, errors),
        required=tuple(r for r in doc.get("required") or () if isinstance(r, str)),
        all_of=_alternatives(doc, "allOf", path, errors),
        any_of=_alternatives(doc, "anyOf", path, errors),
        one_of=_alternatives(doc, "oneOf", path, errors),
        not_=_node(doc["not"], f"{path}.not", errors, "value validation") if "not" in doc else None,
        list_type=doc.get("x-kubernetes-list-type"),
        list_map_keys=tuple(doc.get("x-kubernetes-list-map-keys") or ()),
    )


def _structural(
    doc: dict[str, Any], path: str, errors: list[FieldError], role: str, preserve: bool, int_or_string: bool
) -> None:
    """The API server's structural rules for a node that is not a value validation."""

    def add(key: str, kind: str, value: Any, detail: str) -> None:
        errors.append(FieldError(f"{path}.{key}", kind, value, detail))

    kind = doc.get("type", "")
    if not kind and not preserve and not int_or_string:
        where = {"root": "at the root", "items": "for specified array items"}.get(role, "for specified object fields")
        add("type", REQUIRED, OMITTED, f"must not be empty {where}")
    if kind == "array" and doc.get("items") is None:
        add("items", REQUIRED, OMITTED, "must be specified")
    additional = doc.get("additionalProperties")
    if doc.get("properties") and (additional is False or isinstance(additional, dict)):
        add("additionalProperties", FORBIDDEN, OMITTED, "additionalProperties and properties are mutual exclusive")
    if doc.get("uniqueItems") is True:
        reason = "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        add("uniqueItems", FORBIDDEN, OMITTED, reason)
    preserve_key = "x-kubernetes-preserve-unknown-fields"
    if int_or_string and preserve:
        add(preserve_key, INVALID, True, "must be false if x-kubernetes-int-or-string is true")
    if preserve_key in doc and not preserve:
        add(preserve_key, INVALID, doc[preserve_key], "must be true or undefined")


_NOT_IN_VALUE_VALIDATION = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
    ("x-kubernetes-map-type", "must be undefined to be structural"),
)


def _value_validation(doc: dict[str, Any], path: str, errors: list[FieldError]) -> None:
    """Inside allOf, anyOf, oneOf and not only value validations may be said, never the structure."""
    for key, detail in _NOT_IN_VALUE_VALIDATION:
        if doc.get(key) not in (None, False, "", [], {}):
            errors.append(FieldError(f"{path}.{key}", FORBIDDEN, detail=detail))


def _alternatives(doc: dict[str, Any], key: str, path: str, errors: list[FieldError]) -> tuple[Schema, ...]:
    found = doc.get(key)
    if found is None:
        return ()
    if not isinstance(found, list):
        errors.append(FieldError(f"{path}.{key}", INVALID, found, "must be a list of schemas"))
        return ()
    return tuple(_node(sub, f"{path}.{key}[{i}]", errors, "value validation") for i, sub in enumerate(found))


def _number(doc: dict[str, Any], key: str, path: str, errors: list[FieldError]) -> int | float | None:
    value = doc.get(key)
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    errors.append(FieldError(f"{path}.{key}", INVALID, value, "must be a number"))
    return None


def _count(doc: dict[str, Any], key: str, path: str, errors: list[FieldError]) -> int | None:
    value = doc.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    errors.append(FieldError(f"{path}.{key}", INVALID, value, "must be a non-negative integer"))
    return None


def _pattern(doc: dict[str, Any], path: str, errors: list[FieldError]) -> re.Pattern[str] | None:
    pattern = doc.get("pattern")
    if pattern is None:
        return None
    try:
        return re.compile(pattern)
    except (re.error, TypeError) as exc:
        errors.append(
            FieldError(f"{path}.pattern", INVALID, pattern, f"must be a valid regular expression, but isn't: {exc}")
        )
        return None


def _supported(values: tuple[str, ...]) -> str:
    return "supported values: " + ", ".join(f'"{v}"' for v in values)
