"""json.match_schema, json.verify_schema (OPA's gojsonschema, where that can be matched) and json.is_valid.

OPA answers `[true, []]` for a document the schema accepts, and `[false, errors]` otherwise, each
error `{desc, error, field, type}` worded by gojsonschema (regorus answered `[true, null]` and a
string). The validity comes from `jsonschema` (draft 7 rules, as gojsonschema's default); the
error objects are written here in gojsonschema's words. What cannot be matched exactly is a
Refusal naming why (fail closed, never a different answer): a schema using a keyword outside the
set below (combinators, `format`, which gojsonschema checks and `jsonschema` does not, regex
dialects beyond plain patterns, remote `$ref`), a document breaking the schema in more than one
place (gojsonschema's order of several errors is its own), and `verify_schema` of an invalid
schema object (OPA's message is gojsonschema's). A schema gojsonschema's loader cannot read is
`[false, its message]` in verify_schema (regokite erred); a boolean schema (`"true"`) is valid.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, go_json, native, string_operand

# keywords checked exactly as gojsonschema; annotations that validate nothing; containers of schemas
_CHECKED = frozenset(
    {
        *("type", "enum", "const", "required", "properties", "additionalProperties", "items", "pattern", "$ref"),
        *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength"),
        *("minItems", "maxItems", "minProperties", "maxProperties"),
    }
)
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "id", "title", "description", "default", "examples", "$comment", "definitions", "readOnly"}
)
_SCHEMA_MAPS = ("properties", "definitions")  # name -> schema
_SCHEMA_VALUES = ("additionalProperties", "items")  # a schema (or a boolean)
# what Go's regexp reads otherwise than Python's (flags, back references, classes, anchors), or a `$`
# before the end: refused rather than matched otherwise
_GO_ONLY = re.compile(r"\(\?|\\[1-9pPkgQEzZAbB]|\[:|(?<!\\)\$")
_DRAFTS = ("http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-06/schema")


@builtin("json.match_schema")
def match_schema(document: Any, schema: Any) -> list[Any]:
    name = "json.match_schema"
    # an array document is validated as OPA's evaluation does (its type check refuses only an array written
    # as the operand: regokite evaluates that too); the schema stays a string or an object
    document = document if isinstance(document, list) else _operand(name, document, 1)
    schema = _operand(name, schema, 2)
    if isinstance(schema, bool):  # a boolean schema (a string "true" or "false"): all, or nothing
        return [True, []] if schema else [False, [_FALSE_SCHEMA]]
    validator = _validator(name, schema)
    errors = list(validator.iter_errors(document))
    if not errors:
        return [True, []]
    if len(errors) > 1:
        raise Refusal(
            f"{name}: the document breaks the schema in {len(errors)} places, which the embedded engine cannot list "
            "in OPA's order: use --engine opa"
        )
    return [False, [_opa_error(errors[0])]]


@builtin("json.verify_schema")
def verify_schema(schema: Any) -> list[Any]:
    """OPA's answer for a schema gojsonschema's loader cannot read is `[false, its message]`, no error:
    a string not JSON, a value neither a string nor an object (an array, or JSON that is neither an
    object nor a boolean, is an invalid schema); a boolean schema is valid."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema, parse_constant=_no_constant)
        except ValueError:
            return [False, "jsonschema: invalid JSON string"]
        if not isinstance(schema, dict | bool):
            return [False, "jsonschema: schema is invalid"]
    elif isinstance(schema, list):
        return [False, "jsonschema: schema is invalid"]
    elif not isinstance(schema, dict):
        return [False, "jsonschema: wrong type, expected string or object"]
    if isinstance(schema, dict):
        _validator("json.verify_schema", schema)
    return [True, None]


# gojsonschema's one error for the schema `false`
_FALSE_SCHEMA = {
    "desc": "False always fails validation",
    "error": "(Root): False always fails validation",
    "field": "(Root)",
    "type": "false",
}


def _operand(name: str, value: Any, position: int) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value, parse_constant=_no_constant)
        except ValueError:
            raise BuiltinError(f"{name}: operand {position}: invalid JSON string") from None
    if not isinstance(value, dict):
        raise BuiltinError(f"{name}: operand {position}: wrong type, expected string or object")
    return value


