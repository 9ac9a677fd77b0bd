"""HeadTerms: a head term that may be undefined (a partial set's member, a partial object's key or value, a
complete rule's value) bound in the body.

regorus drops every value of a rule's definition when its head term is
undefined for one of the body's answers (`x contains o.name if { some o in
input }`, one object without a name: regorus `set()`, OPA the other names;
`r := o.name if { some o in input }`: regorus undefined, OPA the one name);
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
from regokite.engine.rewrite.tree import (
    CALLS,
    COMPREHENSIONS,
    REFS,
    Node,
    Parsed,
    appended,
    body,
    end_of,
    extent,
    kind,
    tagged,
)


def rewrite(target: Target, tree: Parsed) -> list[Change]:
    source, counter = tree.source, first_free(tree.source)
    changes: list[Change] = []
    for rule in tree.rules:
        if kind(rule) != "Spec" or appended(rule):
            continue
        spec = body(rule)
        terms = [t for t in _head_terms(spec["head"], bool(spec["bodies"])) if _may_be_undefined(t)]
        if not terms or len(spec["bodies"]) > 1 or any(b["is_else"] for b in spec["bodies"]):
            continue
        if any(_lines_of_comprehension(source, term) for term in terms):
            continue  # its statements end at line ends, which flat text joins: the term stays
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


def _head_terms(head: Node, has_body: bool) -> list[Node]:
    """The terms of a head that take a value per answer of the body: a set's member, an object's key and value,
    a complete rule's value where a body gives it answers (without one, its one value is the rule's)."""
    head_kind, contents = next(iter(head.items()))
    if head_kind == "Set":
        return [contents["key"]] if contents.get("key") is not None else []
    refr, assign = contents.get("refr"), contents.get("assign")
    if head_kind != "Compr" or refr is None:
        return []  # a function: regorus leaves out an answer whose value is undefined, as OPA does
    if kind(refr) == "RefBrack" and kind(body(refr)["refr"]) == "Var":
        return [body(refr)["index"], *([assign["value"]] if assign else [])]
    if assign and has_body and _dotted(refr):  # a complete rule, `r := v` or `a.b := v`
        return [assign["value"]]
    return []  # a rule of a longer reference with a variable in it


def _dotted(refr: Node) -> bool:
    while kind(refr) == "RefDot":
        refr = body(refr)["refr"]
    return kind(refr) == "Var"


def _term_span(source: bytes, term: Node) -> tuple[int, int]:
    """Where a head term's text is: regorus's span of an object starts at its last key (its line and column
    are its brace's), and a closing bracket may be left out (edits.trimmed)."""
    outer, whole = body(term)["span"], extent(term)
    start = min(offset(source, outer["line"], outer["col"]) or whole["start"], whole["start"])
    return trimmed(source, start, whole["end"])


def _lines_of_comprehension(source: bytes, term: Node) -> bool:
    start, end = _term_span(source, term)
    return b"\n" in source[start:end] and any(node_kind in COMPREHENSIONS for node_kind, _ in tagged({"term": term}))


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
    start = min(query["start"], extent(spec["bodies"][0]["query"])["start"] or query["start"])  # `if "a" in x`
    if source[start : start + 1] != b"{":  # `if expr`: braced, the statements after it
        end = trimmed(source, start, end_of(spec["bodies"][0]["query"]))[1]  # `if c := "c"`: its quote
        statements = b"; ".join(statement for statement, _ in bound)
        opening = Change(start, start, b"{ ")
        return [opening, Change(end, end, b"; " + statements + b" }", bound[0][1])]
    closing = query["end"] - 1
    code = masked(source)
    line_start = code.rfind(b"\n", 0, closing) + 1
    alone = not code[line_start:closing].strip()  # the closing brace on a line of its own: no `;` needed
    for i, (statement, place) in enumerate(bound):
        separator = b"" if alone and i == 0 else b"; "
        changes.append(Change(closing, closing, separator + statement + (b" " if alone else b""), place))
    return changes
