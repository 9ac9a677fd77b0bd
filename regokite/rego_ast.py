"""Reading regorus's AST (`Engine.get_ast_as_json`): references, rule heads, calls.

Pure functions over the parsed JSON, shared by what needs a bundle's shape
without evaluating it (outlines of packages and rules, the load-time builtin check).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def ref_parts(ref: dict[str, Any]) -> list[str]:
    """`data.a["b"].c` as ["data", "a", "b", "c"]."""
    kind, node = next(iter(ref.items()))
    if kind == "Var":
        return [node["value"]]
    if kind == "RefDot":
        return [*ref_parts(node["refr"]), node["field"][1]]
    if kind == "RefBrack":
        index_kind, index = next(iter(node["index"].items()))
        key = index["value"] if index_kind in ("String", "Var") else str(index.get("value"))
        return [*ref_parts(node["refr"]), key]
    raise ValueError(f"unexpected reference node {kind}")


def span(node: dict[str, Any]) -> dict[str, Any]:
    """The span of a tagged node (`{"Var": {"span": ...}}`)."""
    return next(iter(node.values()))["span"]


def rule_heads(ast: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(head kind, head) of every rule of a module: kind is Compr, Set, Func or Default."""
    for rule in ast.get("rules", []):
        kind, body = next(iter(rule.items()))
        if kind == "Default":
            yield "Default", body
        else:
            yield next(iter(body["head"].items()))


def objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every object of the tree below `node` (itself included), outermost first: what the readers below,
    and the rewrites of engine/, look for by their keys."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from objects(value)


def calls(node: Any) -> Iterator[dict[str, Any]]:
    """Every `Call` node (`{"fcn": ref, "params": [...]}`) below `node`, outermost first."""
    for obj in objects(node):
        call = obj.get("Call")
        if isinstance(call, dict) and "fcn" in call:
            yield call