def _validator(name: str, schema: Any) -> Any:
    import jsonschema  # about 60 ms: only where a policy validates

    if not isinstance(schema, dict):
        raise BuiltinError(f"{name}: the schema must be an object")
    draft = schema.get("$schema")
    if draft is not None and not (isinstance(draft, str) and draft.rstrip("#") in _DRAFTS):
        raise _unmatched(name, f"the schema's draft {draft!r}")
    for keyword in _keywords(schema):
        if keyword not in _CHECKED and keyword not in _ANNOTATIONS:
            raise _unmatched(name, f"the keyword {keyword!r}")
    try:
        jsonschema.Draft7Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        if name == "json.verify_schema":
            raise _unmatched(name, "an invalid schema's message") from None
        raise BuiltinError(f"{name}: invalid schema: {exc.message}") from None
    return _go_validator()(schema)


@functools.cache
def _go_validator() -> Any:
    """Draft 7's validator with `pattern` read as Go's regexp reads it (ASCII classes, `$` the text's end)."""
    import jsonschema

    def pattern(validator: Any, expression: str, instance: Any, schema: Any) -> Iterator[Any]:
        if expression.endswith("$") and not expression.endswith("\\$"):
            expression = expression[:-1] + "\\Z"  # Python's `$` also matches before a final newline
        if validator.is_type(instance, "string") and not re.search(expression, instance, re.ASCII):
            yield jsonschema.ValidationError(f"{instance!r} does not match {expression!r}")

    return jsonschema.validators.extend(jsonschema.Draft7Validator, {"pattern": pattern})


def _keywords(schema: Any) -> Iterator[str]:
    """Every keyword of `schema` and of the schemas inside it; a refusal for what is not plain."""
    if not isinstance(schema, dict):
        return
    for keyword, value in schema.items():
        yield keyword
        if keyword in _SCHEMA_MAPS and isinstance(value, dict):
            for inner in value.values():
                yield from _keywords(inner)
        elif keyword in _SCHEMA_VALUES:
            yield from _keywords(value)
        elif keyword == "$ref" and not (isinstance(value, str) and value.startswith("#")):
            yield "$ref (not within the schema)"
        elif keyword == "pattern" and isinstance(value, str) and _GO_ONLY.search(value.removesuffix("$")):
            yield "pattern (a construct Go's regexp reads otherwise)"
        elif keyword in ("enum", "const") and not all(map(_plain, value if keyword == "enum" else [value])):
            yield f"{keyword} (a value other than a string, integer, boolean or null)"


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | bool | int)


def _unmatched(name: str, what: str) -> Refusal:
    return Refusal(
        f"{name}: {what} is not validated or worded as OPA (gojsonschema) in the embedded engine: "
        "use type, enum, const, required, properties, additionalProperties, items, minimum, maximum (and "
        "their exclusive forms), multipleOf, min/maxLength, min/maxItems, min/maxProperties, pattern and a "
        "$ref within the schema; or use --engine opa"
    )


def _opa_error(error: Any) -> dict[str, str]:
    field = ".".join(str(p) for p in error.absolute_path) or "(Root)"
    kind, describe = _WORDS.get(error.validator, (None, None))
    if kind is None or describe is None:
        raise _unmatched("json.match_schema", f"the error of {error.validator!r}")
    desc = describe(error, field)
    return {"desc": desc, "error": f"{field}: {desc}", "field": field, "type": kind}


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _unmatched("json.match_schema", f"the bound {value!r} (Go words fractions its own way)")
    return str(value)


def _written(value: Any) -> str:
    return go_json("json.match_schema", value)


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _expected(types: Any) -> str:
    return f"[{','.join(types)}]" if isinstance(types, list) else str(types)


def _missing(error: Any) -> str:
    missing = [p for p in error.validator_value if p not in error.instance]
    return missing[0]


def _extra(error: Any) -> str:
    extra = [p for p in error.instance if p not in error.schema.get("properties", {})]
    if len(extra) != 1:
        raise _unmatched("json.match_schema", "more than one additional property (gojsonschema's order)")
    return extra[0]


