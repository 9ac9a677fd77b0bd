"""graphql.* as OPA: parsing with graphql-core (the reference implementation's port), the ASTs in
the shape OPA returns (its gqlparser's structs as JSON, without positions, nulls and empty values).

OPA parses with gqlparser and validates a query against `prelude + schema` with gqlparser's
rules; graphql-core implements the same specification, and the two differ where gqlparser keeps
quirks of its own, which are reproduced here: an extension of a type no definition declares
defines it, and a schema needs no Query type. Parse errors are builtin errors (their text is
graphql-core's, not gqlparser's); is_valid, schema_is_valid and parse_and_verify answer false.

An AST given as an object is read as OPA reads it (Go's JSON decoding into gqlparser's structs):
a query AST holding any selection cannot be decoded there (a selection is an interface), so it is
an error (false for is_valid); a schema AST is printed back to SDL and parsed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, type_name

# gqlparser's ast.ValueKind numbers
_VARIABLE, _INT, _FLOAT, _STRING, _BLOCK, _BOOLEAN, _NULL, _ENUM, _LIST, _OBJECT = range(10)
_KINDS = {
    "object_type": "OBJECT",
    "interface_type": "INTERFACE",
    "union_type": "UNION",
    "enum_type": "ENUM",
    "scalar_type": "SCALAR",
    "input_object_type": "INPUT_OBJECT",
}


class _Invalid(Exception):
    """The query or schema does not parse or validate (OPA's error; false where OPA answers false)."""


# --- parsing, as gqlparser's ParseQuery / ParseSchema ---


def _parse(text: str, *, schema: bool) -> Any:
    from graphql import GraphQLError, parse
    from graphql.language import ast

    if _empty(text):
        return ast.DocumentNode(definitions=())  # gqlparser reads no definitions; graphql-core refuses it
    try:
        document = parse(text, no_location=True, allow_legacy_fragment_variables=True)
    except GraphQLError as exc:
        raise _Invalid(exc.message) from None
    for definition in document.definitions:
        executable = isinstance(definition, ast.ExecutableDefinitionNode)
        if executable == schema:
            kind = definition.kind.replace("_", " ")
            raise _Invalid(f"Unexpected {kind} in a GraphQL {'schema' if schema else 'query'}")
    return document


def _empty(text: str) -> bool:
    from graphql import GraphQLError, Source
    from graphql.language import Lexer, TokenKind

    try:
        return Lexer(Source(text)).advance().kind == TokenKind.EOF
    except GraphQLError:
        return False


def _name(node: Any) -> str:
    return node.name.value if node is not None and node.name is not None else ""


def _type(node: Any) -> dict[str, Any]:
    if node.kind == "non_null_type":
        return {**_type(node.type), "NonNull": True}
    if node.kind == "list_type":
        return {"NamedType": "", "Elem": _type(node.type), "NonNull": False}
    return {"NamedType": node.name.value, "NonNull": False}


def _value(node: Any) -> dict[str, Any]:
    kind = node.kind
    if kind == "variable":
        return {"Raw": node.name.value, "Kind": _VARIABLE}
    if kind == "list_value":
        return {"Raw": "", "Kind": _LIST, "Children": [{"Name": "", "Value": _value(v)} for v in node.values]}
    if kind == "object_value":
        children = [{"Name": f.name.value, "Value": _value(f.value)} for f in node.fields]
        return {"Raw": "", "Kind": _OBJECT, "Children": children}
    if kind == "string_value":
        return {"Raw": node.value, "Kind": _BLOCK if node.block else _STRING}
    if kind == "boolean_value":
        return {"Raw": "true" if node.value else "false", "Kind": _BOOLEAN}
    if kind == "null_value":
        return {"Raw": "null", "Kind": _NULL}
    return {"Raw": node.value, "Kind": {"int_value": _INT, "float_value": _FLOAT, "enum_value": _ENUM}[kind]}


def _arguments(nodes: Any) -> list[dict[str, Any]]:
    return [{"Name": a.name.value, "Value": _value(a.value)} for a in nodes or ()]


def _directives(nodes: Any) -> list[dict[str, Any]]:
    return [{"Name": d.name.value, "Arguments": _arguments(d.arguments), "Location": ""} for d in nodes or ()]


def _selections(node: Any) -> list[dict[str, Any]]:
    if node is None:
        return []
    out: list[dict[str, Any]] = []
    for selection in node.selections:
        directives = _directives(selection.directives)
        if selection.kind == "field":
            name = selection.name.value
            alias = selection.alias.value if selection.alias else name
            out.append(
                {
                    "Alias": alias,
                    "Name": name,
                    "Arguments": _arguments(selection.arguments),
                    "Directives": directives,
                    "SelectionSet": _selections(selection.selection_set),
                }
            )
        elif selection.kind == "fragment_spread":
            out.append({"Name": selection.name.value, "Directives": directives})
        else:
            condition = selection.type_condition.name.value if selection.type_condition else ""
            out.append(
                {
                    "TypeCondition": condition,
                    "Directives": directives,
                    "SelectionSet": _selections(selection.selection_set),
                }
            )
    return out


def _variables(nodes: Any) -> list[dict[str, Any]]:
    return [
        {
            "Variable": v.variable.name.value,
            "Type": _type(v.type),
            "DefaultValue": _value(v.default_value) if v.default_value else None,
            "Directives": _directives(v.directives),
            "Used": False,
        }
        for v in nodes or ()
    ]


def _query_document(document: Any) -> dict[str, Any]:
    operations, fragments = [], []
    for d in document.definitions:
        if d.kind == "operation_definition":
            operations.append(
                {
                    "Operation": d.operation.value,
                    "Name": _name(d),
                    "VariableDefinitions": _variables(d.variable_definitions),
                    "Directives": _directives(d.directives),
                    "SelectionSet": _selections(d.selection_set),
                }
            )
        else:
            fragments.append(
                {
                    "Name": d.name.value,
                    "VariableDefinition": _variables(d.variable_definitions),
                    "TypeCondition": d.type_condition.name.value,
                    "Directives": _directives(d.directives),
                    "SelectionSet": _selections(d.selection_set),
                }
            )
    return {"Operations": operations, "Fragments": fragments}


def _description(node: Any) -> str:
    return node.description.value if getattr(node, "description", None) is not None else ""


def _input_values(nodes: Any) -> list[dict[str, Any]]:
    return [
        {
            "Description": _description(a),
            "Name": a.name.value,
            "DefaultValue": _value(a.default_value) if a.default_value else None,
            "Type": _type(a.type),
            "Directives": _directives(a.directives),
        }
        for a in nodes or ()
    ]


def _definition(node: Any) -> dict[str, Any]:
    kind = _KINDS[node.kind.removesuffix("_definition").removesuffix("_extension")]
    fields = getattr(node, "fields", None) or ()
    if kind == "INPUT_OBJECT":
        listed = _input_values(fields)
    else:
        listed = [
            {
                "Description": _description(f),
                "Name": f.name.value,
                "Arguments": _input_values(f.arguments),
                "Type": _type(f.type),
                "Directives": _directives(f.directives),
            }
            for f in fields
        ]
    values = [
        {"Description": _description(v), "Name": v.name.value, "Directives": _directives(v.directives)}
        for v in getattr(node, "values", None) or ()
    ]
    return {
        "Kind": kind,
        "Description": _description(node),
        "Name": node.name.value,
        "Directives": _directives(node.directives),
        "Interfaces": [i.name.value for i in getattr(node, "interfaces", None) or ()],
        "Fields": listed,
        "Types": [t.name.value for t in getattr(node, "types", None) or ()],
        "EnumValues": values,
        "BuiltIn": False,
    }


def _schema_definition(node: Any) -> dict[str, Any]:
    return {
        "Description": _description(node),
        "Directives": _directives(node.directives),
        "OperationTypes": [{"Operation": t.operation.value, "Type": t.type.name.value} for t in node.operation_types],
    }


def _schema_document(document: Any) -> dict[str, Any]:
    out: dict[str, list[Any]] = {"Schema": [], "SchemaExtension": [], "Directives": [], "Definitions": []}
    out["Extensions"] = []
    for d in document.definitions:
        if d.kind == "schema_definition":
            out["Schema"].append(_schema_definition(d))
        elif d.kind == "schema_extension":
            out["SchemaExtension"].append(_schema_definition(d))
        elif d.kind == "directive_definition":
            out["Directives"].append(
                {
                    "Description": _description(d),
                    "Name": d.name.value,
                    "Arguments": _input_values(d.arguments),
                    "Locations": [loc.value for loc in d.locations],
                    "IsRepeatable": d.repeatable,
                }
            )
        else:
            out["Extensions" if d.kind.endswith("_extension") else "Definitions"].append(_definition(d))
    return out


def _pruned(value: Any) -> Any:
    """OPA's pruneIrrelevantGraphQLASTNodes: no nulls, no empty arrays or objects (pruned first)."""
    if isinstance(value, dict):
        items = ((k, _pruned(v)) for k, v in value.items() if v is not None)
        return {k: v for k, v in items if not (isinstance(v, dict | list) and not v)}
    if isinstance(value, list):
        items = (_pruned(v) for v in value if v is not None)
        return [v for v in items if not (isinstance(v, dict | list) and not v)]
    return value


# --- validation, as gqlparser's ValidateSchemaDocument and Validate ---


def _schema(document: Any) -> Any:
    """graphql-core's schema of a parsed SDL document, read as gqlparser reads it."""
    from graphql import GraphQLError, build_ast_schema, validate_schema
    from graphql.language import ast
    from graphql.validation import UniqueArgumentDefinitionNamesRule
    from graphql.validation.specified_rules import specified_sdl_rules
    from graphql.validation.validate import validate_sdl

    defined = {d.name.value for d in document.definitions if isinstance(d, ast.TypeDefinitionNode)}
    directives = {d.name.value for d in document.definitions if isinstance(d, ast.DirectiveDefinitionNode)}
    definitions = [] if "defer" in directives else [_defer()]
    for d in document.definitions:
        if isinstance(d, ast.TypeExtensionNode) and d.name.value not in defined:
            d = _as_definition(d)  # gqlparser: an extension of an undeclared type declares it
            defined.add(d.name.value)
        definitions.append(d)
    for d in definitions:
        if isinstance(d, ast.TypeDefinitionNode) and d.name.value in _PRELUDE_TYPES:
            raise _Invalid(f"Cannot redeclare type {d.name.value}.")
    merged = ast.DocumentNode(definitions=tuple(definitions))
    errors = validate_sdl(merged, None, [r for r in specified_sdl_rules if r is not UniqueArgumentDefinitionNamesRule])
    if errors:
        raise _Invalid(errors[0].message)
    try:
        schema = build_ast_schema(merged, assume_valid_sdl=True)
    except (GraphQLError, TypeError) as exc:
        raise _Invalid(str(exc)) from None
    errors = [e for e in validate_schema(schema) if not e.message.startswith(_GQLPARSER_ACCEPTS)]
    if errors:
        raise _Invalid(errors[0].message)
    schema._validation_errors = []  # valid as gqlparser reads it: graphql-core's validate must not recheck
    return schema


# the types of gqlparser's prelude: a schema declaring one again is invalid there (graphql-core takes it)
_PRELUDE_TYPES = frozenset(
    {"String", "Int", "Float", "Boolean", "ID", "__Schema", "__Type", "__TypeKind", "__Field", "__InputValue"}
    | {"__EnumValue", "__DirectiveLocation", "__Directive"}
)
# schema errors graphql-core reports and gqlparser does not: a schema without a Query type (a query
# against it is invalid), an input object holding itself through non-null fields
_GQLPARSER_ACCEPTS = ("Query root type must be provided.", "Cannot reference Input Object")


@functools.cache
def _defer() -> Any:
    """gqlparser's prelude declares @defer (graphql-core's specified directives do not)."""
    from graphql import parse

    text = "directive @defer(if: Boolean = true, label: String) on FRAGMENT_SPREAD | INLINE_FRAGMENT"
    return parse(text, no_location=True).definitions[0]


def _as_definition(extension: Any) -> Any:
    from graphql.language import ast

    kind = extension.kind.removesuffix("_extension")
    node_class = {
        "object_type": ast.ObjectTypeDefinitionNode,
        "interface_type": ast.InterfaceTypeDefinitionNode,
        "union_type": ast.UnionTypeDefinitionNode,
        "enum_type": ast.EnumTypeDefinitionNode,
        "scalar_type": ast.ScalarTypeDefinitionNode,
        "input_object_type": ast.InputObjectTypeDefinitionNode,
    }[kind]
    fields = {k: getattr(extension, k) for k in extension.keys if k != "loc"}
    return node_class(**fields, description=None)


def _validate(schema: Any, query: Any) -> None:
    from graphql import specified_rules, validate
    from graphql.validation import SingleFieldSubscriptionsRule

    for operation in query.definitions:
        if operation.kind == "operation_definition" and schema.get_root_type(operation.operation) is None:
            raise _Invalid(f'Schema does not support operation type "{operation.operation.value}"')
    errors = validate(schema, query, [r for r in specified_rules if r is not SingleFieldSubscriptionsRule])
    if errors:
        raise _Invalid(errors[0].message)
    for operation in query.definitions:
        if operation.kind == "operation_definition" and operation.operation.value == "subscription":
            names = _root_fields(operation.selection_set, query)
            if len(names) > 1 or any(n.startswith("__") for n in names):
                raise _Invalid("A subscription must select only one top level field.")


def _root_fields(selections: Any, query: Any) -> set[str]:
    """The names of the fields a selection set selects (through fragments): gqlparser's rule counts
    one subscription field selected twice (under two aliases) as one; graphql-core as two."""
    fragments = {d.name.value: d for d in query.definitions if d.kind == "fragment_definition"}
    names: set[str] = set()
    for selection in selections.selections:
        if selection.kind == "field":
            names.add(selection.name.value)
        elif selection.kind == "inline_fragment":
            names |= _root_fields(selection.selection_set, query)
        elif selection.name.value in fragments:
            names |= _root_fields(fragments[selection.name.value].selection_set, query)
    return names


# --- operands ---


def _document_operand(name: str, value: Any, position: int, *, schema: bool) -> Any:
    """A query or schema operand: GraphQL text, or an AST object (printed back to text first)."""
    if isinstance(value, str):
        return _parse(value, schema=schema)
    if isinstance(value, dict):
        return _parse(_readable(_sdl if schema else _query_text, value), schema=schema)
    raise BuiltinError(f"{name}: operand {position} must be one of {{object, string}} but got {type_name(value)}")


def _readable(printer: Callable[[dict[str, Any]], str], ast: dict[str, Any]) -> str:
    """An AST object printed back to GraphQL text, as OPA decodes it into gqlparser's structs; a
    Refusal for what that decoding reads in a way not reproduced here."""
    try:
        return printer(ast)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise Refusal(
            f"graphql: an AST object the embedded engine cannot read as OPA ({exc}): pass the GraphQL text, "
            "or use --engine opa"
        ) from None


def _sdl(ast: dict[str, Any]) -> str:
    """A schema AST object (as graphql.parse_schema returns it) printed back to SDL."""
    parts = [_print_schema_definition("schema", s) for s in _list(ast, "Schema")]
    parts += [_print_schema_definition("extend schema", s) for s in _list(ast, "SchemaExtension")]
    parts += [_print_directive_definition(d) for d in _list(ast, "Directives")]
    parts += [_print_definition("", d) for d in _list(ast, "Definitions")]
    parts += [_print_definition("extend ", d) for d in _list(ast, "Extensions")]
    return "\n".join(parts)


def _query_text(ast: dict[str, Any]) -> str:
    """A query AST object printed back as a query. OPA's decoder reads every selection as a field
    (its keys Alias, Name, Arguments, Directives, SelectionSet), so a fragment spread or an inline
    fragment given as an object is a field there: one without a name fails validation."""
    parts = []
    for op in _list(ast, "Operations"):
        variables = _print_variables(_list(op, "VariableDefinitions"))
        head = f"{_text(op, 'Operation')} {_text(op, 'Name')}{variables}{_print_directives(op)}"
        parts.append(f"{head} {_print_selections(op)}")
    for fragment in _list(ast, "Fragments"):
        variables = _print_variables(_list(fragment, "VariableDefinition"))
        head = f"fragment {_text(fragment, 'Name')}{variables} on {_text(fragment, 'TypeCondition')}"
        parts.append(f"{head}{_print_directives(fragment)} {_print_selections(fragment)}")
    return "\n".join(parts)


def _print_variables(variables: list[Any]) -> str:
    printed = []
    for v in variables:
        default = f" = {_print_value(v['DefaultValue'])}" if v.get("DefaultValue") else ""
        printed.append(f"${_text(v, 'Variable')}: {_print_type(v['Type'])}{default}{_print_directives(v)}")
    return f"({', '.join(printed)})" if printed else ""


def _print_selections(node: dict[str, Any]) -> str:
    printed = []
    for field in _list(node, "SelectionSet"):
        alias, name = _text(field, "Alias"), _text(field, "Name")
        if not name:
            raise _Invalid('Cannot query field "" (a selection decoded as a field without a name)')
        if not alias:
            raise ValueError(f"the selection {name!r} has no Alias (OPA decodes it as a field aliased to nothing)")
        inner = _print_selections(field) if field.get("SelectionSet") else ""
        head = name if alias == name else f"{alias}: {name}"
        printed.append(f"{head}{_print_arguments(field)}{_print_directives(field)} {inner}".rstrip())
    return "{ " + " ".join(printed) + " }" if printed else ""


def _list(node: dict[str, Any], key: str) -> list[Any]:
    value = node.get(key) or []
    if not isinstance(value, list):
        raise TypeError(f"{key} is not an array")
    return value


def _text(node: dict[str, Any], key: str) -> str:
    value = node.get(key, "")
    if not isinstance(value, str):
        raise TypeError(f"{key} is not a string")
    return value


def _print_description(node: dict[str, Any]) -> str:
    import json

    text = _text(node, "Description")
    return f"{json.dumps(text)} " if text else ""


def _print_type(node: dict[str, Any]) -> str:
    elem = node.get("Elem")
    text = f"[{_print_type(elem)}]" if elem else _text(node, "NamedType")
    return text + ("!" if node.get("NonNull") is True else "")


def _print_value(node: dict[str, Any]) -> str:
    import json

    kind, raw = node.get("Kind"), _text(node, "Raw")
    if kind == _VARIABLE:
        return f"${raw}"
    if kind in (_STRING, _BLOCK):
        return json.dumps(raw)
    if kind == _LIST:
        return "[" + ", ".join(_print_value(c["Value"]) for c in _list(node, "Children")) + "]"
    if kind == _OBJECT:
        return "{" + ", ".join(f"{_text(c, 'Name')}: {_print_value(c['Value'])}" for c in _list(node, "Children")) + "}"
    return raw


def _print_directives(node: dict[str, Any]) -> str:
    return "".join(f" @{_text(d, 'Name')}{_print_arguments(d)}" for d in _list(node, "Directives"))


def _print_arguments(node: dict[str, Any]) -> str:
    arguments = _list(node, "Arguments")
    if not arguments:
        return ""
    return "(" + ", ".join(f"{_text(a, 'Name')}: {_print_value(a['Value'])}" for a in arguments) + ")"


def _print_input_values(values: list[Any]) -> str:
    printed = []
    for v in values:
        default = f" = {_print_value(v['DefaultValue'])}" if v.get("DefaultValue") else ""
        text = f"{_print_description(v)}{_text(v, 'Name')}: {_print_type(v['Type'])}{default}{_print_directives(v)}"
        printed.append(text)
    return ", ".join(printed)


def _print_schema_definition(keyword: str, node: dict[str, Any]) -> str:
    types = " ".join(f"{_text(t, 'Operation')}: {_text(t, 'Type')}" for t in _list(node, "OperationTypes"))
    return f"{_print_description(node)}{keyword}{_print_directives(node)} {{ {types} }}" if types else keyword


def _print_directive_definition(node: dict[str, Any]) -> str:
    arguments = _list(node, "Arguments")
    printed = f"({_print_input_values(arguments)})" if arguments else ""
    repeatable = " repeatable" if node.get("IsRepeatable") is True else ""
    locations = " | ".join(_list(node, "Locations"))
    return f"{_print_description(node)}directive @{_text(node, 'Name')}{printed}{repeatable} on {locations}"


def _print_definition(prefix: str, node: dict[str, Any]) -> str:
    keyword = {
        "OBJECT": "type",
        "INTERFACE": "interface",
        "UNION": "union",
        "ENUM": "enum",
        "SCALAR": "scalar",
        "INPUT_OBJECT": "input",
    }[_text(node, "Kind")]
    head = f"{'' if prefix else _print_description(node)}{prefix}{keyword} {_text(node, 'Name')}"
    interfaces = _list(node, "Interfaces")
    if interfaces:
        head += " implements " + " & ".join(interfaces)
    head += _print_directives(node)
    if keyword == "union":
        types = _list(node, "Types")
        return head + (" = " + " | ".join(types) if types else "")
    if keyword == "enum":
        values = [f"{_print_description(v)}{_text(v, 'Name')}{_print_directives(v)}" for v in _list(node, "EnumValues")]
        return head + (" { " + " ".join(values) + " }" if values else "")
    fields = _list(node, "Fields")
    if not fields:
        return head
    if keyword == "input":
        return head + " { " + _print_input_values(fields) + " }"
    printed = []
    for f in fields:
        arguments = _list(f, "Arguments")
        args = f"({_print_input_values(arguments)})" if arguments else ""
        printed.append(
            f"{_print_description(f)}{_text(f, 'Name')}{args}: {_print_type(f['Type'])}{_print_directives(f)}"
        )
    return head + " { " + " ".join(printed) + " }"


# --- the builtins ---


def _failed(name: str, exc: _Invalid) -> BuiltinError:
    return BuiltinError(f"{name}: {exc} in GraphQL string")


def _parsed_document(name: str, text: Any, *, schema: bool) -> dict[str, Any]:
    """graphql.parse_query and graphql.parse_schema: one operand check and error form, two document kinds."""
    if not isinstance(text, str):
        raise BuiltinError(f"{name}: operand 1 must be string but got {type_name(text)}")
    document = _schema_document if schema else _query_document
    try:
        return _pruned(document(_parse(text, schema=schema)))
    except _Invalid as exc:
        raise _failed(name, exc) from None


@builtin("graphql.parse_query")
def parse_query(query: Any) -> dict[str, Any]:
    return _parsed_document("graphql.parse_query", query, schema=False)


@builtin("graphql.parse_schema")
def parse_schema(schema: Any) -> dict[str, Any]:
    return _parsed_document("graphql.parse_schema", schema, schema=True)


def _verified(name: str, query: Any, schema: Any) -> list[Any]:
    query_document = _document_operand(name, query, 1, schema=False)
    schema_document = _document_operand(name, schema, 2, schema=True)
    _validate(_schema(schema_document), query_document)
    return [_pruned(_query_document(query_document)), _pruned(_schema_document(schema_document))]


@builtin("graphql.parse")
def parse(query: Any, schema: Any) -> list[Any]:
    try:
        return _verified("graphql.parse", query, schema)
    except _Invalid as exc:
        raise _failed("graphql.parse", exc) from None


@builtin("graphql.parse_and_verify")
def parse_and_verify(query: Any, schema: Any) -> list[Any]:
    try:
        return [True, *_verified("graphql.parse_and_verify", query, schema)]
    except (_Invalid, BuiltinError) as exc:
        if isinstance(exc, Refusal):
            raise
        return [False, {}, {}]


@builtin("graphql.is_valid")
def is_valid(query: Any, schema: Any) -> bool:
    try:
        _verified("graphql.is_valid", query, schema)
    except (_Invalid, BuiltinError) as exc:
        if isinstance(exc, Refusal):
            raise
        return False
    return True


@builtin("graphql.schema_is_valid")
def schema_is_valid(schema: Any) -> bool:
    try:
        _schema(_document_operand("graphql.schema_is_valid", schema, 1, schema=True))
    except (_Invalid, BuiltinError) as exc:
        if isinstance(exc, Refusal):
            raise
        return False
    return True
