"""SplitLines: a reference followed by `(` on the next line is two expressions, as in OPA.

OPA ends the expression at the newline and reads two; regorus reads a call.
A `;` after the reference ends it. Inside brackets OPA refuses the text, and
so does the load (capabilities.check_builtins: "followed by a parenthesised
expression on the next line").
"""

from __future__ import annotations

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, balanced, masked
from regokite.engine.rewrite.tree import calls, span, statements


def split(target: Target) -> list[Change]:
    """`;` after a reference that regorus would call with the parenthesis on the next line."""
    parsed = target.parsed()
    if parsed is None:
        return []
    code = masked(parsed.source)
    around_calls = [st["span"] for st in statements(parsed.tree)]
    changes = []
    for call in calls(parsed.tree):
        end = span(call["fcn"])["end"]
        paren = code.find(b"(", end)
        if b"\n" not in code[end:paren]:
            continue
        around = [sp for sp in around_calls if sp["start"] <= end <= sp["end"]]
        start = max((sp["start"] for sp in around), default=None)  # the innermost statement holding the call
        if start is not None and balanced(code[start:end]):
            changes.append(Change(end, end, b";"))
    return changes