_WORDS: dict[str, tuple[str, Callable[[Any, str], str]]] = {
    "type": (
        "invalid_type",
        lambda e, f: f"Invalid type. Expected: {_expected(e.validator_value)}, given: {_type_of(e.instance)}",
    ),
    "required": ("required", lambda e, f: f"{_missing(e)} is required"),
    "enum": (
        "enum",
        lambda e, f: f"{f} must be one of the following: {', '.join(_written(v) for v in e.validator_value)}",
    ),
    "const": ("const", lambda e, f: f"{f} does not match: {_written(e.validator_value)}"),
    "minimum": ("number_gte", lambda e, f: f"Must be greater than or equal to {_number(e.validator_value)}"),
    "maximum": ("number_lte", lambda e, f: f"Must be less than or equal to {_number(e.validator_value)}"),
    "exclusiveMinimum": ("number_gt", lambda e, f: f"Must be greater than {_number(e.validator_value)}"),
    "exclusiveMaximum": ("number_lt", lambda e, f: f"Must be less than {_number(e.validator_value)}"),
    "multipleOf": ("multiple_of", lambda e, f: f"Must be a multiple of {_number(e.validator_value)}"),
    "minLength": ("string_gte", lambda e, f: f"String length must be greater than or equal to {e.validator_value}"),
    "maxLength": ("string_lte", lambda e, f: f"String length must be less than or equal to {e.validator_value}"),
    "pattern": ("pattern", lambda e, f: f"Does not match pattern '{e.validator_value}'"),
    "minItems": ("array_min_items", lambda e, f: f"Array must have at least {e.validator_value} items"),
    "maxItems": ("array_max_items", lambda e, f: f"Array must have at most {e.validator_value} items"),
    "additionalProperties": (
        "additional_property_not_allowed",
        lambda e, f: f"Additional property {_extra(e)} is not allowed",
    ),
    "minProperties": ("array_min_properties", lambda e, f: f"Must have at least {e.validator_value} properties"),
    "maxProperties": ("array_max_properties", lambda e, f: f"Must have at most {e.validator_value} properties"),
}


@builtin("json.is_valid")
def json_is_valid(value: Any) -> bool:
    """OPA's json.is_valid: false for anything but a string of RFC 8259 JSON (Go's json.Valid: no NaN
    or Infinity, which Python reads); regorus erred on a non-string."""
    if not isinstance(value, str):
        return False
    try:
        json.loads(value, parse_constant=_no_constant)
    except ValueError:
        return False
    return True


_UNMARSHAL = native("json.unmarshal")


@builtin("json.unmarshal")
def json_unmarshal(value: Any) -> Any:
    """regorus's json.unmarshal where it reads the text as OPA (Go's encoding/json); what Go reads and regorus
    cannot hold (a number beyond a double, `1e400`; an integer beyond 64 bits, which it would round) is a
    refusal, so it stays an error under OPA's default evaluation instead of becoming undefined."""
    text = string_operand("json.unmarshal", value, 1)
    go_reads = True
    try:
        json.loads(text, parse_constant=_no_constant, parse_int=_held_int, parse_float=_held_float)
    except _Beyond as exc:
        raise Refusal(f"json.unmarshal: the number {exc} is beyond what this engine holds: use --engine opa") from None
    except ValueError:
        go_reads = False  # Go refuses it too: regorus's error is OPA's
    try:
        return _UNMARSHAL(text)
    except Exception as exc:
        if go_reads:  # a lone surrogate escape, which Go reads as U+FFFD
            raise Refusal(
                f"json.unmarshal: JSON that Go reads and this engine cannot ({exc}): use --engine opa"
            ) from None
        raise BuiltinError(f"json.unmarshal: {exc}") from None


class _Beyond(Exception):
    pass


def _held_int(text: str) -> int:
    if not -(2**63) <= int(text) < 2**64:
        raise _Beyond(text)
    return 0


def _held_float(text: str) -> float:
    if math.isinf(float(text)):
        raise _Beyond(text)
    return 0.0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
