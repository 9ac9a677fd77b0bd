"""Sprintf: each `sprintf(f, args)` as a call of regokite's, which formats as Go's `fmt` (internal.SPRINTF).

Python cannot receive every Rego value (a set of objects), and OPA hands Go
anything but a number or a string as its text anyway: so the call gets
`args` with each such value written by regorus's `%v` (which writes values
as OPA does), and whether `args` was an array (else OPA's error). A helper
placed at the call (rego/sprintf_operand.rego) passes a string or a number
on as it is and writes only the rest: writing is the costly part (two `%v`
per operand), and most operands are strings or numbers.
"""

from __future__ import annotations

import re

from regokite.engine.extensions.internal import SPRINTF
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, flat
from regokite.engine.rewrite.helpers import first_free, written
from regokite.engine.rewrite.tree import Node, Parsed, body, call_span, calls, kind, span

OPERAND = "__rk_text"  # the kind of the helper handing one operand to the call (helpers.PLACED)


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source, module = parsed.source, target.module
    found = [c for c in calls(parsed.tree) if _is_sprintf(c) and not written_here(source, c)]
    changes: list[Change] = []
    counter, number = first_free(source), helpers.next_number(source)
    for call in found:
        start, end = call_span(call)
        if any(start < call_span(other)[0] and call_span(other)[1] <= end for other in found if other is not call):
            continue  # a sprintf in its arguments: that one first, next round
        if len(call["params"]) != 2:
            continue  # wrong arity: left to the load's own error
        arguments = span(call["params"][1])
        fcn = span(call["fcn"])
        operand = f"__rk{counter}__"
        counter += 1
        name = helpers.placed_name(OPERAND, target.tag, number)
        number += 1
        helper = helpers.rego(
            "sprintf_operand",
            module.v0,
            name=name,
            written=written("__rk0__", ["__rk1__", "__rk2__", "__rk3__", "__rk4__"]),
        )
        text = flat(source, arguments["start"], arguments["end"])
        changes += [
            Change(fcn["start"], fcn["end"], SPRINTF.encode()),
            Change(arguments["start"], arguments["start"], f"[{name}({operand}) | {operand} := ".encode()),
            Change(arguments["end"], arguments["end"], b"[_]], is_array(" + text + b")"),
            helpers.placed(source, helper, fcn["start"]),
        ]
    return changes


def written_here(source: bytes, call: Node) -> bool:
    """The `sprintf("%v", [__rkN__])` this stage writes: regorus's own, left as it is."""
    start, end = call_span(call)
    return re.fullmatch(rb'sprintf\("%v", \[__rk\d+__\]\)', source[start:end]) is not None


def _is_sprintf(call: Node) -> bool:
    return kind(call["fcn"]) == "Var" and body(call["fcn"])["value"] == "sprintf"
