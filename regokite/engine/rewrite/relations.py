"""Relations: a relation builtin (OPA's `walk`) called for its value, in its output-operand form.

A relation has many outputs: OPA's compiler moves every call out of the
expression holding it (`pv := walk(x)` becomes `walk(x, __local0__); pv :=
__local0__`), and the output-operand form enumerates them. regorus
enumerates only that form: `walk(x)` as a value is undefined, so
`[p, v] := walk(x)`, `pv := walk(x)` and `count(walk(x))` yielded nothing.
Each such call becomes `walk(x, __rkN__)`, a statement of its own before
the statement holding it (with that statement's `with`s), and the call
`__rkN__`; in a comprehension's term, it goes at the end of the
comprehension's body. Under `not` it goes before the negation (OPA's
legacy `not`) or, where the module imports `future.keywords.not`, inside
it (`not E` as `[1 | walk(x, __rkN__); E] == []`). A relation called in a
rule's head (its value or key) is refused: bind it in the body.
"""

from __future__ import annotations

from collections.abc import Iterator

from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change, flat, refusal, trimmed
from regokite.engine.rewrite.helpers import first_free
from regokite.engine.rewrite.tree import (
    COMPREHENSIONS,
    Node,
    Parsed,
    body,
    call_span,
    calls,
    end_of,
    extent,
    fcn_name,
    kind,
    queries,
    tagged,
)

RELATIONS = {"walk": 1}  # OPA 1.20's builtins declared `Relation: true`, with their operands


def rewrite(run: Pass) -> Changes:
    for target, tree in run.parsed(RELATIONS):
        if target.identity in run.pending:
            yield target.identity, _changes(tree)


def _changes(tree: Parsed) -> list[Change]:
    source = tree.source
    local = tree.rule_names() | tree.import_names() | tree.aliases()
    found = [c for c in calls(tree.tree) if _valued(c) and fcn_name(c).split(".")[0] not in local]
    if not found:
        return []
    spans = [call_span(c) for c in found]
    places = dict(_statements(tree))
    comprehensions = list(_comprehensions(tree.tree))
    inside = tree.keeps_negations()
    counter = first_free(source)
    changes: list[Change] = []
    taken: set[int] = set()  # statements and comprehensions given a call this round
    for call, (start, end) in zip(found, spans, strict=True):
        if any(start < s and e <= end for s, e in spans if (s, e) != (start, end)):
            continue  # a relation in its operands: that one first, next round
        name = f"__rk{counter}__".encode()
        counter += 1
        operands = _operands(tree, call)
        hoisted = fcn_name(call).encode() + b"(" + operands + b", " + name + b")"
        term = _in_term(comprehensions, start, end)
        statement = _innermost(places, start, end)
        if term is not None and statement is not None and _within(statement[0], term):
            term = None  # in a statement of a comprehension inside that term: the statement is innermost
        if term is not None:
            if id(term) in taken:
                continue
            taken.add(id(term))
            last = end_of(term["query"]["stmts"][-1])
            changes += [Change(start, end, name), Change(last, last, b"; " + hoisted)]
        elif statement is not None:
            if id(statement[0]) in taken:
                continue
            taken.add(id(statement[0]))
            changes += [Change(start, end, name), *_before(tree, statement, hoisted, inside)]
        else:
            raise refusal(
                tree.module,
                source,
                start,
                f"{fcn_name(call)} is a relation (it has many outputs) called in a rule's head: OPA enumerates it "
                "there, the embedded engine cannot; bind it in the rule's body",
            )
    return changes


def _valued(call: Node) -> bool:
    name = fcn_name(call)
    return name in RELATIONS and len(call["params"]) == RELATIONS[name]


def _operands(tree: Parsed, call: Node) -> bytes:
    first, last = extent(call["params"][0]), extent(call["params"][-1])
    start, end = trimmed(tree.source, first["start"], last["end"])
    return flat(tree.source, start, end)


def _statements(tree: Parsed) -> Iterator[tuple[int, tuple[Node, bool]]]:
    """Every statement (by id) with whether its query has braces (a one-expression body has none)."""
    for query in queries(tree.tree):
        braced = tree.source[query["span"]["start"] : query["span"]["start"] + 1] in (b"{", b"|")
        for statement in query["stmts"]:
            yield id(statement), (statement, braced)


def _innermost(places: dict[int, tuple[Node, bool]], start: int, end: int) -> tuple[Node, bool] | None:
    holding = [p for p in places.values() if p[0]["span"]["start"] <= start and end <= p[0]["span"]["end"]]
    return max(holding, key=lambda p: p[0]["span"]["start"], default=None)


def _comprehensions(tree: Node) -> Iterator[Node]:
    for node_kind, node in tagged(tree):
        if node_kind in COMPREHENSIONS:
            yield node


def _in_term(comprehensions: list[Node], start: int, end: int) -> Node | None:
    """The innermost comprehension whose term (key, value) holds [start, end), not its body."""
    holding = []
    for node in comprehensions:
        terms = [node[k] for k in ("term", "key", "value") if k in node]
        if any(extent(t)["start"] <= start and end <= extent(t)["end"] for t in terms):
            holding.append(node)
    inner = [n for n in holding if not any(o is not n and _within(o, n) for o in holding)]
    return inner[0] if inner else None


def _within(inner: Node, outer: Node) -> bool:
    return outer["span"]["start"] <= inner["span"]["start"] and inner["span"]["end"] <= outer["span"]["end"]


def _before(tree: Parsed, place: tuple[Node, bool], hoisted: bytes, inside: bool) -> list[Change]:
    """`hoisted` as a statement before `statement` (inside its negation, where `not` keeps it)."""
    statement, braced = place
    source = tree.source
    withs = b"".join(b" " + flat(source, w["span"]["start"], end_of(w)) for w in statement.get("with_mods", []))
    start, end = statement["span"]["start"], end_of(statement)
    literal = statement["literal"]
    if kind(literal) == "NotExpr" and inside:
        negated = body(literal)["expr"]
        first, last = trimmed(source, **extent(negated))
        return [
            Change(start, first, b"[1 | " + hoisted + b"; "),
            Change(last, last, b"] == []"),
        ]
    opening = b"" if braced else b"{ "
    changes = [Change(start, start, opening + hoisted + withs + b"; ")]
    if not braced:
        changes.append(Change(end, end, b" }"))
    return changes
