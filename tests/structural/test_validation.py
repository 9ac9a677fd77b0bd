"""Values checked against a structural schema with the API server's wording.

Each expected message is the API server's for that case: the classes whose
wording the API server of the tests (1.20) shares with today's are also
checked against it (tests/integration/test_structural_agreement.py); the
others follow today's apimachinery and kube-openapi (`Too long: may not be
more than N bytes`, `Too many: N: must have at most M items`, indexed item
paths, JSON for a duplicate map key).
"""

from __future__ import annotations

from typing import Any

import pytest

from regokite.structural.field_errors import aggregate
from regokite.structural.schema import parse
from regokite.structural.validation import validate

CASES: list[tuple[dict[str, Any], Any, str]] = [
    (
        {"type": "array", "items": {"type": "string"}},
        "abc",
        'x: Invalid value: "string": x in body must be of type array: "string"',
    ),
    ({"type": "object"}, [1], 'x: Invalid value: "array": x in body must be of type object: "array"'),
    ({"type": "string"}, None, 'x: Invalid value: "null": x in body must be of type string: "null"'),
    ({"type": "string", "nullable": True}, None, ""),
    ({"type": "integer"}, 4.0, ""),
    ({"type": "integer"}, True, 'x: Invalid value: "boolean": x in body must be of type integer: "boolean"'),
    ({"type": "number"}, 3, ""),
    (
        {"x-kubernetes-int-or-string": True},
        1.5,
        'x: Invalid value: "number": x in body must be of type integer,string: "number"',
    ),
    ({"x-kubernetes-int-or-string": True}, "80%", ""),
    ({"type": "string", "enum": ["a", "b"]}, "c", 'x: Unsupported value: "c": supported values: "a", "b"'),
    ({"type": "integer", "enum": [1, 2]}, 3, 'x: Unsupported value: 3: supported values: "1", "2"'),
    ({"type": "string", "pattern": "^a"}, "ba", "x: Invalid value: \"ba\": x in body should match '^a'"),
    ({"type": "string", "minLength": 2}, "a", 'x: Invalid value: "a": x in body should be at least 2 chars long'),
    ({"type": "string", "maxLength": 3}, "abcd", "x: Too long: may not be more than 3 bytes"),
    ({"type": "string", "maxLength": 3, "pattern": "^z"}, "abcd", "x: Too long: may not be more than 3 bytes"),
    ({"type": "integer", "maximum": 10}, 11, "x: Invalid value: 11: x in body should be less than or equal to 10"),
    (
        {"type": "integer", "maximum": 10, "exclusiveMaximum": True},
        10,
        "x: Invalid value: 10: x in body should be less than 10",
    ),
    (
        {"type": "integer", "minimum": 1, "exclusiveMinimum": True},
        1,
        "x: Invalid value: 1: x in body should be greater than 1",
    ),
    ({"type": "number", "maximum": 1.5}, 2.5, "x: Invalid value: 2.5: x in body should be less than or equal to 1.5"),
    ({"type": "number", "maximum": 1.5}, 2, "x: Invalid value: 2: x in body should be less than or equal to 1"),
    ({"type": "integer", "multipleOf": 2}, 3, "x: Invalid value: 3: x in body should be a multiple of 2"),
    (
        {"type": "integer", "minimum": 5, "maximum": 1},
        3,
        "[x: Invalid value: 3: x in body should be greater than or equal to 5, "
        "x: Invalid value: 3: x in body should be less than or equal to 1]",
    ),
    (
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
        [],
        "x: Invalid value: 0: x in body should have at least 1 items",
    ),
    (
        {"type": "array", "items": {"type": "string"}, "maxItems": 1},
        ["a", "b"],
        "x: Too many: 2: must have at most 1 item",
    ),
    (
        {"type": "array", "items": {"type": "string"}},
        ["a", 1],
        'x[1]: Invalid value: "integer": x[1] in body must be of type string: "integer"',
    ),
    (
        {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        ["a", "a"],
        'x[1]: Duplicate value: "a"',
    ),
    (
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
            "items": {"type": "object", "properties": {"k": {"type": "string"}, "v": {"type": "string"}}},
        },
        [{"k": "a"}, {"k": "a", "v": "b"}],
        'x[1]: Duplicate value: {"k":"a"}',
    ),
    ({"type": "object", "required": ["r"], "properties": {"r": {"type": "string"}}}, {}, "x.r: Required value"),
    (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"a": "1"},
        'x.a: Invalid value: "string": x.a in body must be of type integer: "string"',
    ),
    ({"type": "object", "minProperties": 1}, {}, "x: Invalid value: 0: x in body should have at least 1 properties"),
    ({"type": "string", "format": "uuid"}, "nope", 'x: Invalid value: "nope": x in body must be of type uuid: "nope"'),
    ({"type": "string", "format": "uuid"}, "0b6fd1a2-3c4d-4e5f-8a9b-0c1d2e3f4a5b", ""),
    ({"type": "integer", "format": "int32"}, 2**40, ""),  # the API server drops numeric formats from a CRD
    ({"type": "string", "format": "date-time"}, "yesterday", ""),  # not a CRD format: ignored
    (
        {"type": "string", "anyOf": [{"maxLength": 1}, {"pattern": "^b"}]},
        "ccc",
        '[<nil>: Invalid value: "": "x" must validate at least one schema (anyOf), '
        "x: Too long: may not be more than 1 byte]",
    ),
    (
        {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
        "abcd",
        "[x: Too long: may not be more than 3 bytes, "
        '<nil>: Invalid value: "": "x" must validate all the schemas (allOf)]',
    ),
    (
        {"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 7}]},
        6,
        '<nil>: Invalid value: "": "x" must validate one and only one schema (oneOf). Found 2 valid alternatives',
    ),
    (
        {"type": "string", "not": {"pattern": "^z"}},
        "zed",
        '<nil>: Invalid value: "": "x" must not validate the schema (not)',
    ),
]


@pytest.mark.parametrize(("schema", "value", "expected"), CASES)
def test_a_value_is_refused_in_the_api_servers_words(schema: dict[str, Any], value: Any, expected: str) -> None:
    errors = validate(value, parse(schema, "s"), "x")
    assert (aggregate(errors) if errors else "") == expected


def test_nested_paths_name_each_step() -> None:
    schema = parse(
        {
            "type": "object",
            "properties": {
                "labels": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"key": {"type": "string"}, "allowedRegex": {"type": "string"}},
                    },
                }
            },
        },
        "s",
    )
    errors = validate({"labels": [{"key": "a"}, {"key": "b", "allowedRegex": 3}]}, schema, "spec.parameters")
    assert [str(e) for e in errors] == [
        'spec.parameters.labels[1].allowedRegex: Invalid value: "integer": '
        'spec.parameters.labels[1].allowedRegex in body must be of type string: "integer"'
    ]
