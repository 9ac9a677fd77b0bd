"""Schemas the API server refuses in a CRD are refused here, at the field, in its words; what regokite
cannot check as the API server does is refused too."""

from __future__ import annotations

from typing import Any

import pytest

from regokite.structural.field_errors import go_float, go_quote
from regokite.structural.schema import SchemaError, parse


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"properties": {"a": {"type": "string"}}}, "s.type: Required value: must not be empty at the root"),
        (
            {"type": "object", "properties": {"a": {"description": "no type"}}},
            "s.properties[a].type: Required value: must not be empty for specified object fields",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array"}}},
            "s.properties[a].items: Required value: must be specified",
        ),
        (
            {"type": "array", "items": {"properties": {}}},
            "s.items.type: Required value: must not be empty for specified array items",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "s.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        ),
        (
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "s.uniqueItems: Forbidden: uniqueItems cannot be set to true "
            "since the runtime complexity becomes quadratic",
        ),
        (
            {"type": "strin"},
            's.type: Unsupported value: "strin": '
            'supported values: "array", "boolean", "integer", "number", "object", "string"',
        ),
        (
            {"type": "string", "anyOf": [{"type": "string"}]},
            "s.anyOf[0].type: Forbidden: must be empty to be structural",
        ),
        (
            {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() > 1"}]},
            "s.x-kubernetes-validations: Forbidden: CEL rules are not evaluated by regokite",
        ),
        ({"type": "string", "format": "email"}, "s.format: Forbidden: format email is not checked by regokite"),
    ],
)
def test_a_schema_the_api_server_refuses_is_refused_at_its_field(schema: dict[str, Any], expected: str) -> None:
    with pytest.raises(SchemaError) as refused:
        parse(schema, "s")
    assert [str(e) for e in refused.value.errors] == [expected]


def test_a_pattern_that_does_not_compile_is_refused() -> None:
    with pytest.raises(SchemaError) as refused:
        parse({"type": "string", "pattern": "("}, "s")
    assert str(refused.value).startswith('s.pattern: Invalid value: "(": must be a valid regular expression')


def test_an_open_node_needs_no_type() -> None:
    parse({"type": "object", "properties": {"any": {"x-kubernetes-preserve-unknown-fields": True}}}, "s")
    parse({"type": "object", "properties": {"port": {"x-kubernetes-int-or-string": True}}}, "s")


def test_values_print_as_go_prints_them() -> None:
    assert [go_float(f) for f in (1e6, 123456.0, 1.5, 1e-05, 10.0)] == ["1e+06", "123456", "1.5", "1e-05", "10"]
    assert go_quote('a"\n\x00é') == '"a\\"\\n\\x00é"'
