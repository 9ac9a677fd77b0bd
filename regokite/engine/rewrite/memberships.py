"""Memberships: `a in c` as a value (not a statement of its own) through a helper, undefined where an operand is.

`x := a in c` with `c` undefined is undefined in OPA (a call of
internal.member_2) and false in regorus; the helper (rego/value.rego:
`x := a in c` in a body) is undefined there too.
"""

from __future__ import annotations

import re

from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, grouped, masked, operand_extent
from regokite.engine.rewrite.tree import Parsed, body, kind, statements, tagged

IN = re.compile(r"\bin\b")


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source, tag = parsed.source, target.tag
    standing = {
        id(body(body(s["literal"])["expr"]))
        for s in statements(parsed.tree)
        if kind(s["literal"]) in ("Expr", "NotExpr")
    }
    code = masked(source)
    changes: list[Change] = []
    taken: list[tuple[int, int]] = []
    arities_used: set[int] = set()
    for rule in parsed.written_rules():
        for node_kind, node in tagged(rule):
            if node_kind != "Membership" or id(node) in standing:
                continue
            operands = [t for t in (node.get("key"), node["value"], node["collection"]) if t]
            first = operand_extent(source, operands[0])
            last = operand_extent(source, operands[-1])
            keyword = code.rfind(b" in ", first[1], last[0])
            if keyword < 0:
                continue
            start, end = grouped(code, first[0], keyword, keyword + 4, last[1])
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            arities_used.add(len(operands))
            changes += [
                Change(start, start, f"__rk_in{len(operands)}_{tag}(".encode()),
                Change(keyword, keyword + 4, b", "),
                Change(end, end, b")"),
            ]
    text = ""
    for n in sorted(arities_used):
        name = f"__rk_in{n}_{tag}"
        if f"{name}(".encode() in source:
            continue
        member = "k, v in c" if n == 3 else "v in c"
        text += helpers.rego(
            "value", target.module.v0, name=name, operands="k, v, c" if n == 3 else "v, c", value=member
        )
    if text:
        changes.append(helpers.appended(source, text))
    return changes
