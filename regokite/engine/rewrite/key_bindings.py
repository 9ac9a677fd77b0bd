"""KeyBindings: `x = coll[x]` (a variable bound by the key it indexes), the reference bound first.

OPA unifies `container = containers[container]` by iterating the keys of
`containers`, binding `container`, and comparing; regorus finds the variable
unsafe, or, declared by `some`, answers nothing. Each unification (`=`)
whose one side holds a variable that indexes a reference on the other
becomes `__rkN__ = <reference>; <other side> = __rkN__` (with the
statement's `with`s on both), which regorus evaluates as OPA.
"""

from __future__ import annotations

import re

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, flat, trimmed
from regokite.engine.rewrite.helpers import first_free
from regokite.engine.rewrite.tree import REFS, Node, Parsed, body, end_of, extent, kind, queries, tagged

UNIFIES = re.compile(r"(?<![=:!<>])=(?!=)")  # `=`, not `==`, `:=`, `!=`, `<=`, `>=`


def rewrite(target: Target, tree: Parsed) -> list[Change]:
    source = tree.source
    counter = first_free(source)
    changes: list[Change] = []
    for query in queries(tree.tree):
        braced = source[query["span"]["start"] : query["span"]["start"] + 1] in (b"{", b"|")
        for statement in query["stmts"]:
            literal = statement["literal"]
            expr = body(literal).get("expr") if kind(literal) == "Expr" else None
            if expr is None or kind(expr) != "AssignExpr" or body(expr)["op"] != "Eq":
                continue
            sides = (body(expr)["lhs"], body(expr)["rhs"])
            for ref, other in (sides, sides[::-1]):
                if kind(ref) in REFS and _index_vars(ref) & _vars(other):
                    changes += _split(target, statement, ref, f"__rk{counter}__".encode(), braced)
                    counter += 1
                    break
    return changes


def _split(target: Target, statement: Node, ref: Node, name: bytes, braced: bool) -> list[Change]:
    source = target.source
    withs = b"".join(b" " + flat(source, w["span"]["start"], end_of(w)) for w in statement.get("with_mods", []))
    start, end = statement["span"]["start"], end_of(statement)
    reference = trimmed(source, **extent(ref))
    text = flat(source, *reference)
    changes = [
        Change(start, start, (b"" if braced else b"{ ") + name + b" = " + text + withs + b"; "),
        Change(*reference, name),
    ]
    if not braced:
        changes.append(Change(end, end, b" }"))
    return changes


def _index_vars(ref: Node) -> set[str]:
    """The variables a reference's brackets hold (`c` of `cs[c].name`)."""
    found = set()
    while kind(ref) in REFS:
        node = body(ref)
        if kind(ref) == "RefBrack":
            found |= _vars(node["index"])
        ref = node["refr"]
    return found


def _vars(term: Node) -> set[str]:
    return {node["value"] for node_kind, node in tagged(term) if node_kind == "Var" and node["value"] != "_"}
