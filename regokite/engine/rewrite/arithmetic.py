"""Arithmetic: `a + b` (and -, *, /) through a helper that answers as OPA where regorus's doubles would not.

regorus computes in 64-bit doubles, OPA on its numbers' decimals. Each
operator becomes a call of a helper placed at it (rego/arithmetic.rego):
integers below 2^53 (both operands and the result; a quotient an integer)
answer in place, anything else goes to internal.ARITH, which answers as OPA
(`0.1 + 0.2` is 0.3) or fails (`1 / 3`). Each place gets a helper of its own,
so that an error in it (`1 / 0`) is located at the place. Sides that are
small integer literals or counts are left in place (+, -, *: exact in both).
"""

from __future__ import annotations

import re

from regokite.engine.extensions.internal import ARITH
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, infix_operands, masked, trimmed
from regokite.engine.rewrite.tree import Node, Parsed, body, extent, kind, tagged

_ARITH = {"Add": ("add", "+"), "Sub": ("sub", "-"), "Mul": ("mul", "*"), "Div": ("div", "/")}
_SMALL_CALLS = frozenset({"count", "__rk_b_count"})
_SMALL_LITERAL = re.compile(rb"-?[0-9]{1,9}")
_CHECKS = {  # in the helper's body, not a function of their own: a call costs several microseconds in regorus
    "div": "b != 0\n\tx := a / b\n\tround(x) == x",
    "other": "x := a {sign} b\n\tabs(x) < 9007199254740992",
}
SIGN = re.compile(rb"[\w)\]}]\s*[-+*/]")  # an operand's end, then an operator (strings masked)


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source = parsed.source
    code = masked(source)
    found = []
    for rule in parsed.written_rules():
        if not SIGN.search(code, body(rule)["span"]["start"], body(rule)["span"]["end"]):
            continue  # no operator in its text: no walk
        found += [n for k, n in tagged(rule) if k == "ArithExpr" and n["op"] in _ARITH and not _exact(source, n)]
    extents = [trimmed(source, **extent({"ArithExpr": n})) for n in found]
    changes: list[Change] = []
    taken: list[tuple[int, int]] = []
    number = helpers.next_number(source)
    for node, (start, end) in zip(found, extents, strict=True):
        if any(start <= s and e <= end and (s, e) != (start, end) for s, e in extents):
            continue  # arithmetic inside it: that first, next round
        op, sign = _ARITH[node["op"]]
        first, at, last = infix_operands(
            target.module,
            source,
            code,
            node,
            sign,
            "arithmetic that the embedded engine's 64-bit doubles may compute otherwise than OPA could "
            "not be rewritten here: write it on a line of its own, or use --engine opa",
        )
        if any(first < e and s < last for s, e in taken):
            continue  # sharing text with another rewritten here: next round
        taken.append((first, last))
        name = helpers.placed_name(f"__rk_ar_{op}", target.tag, number)
        number += 1
        checks = _CHECKS["div" if op == "div" else "other"].format(sign=sign)
        helper = helpers.rego("arithmetic", target.module.v0, name=name, checks=checks, sign=sign, arith=ARITH)
        changes += [
            Change(first, first, f"{name}(".encode()),
            Change(at, at + 1, b","),
            Change(last, last, b")"),
            helpers.placed(source, helper, at),
        ]
    return changes


def _exact(source: bytes, node: Node) -> bool:
    """Both sides small integers (literals below 2^30 or counts), or a side a set: exact in regorus."""
    if node["op"] == "Div":
        return False
    sides = [(kind(side), body(side)) for side in (node["lhs"], node["rhs"])]
    if any(side_kind in ("Set", "SetCompr") for side_kind, _ in sides):
        return True
    for side_kind, value in sides:
        if side_kind == "Number":
            text = source[value["span"]["start"] : value["span"]["end"]]
            if not _SMALL_LITERAL.fullmatch(text):
                return False
        elif side_kind != "Call" or helpers.called(value) not in _SMALL_CALLS:
            return False
    return True
