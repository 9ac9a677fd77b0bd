"""graphql.* beside OPA's evaluator (tests/opa_oracle.py): validity of queries and schemas, the ASTs.

On the code before every graphql builtin was refused at load. The corpus holds the shapes where
gqlparser (OPA's) and graphql-core (ours) part, each reproduced in engine/extensions/graphql.py:
an extension of an undeclared type, a schema without Query, @defer, a subscription selecting one
field twice, an input object holding itself, a field argument declared twice, a built-in type
declared again, an empty query.
"""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine

SCHEMA = """
type Query {
  hero(episode: Episode): Character, droid(id: ID!): Droid, search(text: String): [SearchResult]
  node(input: NodeInput): Character
}
enum Episode { NEWHOPE EMPIRE JEDI }
interface Character { id: ID!, name: String, friends: [Character] }
type Human implements Character { id: ID!, name: String, friends: [Character], height(unit: Unit = METER): Float }
type Droid implements Character { id: ID!, name: String, friends: [Character], primaryFunction: String }
enum Unit { METER FOOT }
union SearchResult = Human | Droid
input NodeInput { id: ID!, kind: String = "x" }
type Mutation { like(id: ID!): Character }
type Subscription { liked: Character, other: String }
"""

QUERIES = [
    "{ hero { name } hero { name } }",
    "{ hero(episode: JEDI) { name } hero { name } }",
    "query { ...F } fragment F on Query { hero { name } } fragment F on Query { hero { id } }",
    "{ ...F } fragment F on Query { ...G } fragment G on Query { ...F }",
    "query ($a: Int, $a: Int) { droid(id: $a) { name } }",
    "query ($a: Character) { hero { name } }",
    "{ hero { name(x: 1) } }",
    "{ droid(id: 1, id: 2) { name } }",
    "{ hero @skip(if: true) @skip(if: false) { name } }",
    "{ hero { ... on Episode { name } } }",
    "{ hero { ... on Human { name } ... on Droid { name: primaryFunction } } }",
    "{ search(text: 1.5) { __typename } }",
    "{ droid(id: null) { name } }",
    "query ($x: ID) { droid(id: $x) { name } }",
    "{ hero { name } } query { hero { id } }",
    "{ hero { name __typename } }",
    "subscription { __typename }",
    "subscription { liked { name } liked2: liked { id } }",
    "{ hero { name } }",
    "{ hero { nme } }",
    "{ __typename }",
    "{ __schema { types { name } } }",
    "query Q($e: Episode) { hero(episode: $e) { name ... on Droid { primaryFunction } } }",
    "query Q($e: Episode) { hero { name } }",
    "{ hero { ...F } } fragment F on Character { name }",
    "{ hero { name } } fragment F on Character { name }",
    "{ droid { name } }",
    "{ droid(id: 1) { name } }",
    '{ droid(id: "1") { name @skip(if: true) } }',
    '{ droid(id: "1") { name @defer } }',
    "{ hero { ... @defer { name } } }",
    '{ search(text: "x") { ... on Human { height(unit: FOOT) } } }',
    '{ search(text: "x") { name } }',
    "subscription { liked { name } other }",
    "subscription { liked { name } }",
    "mutation { like(id: 1) { name } }",
    "{ hero { name } } { hero { id } }",
    "query A { hero { name } } query A { hero { id } }",
    "{ node(input: {id: 1}) { name } }",
    "{ node(input: {id: 1, bad: 2}) { name } }",
    "{ hero { name: id } }",
    "{ hero { a: name a: id } }",
    "{ hero { name @unknown } }",
    "query ($x: NodeInput = {id: 1}) { node(input: $x) { name } }",
    "query ($x: Int) { droid(id: $x) { name } }",
    "{ hero { friends } }",
    "{ hero(episode: MARS) { name } }",
    '{ droid(id: """block""") { name } }',
    "",
    "{ hero { ... on Human { height } ... on Droid { height: primaryFunction } } }",
]

