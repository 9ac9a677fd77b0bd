"""json.match_schema / json.verify_schema and opa.runtime beside OPA's evaluator (tests/opa_oracle.py).

On the code before: match_schema answered `[true, null]` for a valid document and a string for an
invalid one (OPA: `[true, []]`, a list of {desc, error, field, type}); opa.runtime() answered
regorus's own description (OPA without a configured runtime, as Gatekeeper: `{}`).
"""

from __future__ import annotations

import json
from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import EvaluationError

MATCHED = [
    ({"id": 5}, {"properties": {"id": {"type": "integer"}}, "required": ["id"]}),
    ('{"id": 5}', '{"properties": {"id": {"type": "integer"}}}'),
    ({"id": "foo"}, {"properties": {"id": {"type": "integer"}}, "required": ["id"]}),
    ({}, {"required": ["id"]}),
    ({"a": {"b": [1, "x"]}}, {"properties": {"a": {"properties": {"b": {"items": {"type": "integer"}}}}}}),
    ('"x"', {"enum": ["a", "b", 1, None, True]}),
    ({"value": "allow"}, {"enum": []}),
    ("5", {"minimum": 10}),
    ("5", {"maximum": 1}),
    ("5", {"exclusiveMinimum": 5}),
    ("5", {"exclusiveMaximum": 5}),
    ("5", {"multipleOf": 2}),
    ('"ab"', {"minLength": 3}),
    ('"abcd"', {"maxLength": 3}),
    ('"ab"', {"pattern": "^x"}),
    ('"ab\\n"', {"pattern": "^ab$"}),
    ('"٣"', {"pattern": "^\\d$"}),
    ({"a": 1, "b": 2}, {"additionalProperties": False, "properties": {"a": {}}}),
    ("[1]", {"minItems": 2}),
    ("[1, 2]", {"maxItems": 1}),
    ("1.5", {"type": ["integer", "string"]}),
    ("null", {"type": "object"}),
    ("1.0", {"type": "integer"}),
    ("true", {"type": "number"}),
    ("3", {"const": 4}),
    ({"a": 1}, {"minProperties": 2}),
    ({"a": 1}, {"maxProperties": 0}),
    ({"a b": 1}, {"properties": {"a b": {"$ref": "#/definitions/s"}}, "definitions": {"s": {"type": "string"}}}),
    ('[{"a": 1}]', {"items": {"required": ["b"]}}),
]


def _both(rule: str, input: Any) -> tuple[Any, Any]:
    return opa_oracle.both(f"package p\n\n{rule}\n", input)


@pytest.mark.parametrize(("document", "schema"), MATCHED, ids=lambda v: json.dumps(v)[:60])
def test_match_schema_answers_as_opa(document: Any, schema: Any) -> None:
    mine, opa = _both("x := json.match_schema(input.d, input.s)", {"d": document, "s": schema})
    assert mine == opa


@pytest.mark.parametrize(
    ("document", "schema", "why"),
    [
        ({}, {"required": ["a", "b"]}, "2 places"),
        ('"x"', {"format": "email"}, "'format'"),
        ("1", {"anyOf": [{"type": "string"}]}, "keyword 'anyOf'"),
        ('"a"', {"pattern": "(?i)A"}, "pattern .a construct Go's regexp"),
        ('"a"', {"pattern": "a$|b"}, "pattern .a construct Go's regexp"),
        ("1", {"minimum": 1.5}, "the bound 1.5 "),
        ("1", {"$ref": "http://example.com/s.json"}, "ref .not within the schema"),
        ({"a": 1, "b": 2}, {"additionalProperties": False}, "2 places|more than one"),
    ],
)
def test_match_schema_refuses_what_it_cannot_answer_as_opa(document: Any, schema: Any, why: str) -> None:
    module = Module("p.rego", "package p\n\nx := json.match_schema(input.d, input.s)\n")
    with pytest.raises(EvaluationError, match=why):
        EmbeddedEngine(Bundle((module,))).evaluate("data.p.x", {"d": document, "s": schema})


@pytest.mark.parametrize("schema", [{}, {"type": "integer"}, '{"properties": {"a": {}}}'])
def test_verify_schema_of_a_valid_schema_answers_as_opa(schema: Any) -> None:
    mine, opa = _both("x := json.verify_schema(input)", schema)
    assert mine == opa == [True, None]


@pytest.mark.parametrize(
    "schema", [1, True, None, [1], "{", "", "true", " false ", "1", "null", "[]", '"a"', "NaN"], ids=repr
)
def test_verify_schema_of_what_gojsonschema_cannot_load_is_false_and_its_message(schema: Any) -> None:
    """[false, "jsonschema: ..."] as OPA (regokite erred); a boolean schema (the string "true") is valid."""
    mine, opa = _both("x := json.verify_schema(input.v)", {"v": schema})
    assert mine == opa


@pytest.mark.parametrize("schema", ["true", "false"])
def test_match_schema_of_a_boolean_schema_answers_as_opa(schema: str) -> None:
    mine, opa = _both("x := json.match_schema(input, s)\n\ns := " + json.dumps(schema), {"a": 1})
    assert mine == opa


def test_an_invalid_schema_is_an_error_in_match_schema_and_refused_in_verify_schema() -> None:
    schema = {"properties": {"id": {"type": "unknown"}}}
    module = Module("p.rego", "package p\n\nx := json.match_schema({}, input)\n\ny := json.verify_schema(input)\n")
    engine = EmbeddedEngine(Bundle((module,)))
    with pytest.raises(EvaluationError, match=r"json\.match_schema: invalid schema"):
        engine.evaluate("data.p.x", schema)
    with pytest.raises(EvaluationError, match="an invalid schema's message"):
        engine.evaluate("data.p.y", schema)


def test_opa_runtime_is_empty_as_where_no_runtime_is_configured() -> None:
    mine, opa = _both("x := opa.runtime()", None)
    assert mine == opa == {}


@pytest.mark.parametrize(
    "value",
    [
        '{"a": 1}',
        "[1, 2]",
        "1",
        '"s"',
        "NaN",
        "Infinity",
        "-Infinity",
        "{'a': 1}",
        "[1,]",
        "",
        " 1 ",
        "\ufeff1",
        '{"a": 1, "a": 2}',
        '"\\ud800"',
        "1e400",
        1,
        None,
        ["1"],
        {"a": "1"},
        True,
    ],
)
def test_json_is_valid_answers_as_opa(value: Any) -> None:
    mine, opa = _both("x := json.is_valid(input.v)", {"v": value})
    assert mine == opa
