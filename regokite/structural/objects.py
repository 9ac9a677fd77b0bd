"""What the API server does to a custom resource's fields before it validates them: unknown fields
found (pruned, or refused as Gatekeeper refuses them in a constraint) and defaults applied.

Both follow the schema as the API server's structural pruning and defaulting
do: a node with `x-kubernetes-preserve-unknown-fields` keeps what it does not
describe (its described fields are still pruned inside), `additionalProperties`
describes every other key, and the root keeps `apiVersion`, `kind` and
`metadata`. A default fills a field that is missing, or null where the field
is not nullable; defaults apply top-down, so a defaulted object gets its own
fields' defaults too.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from regokite.structural.schema import MISSING, Schema

META_FIELDS = ("apiVersion", "kind", "metadata")


def prune(value: Any, schema: Schema | None, *, root: bool = False) -> list[str]:
    """Remove from `value` (in place) the fields `schema` does not describe; their paths, sorted
    (`spec.parameters.foo`, `spec.items[0].bar`). `root`: `value` is a whole resource."""
    found: list[str] = []
    if root:
        schema = Schema() if schema is None else schema
        if not schema.embedded_resource:
            schema = replace(schema, embedded_resource=True)
    _prune(value, schema, "", found)
    return sorted(found)


def _prune(value: Any, s: Schema | None, path: str, found: list[str]) -> None:
    if s is not None and s.preserve_unknown:
        _keep_unknown(value, s, path, found)
        return
    if isinstance(value, dict):
        for key in list(value):
            if s is not None and s.embedded_resource and key in META_FIELDS:
                continue
            if s is not None and key in s.properties:
                _prune(value[key], s.properties[key], _key(path, key), found)
            elif s is not None and s.additional is not None:
                _prune(value[key], s.additional_schema, _key(path, key), found)
            else:
                if key not in META_FIELDS or path:
                    found.append(_key(path, key))
                del value[key]
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _prune(item, s.items if s is not None else None, f"{path}[{i}]", found)


def _keep_unknown(value: Any, s: Schema | None, path: str, found: list[str]) -> None:
    """Inside a node that keeps unknown fields: only the fields it describes are pruned further."""
    if s is None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if s.embedded_resource and key in META_FIELDS:
                continue
            if key in s.properties:
                _prune(item, s.properties[key], _key(path, key), found)
            elif s.additional is not None:
                _prune(item, s.additional_schema, _key(path, key), found)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _keep_unknown(item, s.items, f"{path}[{i}]", found)


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def apply_defaults(value: Any, schema: Schema | None) -> None:
    """Fill `value` (in place) with the schema's defaults, as the API server's structural defaulting."""
    if schema is None:
        return
    if isinstance(value, dict):
        for key, prop in schema.properties.items():
            if prop.default is not MISSING and (key not in value or _null_not_allowed(value[key], prop)):
                value[key] = copy.deepcopy(prop.default)
        for key in value:
            if key in schema.properties:
                apply_defaults(value[key], schema.properties[key])
            elif isinstance(schema.additional, Schema):
                if _null_not_allowed(value[key], schema.additional) and schema.additional.default is not MISSING:
                    value[key] = copy.deepcopy(schema.additional.default)
                apply_defaults(value[key], schema.additional)
    elif isinstance(value, list) and schema.items is not None:
        for i, item in enumerate(value):
            if _null_not_allowed(item, schema.items) and schema.items.default is not MISSING:
                value[i] = copy.deepcopy(schema.items.default)
            apply_defaults(value[i], schema.items)


def _null_not_allowed(value: Any, schema: Schema) -> bool:
    return value is None and not schema.nullable