SCHEMAS = [
    SCHEMA,
    "type Query { a: String } directive @skip(if: Boolean!) on FIELD",
    "type Query { a: String } directive @defer on FIELD",
    "type Query { a: String } scalar String",
    "type Query { a: Unknown }",
    "type Query { a(x: Query): String }",
    "type Query { a: String } input In { b: Query }",
    "interface I { a: String } type Query implements I { a: Int }",
    "interface I { a: String } type Query implements I { a: String! }",
    "interface I { a(x: Int): String } type Query implements I { a: String }",
    "type Query { a: String @include(if: true) }",
    "type Query { a: String @deprecated @deprecated }",
    "enum E { A } extend enum E { B } type Query { e: E }",
    "union U = Query | Query type Query { a: String }",
    "type Query { a(x: Int, x: Int): String }",
    "type Query { a: String, a: Int }",
    "directive @d on FIELD directive @d on FIELD",
    "directive @d(x: Unknown) on FIELD",
    "type Query { a: String } extend type Query { b: String } extend type Query { b: Int }",
    "type Query { a: String } extend union Nope = Query",
    "type Query { a: String } extend input In { a: Int }",
    "type Query { a: String }",
    "type A { a: B }",
    "type Query { a: String } type Query { b: String }",
    "extend type Query { a: String }",
    "type Query { a: String } extend type Query { a: Int }",
    "interface I { a: String } type Query implements I { b: String }",
    "union U = String",
    "type Query { a(x: I): String } interface I { a: String }",
    "scalar Date",
    "enum E { A A }",
    "input I { a: I! }",
    'type Query { a: String @deprecated(reason: "x") }',
    "directive @d on FIELD type Query { a: String @d }",
    "type Query { __a: String }",
    "type __A { a: String }",
    "schema { query: Q } type Q { a: String }",
    "schema { query: Query } schema { query: Query } type Query { a: String }",
    "schema { mutation: M } type M { a: String }",
    "type Query { a: String } extend schema { mutation: M } type M { b: String }",
    "interface A implements B { a: String } interface B { a: String } type Query { x: A }",
    'input I { a: Int = "x" } type Query { f(i: I): String }',
    'type Query { f(a: Int = "x"): String }',
    "directive @d(a: Int) repeatable on FIELD | QUERY",
    "type Query { a: Int @oneOf }",
    "input I @oneOf { a: Int, b: Int } type Query { f(i: I): Int }",
    'type Query { a: Int @specifiedBy(url: "x") }',
    'scalar S @specifiedBy(url: "x")',
    '"""doc""" type Query { "fd" a("ad" x: Int): Int }',
]

RULES = """package p

valid := [graphql.is_valid(q, input.schema) | some q in input.queries]

schema_valid := [graphql.schema_is_valid(s) | some s in input.schemas]

verified := [graphql.parse_and_verify(q, input.schema) | some q in input.queries]

queries := [graphql.parse_query(q) | some q in input.queries]

schemas := [graphql.parse_schema(s) | some s in input.schemas]

from_objects := [graphql.is_valid(graphql.parse_query(q), graphql.parse_schema(input.schema)) |
	some q in input.queries
	q != ""
	not contains(q, "...")
	not contains(q, "@defer") # OPA 1.20 panics on a directive of a field given as an object
]
"""


@pytest.fixture(scope="module")
def answers() -> dict[str, tuple[Any, Any]]:
    bundle = Bundle((Module("p.rego", RULES),))
    mine, opa = EmbeddedEngine(bundle), opa_oracle.OracleEngine(bundle)
    given = {"queries": QUERIES, "schema": SCHEMA, "schemas": SCHEMAS}
    rules = ("valid", "schema_valid", "verified", "queries", "schemas", "from_objects")
    return {rule: (mine.evaluate(f"data.p.{rule}", given), opa.evaluate(f"data.p.{rule}", given)) for rule in rules}


def _without_expected_type_has_default(value: Any) -> Any:
    """OPA 1.20's gqlparser writes `ExpectedTypeHasDefault: false` in every value of a query AST; the
    OPA of the conformance suite (v1/graphql/test-graphql-parse-query.yaml) does not, nor do we."""
    if isinstance(value, dict):
        return {k: _without_expected_type_has_default(v) for k, v in value.items() if k != "ExpectedTypeHasDefault"}
    if isinstance(value, list):
        return [_without_expected_type_has_default(v) for v in value]
    return value


@pytest.mark.parametrize("rule", ["valid", "schema_valid", "verified", "queries", "schemas", "from_objects"])
def test_graphql_answers_as_opa(answers: dict[str, tuple[Any, Any]], rule: str) -> None:
    mine, opa = answers[rule]
    assert mine == _without_expected_type_has_default(opa)


def test_a_query_ast_object_holding_a_fragment_spread_is_an_error() -> None:
    """OPA decodes every selection of an AST object as a field: a spread is a field without an alias
    there (OPA 1.20 panics), which is refused here rather than read some other way."""
    module = Module("p.rego", "package p\n\nx := graphql.is_valid(graphql.parse_query(input.q), input.s)\n")
    query = "{ hero { ...F } } fragment F on Character { name }"
    with pytest.raises(Exception, match="cannot read as OPA"):
        EmbeddedEngine(Bundle((module,))).evaluate("data.p.x", {"q": query, "s": SCHEMA})
