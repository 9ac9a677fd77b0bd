"""OutputArguments: `f(x, out)` standing as a statement, for a builtin regokite adds in Python, as
`out = f(x)`.

OPA unifies the result with the extra operand; regorus passes an extension
every operand (and finds `out` unsafe).
"""

from __future__ import annotations

from regokite.engine.extensions import arities
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, flat, trimmed
from regokite.engine.rewrite.tree import body, call_span, extent, fcn_name, kind, statements


def rewrite(target: Target) -> list[Change]:
    parsed = target.parsed()
    if parsed is None:
        return []
    source, module = parsed.source, target.module
    known = arities()
    changes = []
    for statement in statements(parsed.tree):
        literal = statement["literal"]
        call = (
            body(body(literal)["expr"]) if kind(literal) == "Expr" and kind(body(literal)["expr"]) == "Call" else None
        )
        if call is None or known.get(fcn_name(call) or "") != len(call["params"]) - 1 or not call["params"]:
            continue
        output = trimmed(source, **extent(call["params"][-1]))
        before = trimmed(source, **extent(call["params"][-2])) if len(call["params"]) > 1 else None
        start, end = call_span(call)
        cut = before[1] if before else source.find(b"(", start) + 1
        changes += [
            Change(start, start, flat(module, source, *output) + b" = "),
            Change(cut, end - 1, b"\n" * source[cut : end - 1].count(b"\n")),  # lines kept
        ]
    return changes
