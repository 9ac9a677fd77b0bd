"""LenientCalls: builtin calls that erred made undefined there, as OPA evaluates without strict builtin errors.

The serving paths and `regokite test` pass the locations where builtins erred
(as the files were written): `b(x, y)` written there becomes
`__regokite_lenient("b", [x, y], "FILE:LINE:COL")[0]`, undefined where the
builtin errs; the third operand is the call's place as written, for the log
and the counter of the errors made undefined to name. In a
helper placed at one of those locations, whose every line is located there,
only the calls that answer for the builtin do (the helper's guards, such as
`is_string(a0)`, could receive values Python cannot hold).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from regokite.engine.extensions import INTERNAL
from regokite.engine.extensions.internal import LENIENT
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change, Columns, engine_name, masked, position, trimmed
from regokite.engine.rewrite.routes import route_name
from regokite.engine.rewrite.sprintf import written_here
from regokite.engine.rewrite.tree import Node, Parsed, call_span, calls, extent, fcn_name, rule_name, span
from regokite.errors import Location

# calls whose errors stay errors: regokite's refusals to answer otherwise than OPA, and what regorus must see
_NEVER = frozenset({LENIENT, "print", "http.send"} | {n for n, b in INTERNAL.items() if b.errors == "always"})
_ANSWERING = frozenset(n for n, b in INTERNAL.items() if b.errors == "builtin")
# builtins whose only errors are of their operand's type: made lenient in Rego, by indexing the operand by
# its type (undefined for any other), not through Python, which cannot receive every value (a set of objects)
_TYPE_ERRORS_ONLY = {
    "count": ("array", "object", "set", "string"),
    "sort": ("array", "set"),
    "min": ("array", "set"),
    "max": ("array", "set"),
}


def rewrite(run: Pass) -> Changes:
    at, back = run.options.lenient, run.columns
    parsed = run.parsed()
    rules: dict[tuple[str, ...], set[str]] = {}
    for _, tree in parsed:
        rules.setdefault(tree.package, set()).update(tree.rule_names())
    for target, tree in parsed:
        if target.identity not in run.pending:
            continue
        functions = rules[tree.package] | tree.aliases() | tree.import_names()
        wanted = {(loc.line, loc.col) for loc in at if loc.file == engine_name(target.module)}
        if wanted:  # no call of this module erred: nothing to walk
            yield target.identity, _changes(tree, functions, wanted, back)


def _changes(tree: Parsed, functions: set[str], wanted: set[tuple[int, int]], back: Columns) -> list[Change]:
    source = tree.source
    changes = []
    for rule in tree.rules:
        placed = helpers.PLACED.fullmatch(rule_name(rule))
        for call in calls(rule):
            name = fcn_name(call)
            if name is None or name.split(".")[0] in functions | {"data"}:
                continue  # a function of the bundle: its own calls are made lenient where they err
            if name in _NEVER:
                continue
            if placed and not _payload(placed["kind"], name, source, call):
                continue
            place = _erred(tree, call, wanted, back)
            if place is None:
                continue
            if placed and name in _TYPE_ERRORS_ONLY and len(call["params"]) == 1:
                changes += _typed_call(source, call, _TYPE_ERRORS_ONLY[name])
            else:
                changes += _lenient_call(source, call, place)
    return changes


def _typed_call(source: bytes, call: Node, types: Sequence[str]) -> list[Change]:
    """`count(a0)` as `count({"array": a0, ...}[type_name(a0)])`: undefined where count would fail."""
    start, end = trimmed(source, **extent(call["params"][0]))
    operand = source[start:end]
    typed = b"{" + b", ".join(b'"' + t.encode() + b'": ' + operand for t in types) + b"}"
    return [Change(start, end, typed + b"[type_name(" + operand + b")]")]


def _payload(kind: str, name: str, source: bytes, call: Node) -> bool:
    """Whether a call in a placed helper of `kind` can fail as the builtin it answers for (the others are
    its guards, such as `is_string(a0)`, which made lenient could receive values Python cannot hold)."""
    if name in _ANSWERING:
        return True
    return kind == route_name(name) and not written_here(source, call)


def _erred(tree: Parsed, call: Node, wanted: set[tuple[int, int]], back: Columns) -> Location | None:
    """The call's place as written, where an error was located (as the file was written) within its extent."""
    start, end = call_span(call)
    name = engine_name(tree.module)
    first = back.original(Location(name, *position(tree.source, start)))
    last = back.original(Location(name, *position(tree.source, end)))
    # regorus places a builtin's error at the call or at the operand it refused: every call around that
    # place is made lenient (one that does not err answers as before)
    if first is None or last is None:
        return None
    return first if any((first.line, first.col) <= place <= (last.line, last.col) for place in wanted) else None


def _lenient_call(source: bytes, call: Node, place: Location) -> list[Change]:
    start, end = call_span(call)
    paren = masked(source).find(b"(", span(call["fcn"])["end"])
    name = source[start:paren].strip()
    return [
        Change(start, paren + 1, LENIENT.encode() + b'("' + name + b'", ['),
        Change(end - 1, end, b"], " + json.dumps(str(place)).encode() + b")[0]"),
    ]
