"""OutputArguments: `f(x, out)` standing as a statement (or negated), for a builtin a later stage rewrites,
as `out = f(x)`.

OPA unifies a builtin's result with an extra operand. regorus does so for
its own builtins, but the calls a later stage rewrites are no longer those:
an extension of regokite's gets every operand (and finds `out` unsafe), a
routed builtin's function (RouteBuiltins), sprintf (Sprintf) and an operator
called by name (InfixNames) take one operand fewer. So those calls, with one
operand more than the builtin takes, become `out = f(x)` first, as OPA reads
them (`not count(xs, 3)` is `not 3 = count(xs)`).
"""

from __future__ import annotations

from regokite.engine.extensions import arities
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, flat, masked, trimmed
from regokite.engine.rewrite.infix import INFIX, MEMBERS
from regokite.engine.rewrite.metadata import CALLS as METADATA
from regokite.engine.rewrite.routes import ROUTED
from regokite.engine.rewrite.tree import Parsed, body, call_span, extent, fcn_name, kind, statements

_REWRITTEN = {"sprintf": 2, **ROUTED, **dict.fromkeys(INFIX, 2), **MEMBERS, **dict.fromkeys(METADATA, 0)}


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source = parsed.source
    known = arities() | _REWRITTEN
    local = parsed.rule_names() | parsed.import_names() | parsed.aliases()
    code = None
    changes = []
    for statement in statements(parsed.tree):
        literal = statement["literal"]
        if kind(literal) not in ("Expr", "NotExpr") or kind(body(literal)["expr"]) != "Call":
            continue
        call = body(body(literal)["expr"])
        name = fcn_name(call) or ""
        if known.get(name) != len(call["params"]) - 1 or name.split(".")[0] in local:
            continue
        output = trimmed(source, **extent(call["params"][-1]))
        start, end = call_span(call)
        # the operands end at the last comma before the output (an object literal's span leaves out its brace)
        code = masked(source) if code is None else code
        cut = code.rfind(b",", start, output[0]) if len(call["params"]) > 1 else code.find(b"(", start) + 1
        changes += [
            Change(start, start, flat(source, *output) + b" = "),
            Change(cut, end - 1, b"\n" * source[cut : end - 1].count(b"\n")),  # lines kept
        ]
    return changes
