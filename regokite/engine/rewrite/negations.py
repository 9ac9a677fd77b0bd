"""Negations: `not E` with E's operands bound before the negation, as OPA's compiler binds them.

OPA's compiler binds E's references, nested calls and composite operands to
variables before the negation, so `not f(input.missing)` is undefined there;
regorus evaluates them inside it and answers true. The same bindings are
written before the `not`, in OPA's order: `__rk0__ := input.missing; not
f(__rk0__)`. An operand spanning lines is bound on the `not`'s line, its
newlines after the statement (lines are kept). A module importing
`future.keywords.not` (or `future.keywords`) keeps OPA 1.x's newer `not`,
which negates the whole expression, nested calls included: regorus's own
reading, so nothing is bound there.
"""

from __future__ import annotations

from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change, flat, one_line, trimmed
from regokite.engine.rewrite.helpers import first_free
from regokite.engine.rewrite.tree import (
    CALLS,
    COMPREHENSIONS,
    REFS,
    Node,
    Parsed,
    body,
    call_operands,
    end_of,
    extent,
    kind,
    queries,
)


def rewrite(run: Pass) -> Changes:
    """Each module's bindings before its negations, for those whose operands OPA evaluates first."""
    parsed = run.parsed()
    rules: dict[tuple[str, ...], set[str]] = {}
    for _, tree in parsed:
        rules.setdefault(tree.package, set()).update(tree.rule_names())
    for target, tree in parsed:
        if target.identity not in run.pending or tree.keeps_negations():
            continue
        refs = rules[tree.package] | tree.import_names() | tree.aliases() | {"input", "data"}
        changes = _changes(tree, refs)
        if changes:
            yield target.identity, changes


def _changes(tree: Parsed, refs: set[str]) -> list[Change]:
    source = tree.source
    found = []  # (statement, negation, hoisted spans, whether its query has braces)
    for query in queries(tree.tree):
        braced = source[query["span"]["start"] : query["span"]["start"] + 1] in (b"{", b"|")
        for statement in query["stmts"]:
            literal = statement["literal"]
            hoisted = _hoisted(body(literal)["expr"], refs) if kind(literal) == "NotExpr" else []
            if hoisted:
                found.append((statement, body(literal), hoisted, braced))
    starts = [statement["span"]["start"] for statement, *_ in found]
    counter = first_free(source)
    changes: list[Change] = []
    for statement, negation, hoisted, braced in found:
        if any(span["start"] <= at < span["end"] for span in hoisted for at in starts):
            continue  # a negation to bind inside an operand (a comprehension's): that one first, next round
        made, counter = _bind(tree, statement, negation, hoisted, counter, braced)
        changes += made
    return changes


def _bind(
    tree: Parsed, statement: Node, negation: Node, hoisted: list[dict[str, int]], counter: int, braced: bool
) -> tuple[list[Change], int]:
    """The bindings before `not`, and each outermost operand replaced by its variable."""
    source = tree.source
    withs = b"".join(b" " + flat(source, w["span"]["start"], end_of(w)) for w in statement.get("with_mods", []))
    names: dict[tuple[int, int], bytes] = {}
    bindings = []
    for span in hoisted:
        start, end = trimmed(source, span["start"], span["end"])
        inner = sorted((s, e, n) for (s, e), n in names.items() if start <= s and e <= end)
        text, at = b"", start
        for s, e, name in inner:
            if s >= at:
                text += source[at:s] + name
                at = e
        text += source[at:end]
        names[(start, end)] = f"__rk{counter}__".encode()
        bindings.append(names[(start, end)] + b" := (" + one_line(text) + b")" + withs + b"; ")
        counter += 1
    at = negation["span"]["start"]
    opening = b"" if braced else b"{ "
    changes = [Change(at, at, opening + b"".join(bindings))]
    outermost = [
        (s, e) for (s, e) in names if not any(s2 <= s and e <= e2 and (s2, e2) != (s, e) for (s2, e2) in names)
    ]
    changes += [Change(s, e, names[(s, e)]) for s, e in outermost]
    newlines = b"\n" * sum(source[s:e].count(b"\n") for s, e in outermost)  # the lines the operands took
    end = end_of(statement)
    changes.append(Change(end, end, newlines + (b"" if braced else b" }")))
    return changes, counter


def _hoisted(expr: Node, refs: set[str]) -> list[dict[str, int]]:
    """Spans of the operands OPA evaluates before negating `expr`, in its order.

    OPA's compiler first moves nested calls (operators included) out of the
    expression, then every reference and composite holding one in an operand
    position (`==` and `=` compare references in place, indexing only).
    """
    calls: list[dict[str, int]] = []
    dynamic: list[dict[str, int]] = []
    expr_kind, node = kind(expr), body(expr)
    if expr_kind == "AssignExpr" or (expr_kind == "BoolExpr" and node["op"] == "Eq"):
        for side in (node["lhs"], node["rhs"]):
            _in_place(side, refs, calls, dynamic)
    elif expr_kind in CALLS:
        for operand in call_operands(expr_kind, node):
            _operand(operand, refs, calls, dynamic)
    else:
        _in_place(expr, refs, calls, dynamic)
    return calls + dynamic


def _in_place(term: Node, refs: set[str], calls: list, dynamic: list) -> None:
    """A term compared in place: only what its reference's brackets hold is evaluated first."""
    term_kind, node = kind(term), body(term)
    if term_kind in REFS:
        _indexes(node, refs, calls, dynamic)
    elif term_kind in CALLS:
        calls.append(extent(term))
    elif term_kind not in COMPREHENSIONS and term_kind != "Var":
        _operand(term, refs, calls, dynamic)


def _indexes(node: Node, refs: set[str], calls: list, dynamic: list) -> None:
    head_kind = kind(node["refr"])
    if head_kind in REFS:
        _indexes(body(node["refr"]), refs, calls, dynamic)
    elif head_kind in CALLS:
        calls.append(extent(node["refr"]))
    if "index" in node:
        _operand(node["index"], refs, calls, dynamic)


def _operand(term: Node, refs: set[str], calls: list, dynamic: list) -> None:
    """A term in an operand position: nested calls, references and comprehensions are bound first."""
    term_kind, node = kind(term), body(term)
    if term_kind in CALLS:
        calls.append(extent(term))
    elif term_kind in REFS:
        _indexes(node, refs, calls, dynamic)
        dynamic.append(extent(term))
    elif term_kind == "Var":
        if node["value"] in refs:
            dynamic.append(extent(term))
    elif term_kind in COMPREHENSIONS:
        dynamic.append(extent(term))
    elif term_kind in ("Array", "Set"):
        for item in node["items"]:
            _operand(item, refs, calls, dynamic)
    elif term_kind == "Object":
        for _, key, value in node["fields"]:
            _operand(key, refs, calls, dynamic)
            _operand(value, refs, calls, dynamic)
