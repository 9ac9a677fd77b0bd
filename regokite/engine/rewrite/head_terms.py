"""HeadTerms: a partial set's member, or a partial object's key or value, that may be undefined, bound in the body.

regorus drops every value of a rule's definition when its head term is
undefined for one of the body's answers (`x contains o.name if { some o in
input }`, one object without a name: regorus `set()`, OPA the other names);
OPA leaves only that answer out. So does a call in the head that OPA's default
evaluation makes undefined (rewrite.lenient). The term moves to the end of
the body, `x contains __rkN__ if { some o in input; __rkN__ := o.name }`
(a body added where there is none), its errors located at the term as written.
A term of variables and constants is always defined and stays.
"""

from __future__ import annotations

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, flat, masked, offset, position, trimmed
from regokite.engine.rewrite.helpers import first_free
from regokite.engine.rewrite.tree import CALLS, REFS, Node, Parsed, appended, body, extent, kind, tagged


def rewrite(target: Target, tree: Parsed) -> list[Change]:
    source, counter = tree.source, first_free(tree.source)
    changes: list[Change] = []
    for rule in tree.rules:
        if kind(rule) != "Spec" or appended(rule):
            continue
        spec = body(rule)
        terms = [t for t in _head_terms(spec["head"]) if _may_be_undefined(t)]
        if not terms or len(spec["bodies"]) > 1 or any(b["is_else"] for b in spec["bodies"]):
            continue
        bound = []
        for term in terms:
            start, end = _term_span(source, term)
            name = f"__rk{counter}__".encode()
            counter += 1
            text = flat(target.module, source, start, end)
            changes.append(Change(start, end, name + b"\n" * source.count(b"\n", start, end)))
            bound.append((name + b" := " + text, position(source, start)))
        changes += _bodies(target, spec, bound)
    return changes


def _head_terms(head: Node) -> list[Node]:
    """The terms of a head that take a value per answer of the body: a set's member, an object's key and value."""
    head_kind, contents = next(iter(head.items()))
    if head_kind == "Set":
        return [contents["key"]] if contents.get("key") is not None else []
    refr = contents.get("refr")
    if head_kind != "Compr" or refr is None or kind(refr) != "RefBrack" or kind(body(refr)["refr"]) != "Var":
        return []  # a complete rule, a function, a rule of a longer reference
    assign = contents.get("assign")
    return [body(refr)["index"], *([assign["value"]] if assign else [])]


def _term_span(source: bytes, term: Node) -> tuple[int, int]:
    """Where a head term's text is: regorus's span of an object starts at its last key (its line and column
    are its brace's), and a closing bracket may be left out (edits.trimmed)."""
    outer, whole = body(term)["span"], extent(term)
    start = min(offset(source, outer["line"], outer["col"]) or whole["start"], whole["start"])
    return trimmed(source, start, whole["end"])


def _may_be_undefined(term: Node) -> bool:
    return any(node_kind in REFS or node_kind in CALLS for node_kind, _ in tagged({"term": term}))


def _bodies(target: Target, spec: Node, bound: list[tuple[bytes, tuple[int, int]]]) -> list[Change]:
    """The statements binding the moved terms, at the end of the body (one where there is none)."""
    source = target.source
    changes = []
    if not spec["bodies"]:
        at = spec["head"][next(iter(spec["head"]))]["span"]["end"]
        at = trimmed(source, spec["span"]["start"], max(at, spec["span"]["end"]))[1]
        keyword = b" {" if target.module.v0 else b" if {"
        for i, (statement, place) in enumerate(bound):
            text = (keyword + b" " if i == 0 else b"; ") + statement + (b" }" if i == len(bound) - 1 else b"")
            changes.append(Change(at, at, text, place))
        return changes
    query = spec["bodies"][0]["query"]["span"]
    if source[query["start"] : query["start"] + 1] != b"{":  # `if expr`: braced, the statements after it
        end = trimmed(source, query["start"], query["end"])[1]
        statements = b"; ".join(statement for statement, _ in bound)
        opening = Change(query["start"], query["start"], b"{ ")
        return [opening, Change(end, end, b"; " + statements + b" }", bound[0][1])]
    closing = query["end"] - 1
    code = masked(source)
    line_start = code.rfind(b"\n", 0, closing) + 1
    alone = not code[line_start:closing].strip()  # the closing brace on a line of its own: no `;` needed
    for i, (statement, place) in enumerate(bound):
        separator = b"" if alone and i == 0 else b"; "
        changes.append(Change(closing, closing, separator + statement + (b" " if alone else b""), place))
    return changes
