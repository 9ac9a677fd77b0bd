"""InfixNames: an operator called by its builtin's name (`plus(a, b)`, `lt(a, b)`) written as the operator.

OPA's operators are builtins with names (plus, minus, mul, div, rem, and,
or, equal, neq, lt, lte, gt, gte, internal.member_2/3) that a policy may
call by name; regorus knows only the operators ("unknown function"). Each
such call becomes the parenthesised operator, its operands left in place,
so that the arithmetic and comparison stages after it read it as written
with the operator (the output-operand form, `plus(a, b, c)`, is made `c =
plus(a, b)` by OutputArguments before).
"""

from __future__ import annotations

import re

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, trimmed
from regokite.engine.rewrite.tree import Parsed, call_span, calls, extent, fcn_name

INFIX = {
    "plus": "+",
    "minus": "-",
    "mul": "*",
    "div": "/",
    "rem": "%",
    "and": "&",
    "or": "|",
    "equal": "==",
    "neq": "!=",
    "lt": "<",
    "lte": "<=",
    "gt": ">",
    "gte": ">=",
}
MEMBERS = {"internal.member_2": 2, "internal.member_3": 3}  # `in`: a keyword of v1 (of v0 with its import)
CALLED = re.compile(r"\b(?:" + "|".join(re.escape(n) for n in (*INFIX, *MEMBERS)) + r")\s*\(")


def rewrite(target: Target, tree: Parsed) -> list[Change]:
    local = tree.rule_names() | tree.import_names() | tree.aliases()
    changes: list[Change] = []
    for call in calls(tree.tree):
        name = fcn_name(call) or ""
        if name.split(".")[0] in local:
            continue
        if name in INFIX and len(call["params"]) == 2:
            signs = [f" {INFIX[name]} ".encode()]
        elif name in MEMBERS and len(call["params"]) == MEMBERS[name] and not target.module.v0:
            signs = [b", ", b" in "][-len(call["params"]) + 1 :]
        else:
            continue
        params = [trimmed(tree.source, **extent(p)) for p in call["params"]]
        start, end = call_span(call)
        changes.append(Change(start, params[0][0], b"("))
        changes += [Change(params[i][1], params[i + 1][0], sign) for i, sign in enumerate(signs)]
        changes.append(Change(params[-1][1], end, b")"))
    return changes
