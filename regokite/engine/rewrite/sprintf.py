"""Sprintf: each `sprintf(f, args)` as a call of regokite's, which formats as Go's `fmt` (internal.SPRINTF).

Python cannot receive every Rego value (a set of objects), and OPA hands Go
anything but a number or a string as its text anyway: so the call gets
`args` with each such value written by regorus's `%v` (which writes values
as OPA does), and whether `args` was an array (else OPA's error).
"""

from __future__ import annotations

import re

from regokite.engine.extensions.internal import SPRINTF
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, flat
from regokite.engine.rewrite.helpers import first_free, written
from regokite.engine.rewrite.tree import Node, Parsed, body, call_span, calls, kind, span


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    source, module = parsed.source, target.module
    found = [c for c in calls(parsed.tree) if _is_sprintf(c) and not written_here(source, c)]
    changes: list[Change] = []
    counter = first_free(source)
    for call in found:
        start, end = call_span(call)
        if any(start < call_span(other)[0] and call_span(other)[1] <= end for other in found if other is not call):
            continue  # a sprintf in its arguments: that one first, next round
        if len(call["params"]) != 2:
            continue  # wrong arity: left to the load's own error
        arguments = span(call["params"][1])
        fcn = span(call["fcn"])
        names = [f"__rk{counter + i}__" for i in range(5)]
        counter += 5
        value = written(names[0], names[1:])
        converted = (
            f'[object.get({{"number": {names[0]}, "string": {names[0]}}}, type_name({names[0]}), {value}) | '
            f"{names[0]} := "
        ).encode()
        text = flat(module, source, arguments["start"], arguments["end"])
        changes += [
            Change(fcn["start"], fcn["end"], SPRINTF.encode()),
            Change(arguments["start"], arguments["start"], converted),
            Change(arguments["end"], arguments["end"], b"[_]], is_array(" + text + b")"),
        ]
    return changes


def written_here(source: bytes, call: Node) -> bool:
    """The `sprintf("%v", [__rkN__])` this stage writes: regorus's own, left as it is."""
    start, end = call_span(call)
    return re.fullmatch(rb'sprintf\("%v", \[__rk\d+__\]\)', source[start:end]) is not None


def _is_sprintf(call: Node) -> bool:
    return kind(call["fcn"]) == "Var" and body(call["fcn"])["value"] == "sprintf"
