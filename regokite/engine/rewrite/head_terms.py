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
        bodies = spec["bodies"]
        if any(b["is_else"] for b in bodies[:1]) or not all(b["is_else"] for b in bodies[1:]):
            continue  # several bodies not chained by `else` (SplitBodies made them rules of their own)
        branches = [(0, _head_terms(spec["head"], bool(bodies), len(bodies) > 1))]
        branches += [(i, [b["assign"]["value"]] if b["assign"] else []) for i, b in enumerate(bodies) if i]
        branches = [(i, [t for t in terms if _may_be_undefined(t)]) for i, terms in branches]
        terms = [t for _, found in branches for t in found]
        if not terms or any(_lines_of_comprehension(source, term) for term in terms):
            continue  # a multi-line comprehension: its statements end at line ends, which flat text joins
        for index, found in branches:
            bound = []
            for term in found:
                start, end = _term_span(source, term)
                name = f"__rk{counter}__".encode()
                counter += 1
                text = flat(source, start, end)
                changes.append(Change(start, end, name + b"\n" * source.count(b"\n", start, end)))
                bound.append((name + b" := " + text, position(source, start), end))
            if bound:
                changes += _bodies(target, spec, index, bound)
    return changes


def _head_terms(head: Node, has_body: bool, chained: bool) -> list[Node]:
    """The terms of a head that take a value per answer of the body: a set's member, an object's key and value
    (at any depth of the rule's reference), a complete rule's value where a body gives it answers (without one,
    its one value is the rule's), a function's value where an `else` follows (regorus leaves out only the
    answer, as OPA, where none does; OPA goes on to the `else`)."""
    head_kind, contents = next(iter(head.items()))
    if head_kind == "Set":
        return [contents["key"]] if contents.get("key") is not None else []
    refr, assign = contents.get("refr"), contents.get("assign")
    value = [assign["value"]] if assign else []
    if head_kind == "Func":
        return value if chained else []
    if head_kind != "Compr" or refr is None:
        return []
    keys = []
    while kind(refr) in ("RefBrack", "RefDot"):
        if kind(refr) == "RefBrack":
            keys.append(body(refr)["index"])
        refr = body(refr)["refr"]
    if kind(refr) != "Var":
        return []
    if keys:  # `p[k] := v`, `a.b[k] := v`, `a[k].c[j] := v`
        return [*reversed(keys), *value]
    return value if has_body else []  # a complete rule, `r := v` or `a.b := v`


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


def _bodies(target: Target, spec: Node, index: int, bound: list[tuple[bytes, tuple[int, int], int]]) -> list[Change]:
    """The statements binding the moved terms, at the end of body `index` (an `if` one where there is none)."""
    source = target.source
    keyword = b" {" if target.module.v0 else b" if {"
    chain = spec["bodies"]
    if not chain or (index and chain[index]["query"]["span"]["start"] == chain[index]["query"]["span"]["end"]):
        if chain:  # `else := v`: after its value
            at = bound[-1][2]
        else:
            at = spec["head"][next(iter(spec["head"]))]["span"]["end"]
            at = trimmed(source, spec["span"]["start"], max(at, spec["span"]["end"]))[1]
        statements = b"; ".join(statement for statement, _, _ in bound)
        return [Change(at, at, keyword + b" " + statements + b" }", bound[0][1])]
    query = chain[index]["query"]
    start = min(query["span"]["start"], extent(query)["start"] or query["span"]["start"])  # `if "a" in x`
    if source[start : start + 4] == b"else":  # v0's `else = v { ... }`: the span starts at the keyword
        rest = source[bound[-1][2] :]
        start = bound[-1][2] + len(rest) - len(rest.lstrip())
    if source[start : start + 1] != b"{":  # `if expr`: braced, the statements after it
        end = trimmed(source, start, end_of(query))[1]  # `if c := "c"`: its quote
        statements = b"; ".join(statement for statement, _, _ in bound)
        opening = Change(start, start, b"{ ")
        return [opening, Change(end, end, b"; " + statements + b" }", bound[0][1])]
    closing = query["span"]["end"] - 1
    code = masked(source)
    line_start = code.rfind(b"\n", 0, closing) + 1
    alone = not code[line_start:closing].strip()  # the closing brace on a line of its own: no `;` needed
    changes = []
    for i, (statement, place, _) in enumerate(bound):
        separator = b"" if alone and i == 0 else b"; "
        changes.append(Change(closing, closing, separator + statement + (b" " if alone else b""), place))
    return changes
