"""Comparisons: `a < b` (and <=, >, >=) where either side may be a set or an object, through a helper.

OPA orders an object before a set, regorus a set before an object; otherwise
they agree. Each such comparison becomes a call of a helper placed at it
(rego/compare.rego) that orders them as OPA, and fails (internal.UNORDERED)
where a set and an object meet inside values of one type (`[{1}] <
[{"a": 1}]`). A side that is a number, a string or a count is compared in
place (the orders agree there).
"""

from __future__ import annotations

from collections.abc import Iterator

from regokite.engine.extensions.internal import UNORDERED
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, infix_operands, masked, trimmed
from regokite.engine.rewrite.tree import Node, Parsed, body, extent, kind, tagged

_ORDERED = {"Lt": "lt", "Le": "le", "Gt": "gt", "Ge": "ge"}
_SIGNS = {"lt": ("<", "is_object"), "le": ("<=", "is_object"), "gt": (">", "is_set"), "ge": (">=", "is_set")}
_SCALAR_TERMS = frozenset({"Number", "String", "RawString", "Bool", "Null", "ArithExpr"})
_SCALAR_CALLS = frozenset(
    {"count", "__rk_b_count", "sum", "product", "abs", "round", "ceil", "floor", "to_number", "indexof"}
)


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source, tag = parsed.source, target.tag
    found = []
    for rule in parsed.written_rules():
        found += [n for n in _bool_exprs(rule) if n["op"] in _ORDERED and not _plainly_scalar(n)]
    extents = [trimmed(source, **extent({"BoolExpr": n})) for n in found]
    code = masked(source)
    changes: list[Change] = []
    taken: list[tuple[int, int]] = []
    number = helpers.next_number(source)
    for node, (start, end) in zip(found, extents, strict=True):
        if any(start <= s and e <= end and (s, e) != (start, end) for s, e in extents):
            continue  # a comparison inside it: that one first, next round
        op = _ORDERED[node["op"]]
        sign_text, first_of = _SIGNS[op]
        first, sign, last = infix_operands(
            target.module,
            source,
            code,
            node,
            sign_text,
            "a comparison whose sides may be a set and an object, which the embedded engine orders "
            "otherwise than OPA, could not be rewritten here: compare values of known types, or use "
            "--engine opa",
        )
        if any(first < e and s < last for s, e in taken):
            continue  # sharing text with another rewritten here: next round
        taken.append((first, last))
        name = helpers.placed_name(f"__rk_{op}", tag, number)
        number += 1
        helper = helpers.rego(
            "compare", target.module.v0, name=name, tag=tag, sign=sign_text, first=first_of, unordered=UNORDERED
        )
        changes += [
            Change(first, first, f"{name}(".encode()),
            Change(sign, sign + len(sign_text), b","),
            Change(last, last, b")"),
            helpers.placed(source, helper, sign),
        ]
    if changes and f"__rk_swapped_{tag}(a, b)".encode() not in source:
        changes.append(helpers.appended(source, helpers.rego("compare_helpers", target.module.v0, tag=tag)))
    return changes


def _bool_exprs(node: Node) -> Iterator[Node]:
    for node_kind, value in tagged(node):
        if node_kind == "BoolExpr":
            yield value


def _plainly_scalar(node: Node) -> bool:
    for side in (node["lhs"], node["rhs"]):
        side_kind = kind(side)
        if side_kind in _SCALAR_TERMS:
            return True
        if side_kind == "Call" and helpers.called(body(side)) in _SCALAR_CALLS:
            return True
    return False
