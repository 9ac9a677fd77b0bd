"""Coverage as OPA's cover tracer reports it (`opa test --coverage`), from evaluations by the embedded engine.

OPA (1.20) records a rule's head as covered when the rule exits (its body
succeeded, or it has none) and an expression as covered when it is
evaluated, each as the range of rows its text spans; what is not covered is
every head and expression (but `some` declarations) whose range no covered
one holds. The report counts rows.

regorus reports only the rows where it evaluated an expression. So the
engine's modules (as rewritten) are instrumented: every rule body ends with
a call of MARKER, an extension builtin that records the rule as exited (it
takes `type_name(value)`, so a rule whose value is undefined does not count),
and starts with a call of ENTER, which records the body as entered and
answers whether OPA's rule index would have let OPA enter it
(rule_index.py): where not, the body fails there (as it would further on),
and the row of the call (its first statement's) is taken back from what
the evaluation covered unless a body the index selects starts there too. A
rule without a body gets one holding only the calls. The calls go before the
first and after the last statement, on their rows, so no row moves. A
default rule's head counts as covered when a lookup of its rule exited no
other body (OPA evaluates the default there): the ENTER and MARKER calls of
one evaluation, in order, tell its lookups apart (each enters a body once),
so two lookups under two `with`s count apart. Where OPA evaluates a head's
value in the body (a reference or a call in it), a DONE call after the body
as written records that the body succeeded: the head's row is covered then,
the head itself only when the rule exits. Where every body of a rule gives
one constant value, OPA stops after the first that exits, in its index's
order (rule_index.index_order): ENTER fails a body that comes after one that
exited in the same lookup. Expressions are covered when
regorus evaluated something on their first row. Heads and expressions come
from the modules as written (parsed on their own), so nothing the rewriter
inserted or appended shows.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from regokite.bundle import Module
from regokite.engine.rewrite.edits import Change, Columns, apply, engine_name, flat, position
from regokite.engine.rewrite.tree import (
    Node,
    Parsed,
    body,
    extent,
    kind,
    parse,
    rule_name,
    span,
    statements,
    tagged,
)
from regokite.engine.rule_index import Constraint, Scope, constraints, evaluated, index_order, rule_paths

MARKER = "__rk_cover_exit"
_OPENED = re.compile(rb"\{(?:\s|#[^\n]*)*\Z")  # a body's `{` just before its first statement
_MOVED = re.compile(r"__rk\d+__")  # HeadTerms' binding of a head's value at the end of the body
ENTER = "__rk_cover_enter"
DONE = "__rk_cover_done"


Rule = tuple[str, str]  # (package, the rule's first name)
VARYING = "__rk_varying__"  # a head value that is no constant (early exit needs one value for all bodies)


@dataclass(frozen=True)
class _Body:
    """One rule body as ENTER's calls number it: its rule, where its call is (engine file, row: its first
    statement's), and what OPA's rule index requires for it to be entered."""

    rule: Rule
    where: tuple[str, int]
    requires: tuple[Constraint, ...]
    constant: Any  # the head's value where it is a constant of a complete rule's body (not an else), else VARYING


@dataclass(frozen=True)
class _Needs:
    """What OPA's index requires to enter a body, and whether OPA evaluates its head's value in it."""

    requires: tuple[Constraint, ...] = ()
    value_evaluated: bool = False
    constant: Any = VARYING


@dataclass(frozen=True)
class Rows:
    """The rows a head or an expression spans in its file, first and last included. Which one it is: its
    file and first row (a rewrite may move a head's value off its rows, as into the body); its last row and
    columns say whether another's text holds it (OPA's containment)."""

    file: str
    first: int
    last: int = field(compare=False)
    first_col: int = field(default=0, compare=False)
    end_col: int = field(default=0, compare=False)
    declares: bool = field(default=False, compare=False)  # `some x in xs`: OPA's SomeDecl, never listed not covered


class CoverageLog:
    """What evaluations covered, gathered across them as OPA's tracer gathers a test run's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heads: list[tuple[Rows, Rule]] = []  # by MARKER number
        self._bodies: list[_Body] = []  # by ENTER number
        self._exit_body: dict[int, int] = {}  # MARKER number -> the ENTER number of its body
        self._order: dict[int, tuple[Any, ...]] = {}  # bodies OPA may stop before (early exit): their index order
        self._defaults: dict[Rule, Rows] = {}  # the default rules, by the rule they are the default of
        self._exited: set[int] = set()
        self._done: set[int] = set()  # heads whose body succeeded where OPA evaluates the value in the body
        self._used_defaults: set[Rows] = set()
        self._evaluation = threading.local()  # .events: (ENTER or MARKER, number, selected) since `gather`
        self._rows: dict[str, set[int]] = {}  # rows regorus evaluated something on, by engine file name
        self._modules: tuple[Module, ...] = ()
        self._rewritten: dict[str, Module] = {}  # by path: read where the module as written does not parse

    def track(self, modules: Iterable[Module]) -> None:
        """The modules (as written) `report` is over."""
        self._modules = tuple(modules)

    def instrument(self, modules: Sequence[Module], columns: Columns) -> tuple[tuple[Module, ...], Columns]:
        """`modules` (as rewritten) with an ENTER call starting and a MARKER call ending every rule
        body; the map back extended."""
        trees = {m.path: tree for m in modules if (tree := parse(m)[0]) is not None}
        paths = rule_paths(trees.values())
        written = {m.path: m for m in self._modules}
        out, moves, first = [], {}, len(self._bodies)
        for module in modules:
            self._rewritten[module.path] = module
            parsed = trees.get(module.path)
            if parsed is None:
                out.append(module)
                continue
            requires = _requirements(parsed, written.get(module.path), paths)
            package = ".".join(parsed.package)
            rules = parsed.written_rules()  # not the helpers a rewrite appended: they are no user's rule
            changes = [c for n, rule in enumerate(rules) for c in self._markers(parsed, rule, package, requires[n])]
            if changes:
                module, moves[engine_name(module)] = apply(module, changes)
            out.append(module)
        self._order.update(_early_exits(self._bodies, first))
        return tuple(out), Columns.chain(columns, Columns(moves))

    def _markers(self, parsed: Parsed, rule: Node, package: str, needs: list[_Needs]) -> list[Change]:
        source, module = parsed.source, parsed.module
        name = (package, rule_name(rule))
        if kind(rule) != "Spec":  # a default has no body to end: used when its value is evaluated and no other exits
            self._defaults[name] = _rows(module.path, source, span(rule)["start"], _end(source, body(rule)))
            return []
        spec = body(rule)
        head = _rows(module.path, source, span(spec["head"])["start"], _end(source, spec["head"]))
        value = _value(source, body(spec["head"]).get("assign") or {"value": body(spec["head"]).get("key")})
        args = [body(a)["value"] if kind(a) == "Var" else "" for a in body(spec["head"]).get("args") or []]
        if not spec["bodies"]:
            at, need = _end(source, spec["head"]), needs[0] if needs else _Needs()
            number_exit, mark = self._mark(head, name, value, need)
            enter = self._enter(name, (engine_name(module), position(source, at)[0]), need, args, number_exit)
            return [Change(at, at, _body(module, f"{enter}; {mark}"))]
        changes = []
        for number, each in enumerate(spec["bodies"]):
            rows, this, need = head, value, needs[number] if number < len(needs) else _Needs()
            if each["is_else"]:
                assign = each.get("assign")
                end = _end(source, assign["value"]) if assign else each["span"]["start"]
                rows, this = _rows(module.path, source, each["span"]["start"], end), _value(source, assign)
            stmts = each["query"]["stmts"]
            number_exit, mark = self._mark(rows, name, this, need, in_body=bool(stmts))
            if not stmts:
                at = _after_else(source, each)
                enter = self._enter(name, (engine_name(module), position(source, at)[0]), need, args, number_exit)
                changes.append(Change(at, at, _body(module, f"{enter}; {mark}")))
                continue
            first = min(stmts[0]["span"]["start"], extent(stmts[0])["start"])
            where = (engine_name(module), position(source, first)[0])
            enter = self._enter(name, where, need, args, number_exit)
            start, end = min(each["query"]["span"]["start"], first), _end(source, stmts[-1])
            braced = _OPENED.search(source, start, first) is not None  # (a v0 else's query starts at `else`)
            opening = (
                Change(first, first, f"{enter}; ".encode())
                if braced
                else Change(start, start, f"{{ {enter}; ".encode())
            )
            changes += [
                opening,
                *self._done_call(source, stmts, number_exit, need),
                Change(end, end, f"; {mark}{'' if braced else ' }'}".encode()),
            ]
        return changes

    def _done_call(self, source: bytes, stmts: list[Node], number: int, need: _Needs) -> list[Change]:
        """DONE's call where OPA evaluates the head's value in the body: after the body as written,
        before the value's binding HeadTerms moved to its end (`__rk0__ := value`)."""
        if not need.value_evaluated:
            return []
        call = f"{DONE}({number})"
        last = stmts[-1]["literal"]
        expr = body(last).get("expr") if kind(last) == "Expr" else None
        moved = (
            expr is not None
            and kind(expr) == "AssignExpr"
            and _MOVED.fullmatch(source[span(body(expr)["lhs"])["start"] : span(body(expr)["lhs"])["end"]].decode())
        )
        if moved:
            at = min(stmts[-1]["span"]["start"], extent(stmts[-1])["start"])
            return [Change(at, at, f"{call}; ".encode())]
        at = _end(source, stmts[-1])
        return [Change(at, at, f"; {call}".encode())]

    def _enter(self, rule: Rule, where: tuple[str, int], need: _Needs, args: list[str], exit_number: int) -> str:
        """The call recording that a body is entered; false (and the body fails there, as it would)
        where OPA's rule index would not have entered it."""
        requires = need.requires
        if any(c.key[0] == "args" and not args[c.key[1]] for c in requires):
            requires = ()  # an argument that is no variable as rewritten: nothing to read it by
        with self._lock:
            self._bodies.append(_Body(rule, where, requires, need.constant))
            number = len(self._bodies) - 1
            self._exit_body[exit_number] = number
        return f"{ENTER}({number}, [{', '.join(c.text(args) for c in requires)}])"

    def _mark(self, rows: Rows, rule: Rule, value: str, need: _Needs, *, in_body: bool = False) -> tuple[int, str]:
        """The call recording that the rule exits: after its body, with its value (OPA's rule does not
        exit where its value is undefined); before it, where OPA evaluates the value in the body, DONE's
        call: that evaluation covers the head's rows even where the value is undefined."""
        with self._lock:
            self._heads.append((rows, rule))
            number = len(self._heads) - 1
        done = f"{DONE}({number}); " if need.value_evaluated and not in_body else ""
        return number, f"{done}{MARKER}({number}, type_name({value}))"  # a name: any value converts

    def _events(self) -> list[tuple[str, int, bool]]:
        events = getattr(self._evaluation, "events", None)
        if events is None:
            events = self._evaluation.events = []
        return events

    def exited(self, number: Any, _value: Any) -> bool:
        """MARKER's body: the rule numbered `number` exited."""
        self._events().append((MARKER, int(number), True))
        body_number = self._exit_body.get(int(number))
        lookup = self._lookups().get(self._heads[int(number)][1])
        if lookup is not None and body_number is not None:
            lookup[1].append(body_number)
        return True

    def _lookups(self) -> dict[Rule, tuple[set[int], list[int]]]:
        """This thread's current lookup of each rule: the bodies entered, those exited."""
        lookups = getattr(self._evaluation, "lookups", None)
        if lookups is None:
            lookups = self._evaluation.lookups = {}
        return lookups

    def done(self, number: Any) -> bool:
        """DONE's body: the body of the head numbered `number` succeeded; its value is evaluated next."""
        self._events().append((DONE, int(number), True))
        return True

    def entered(self, number: Any, values: list[list[Any]]) -> bool:
        """ENTER's body: the body numbered `number` is entered; whether OPA's index selects it for the
        values its references hold (each a list: none where undefined)."""
        number = int(number)
        this = self._bodies[number]
        lookups = self._lookups()
        entered, exits = lookups.get(this.rule, (set(), []))
        if number in entered:  # the rule looked up again
            entered, exits = set(), []
        lookups[this.rule] = (entered | {number}, exits)
        order = self._order.get(number)
        stopped = order is not None and any(self._order.get(e, order) < order for e in exits)  # OPA's early exit
        selected = not stopped and all(c.met(found) for c, found in zip(this.requires, values, strict=True))
        self._events().append((ENTER, number, selected))
        return selected

    def gather(self, engine: Any) -> None:
        """What one evaluation by a regorus engine (with coverage enabled) covered, added: the rows it
        evaluated something on but the first rows of bodies OPA's index would not have entered, the
        rules exited, and the defaults used."""
        report = json.loads(engine.get_coverage_report_as_json())
        events, self._evaluation.events, self._evaluation.lookups = self._events(), [], {}
        rows = {file["path"]: set(file.get("covered", [])) for file in report.get("files", [])}
        with self._lock:
            entered = {n for what, n, _ in events if what == ENTER}
            selected = {n for what, n, chosen in events if what == ENTER and chosen}
            evaluated = {self._bodies[n].where for n in selected}
            for file, row in {self._bodies[n].where for n in entered - selected} - evaluated:
                rows.get(file, set()).discard(row)  # only ENTER's call was evaluated there
            self._exited |= {n for what, n, _ in events if what == MARKER}
            self._done |= {n for what, n, _ in events if what == DONE}
            for path, found in rows.items():
                self._rows.setdefault(path, set()).update(found)
            self._used_defaults |= {self._defaults[rule] for rule in self._defaulted(events, rows)}

    def _defaulted(self, events: list[tuple[str, int, bool]], rows: dict[str, set[int]]) -> set[Rule]:
        """The rules with a default that one of the evaluation's lookups of them left without a value
        (OPA evaluates the default there). A lookup enters each body once, in order: a body entered
        again starts the next one."""
        lookups: dict[Rule, tuple[set[int], bool]] = {}  # the current lookup: bodies entered, whether one exited
        used = set()
        for what, number, _ in events:
            if what == DONE:
                continue
            rule = self._bodies[number].rule if what == ENTER else self._heads[number][1]
            if rule not in self._defaults:
                continue
            entered, exited = lookups.get(rule, (set(), False))
            if what == MARKER:
                lookups[rule] = (entered, True)
                continue
            if number in entered:
                used |= set() if exited else {rule}
                entered, exited = set(), False
            lookups[rule] = (entered | {number}, exited)
        used |= {rule for rule, (_, exited) in lookups.items() if not exited}
        bodied = {b.rule for b in self._bodies}
        for rule, default in self._defaults.items():  # a default alone: used where regorus read it
            if rule not in bodied and any(
                r in rows.get(default.file, ()) for r in range(default.first, default.last + 1)
            ):
                used.add(rule)
        return used

    def report(self, modules: Iterable[Module] | None = None) -> dict[str, Any]:
        """OPA's coverage report (`opa test --coverage --format=json`) over `modules` (as written;
        by default those tracked)."""
        with self._lock:
            exited = {self._heads[n][0] for n in self._exited}
            done = {self._heads[n][0] for n in self._done}
            used_defaults = set(self._used_defaults)
            rows = {file: set(found) for file, found in self._rows.items()}
        files: dict[str, Any] = {}
        for module in self._modules if modules is None else modules:
            heads, defaults, exprs = written_items(module, self._rewritten.get(module.path))
            evaluated = rows.get(engine_name(module), set())
            covered = [h for h in heads if h in exited]
            covered += [d for d in defaults if d in used_defaults]
            covered += [e for e in exprs if e.first in evaluated]
            candidates = [*heads, *defaults, *(e for e in exprs if not e.declares)]
            not_covered = [i for i in candidates if not any(_holds(c, i) for c in covered)]
            # a value evaluated in the body covers its row; the head that never exits stays not covered
            touched = [Rows(h.file, h.first, h.first) for h in heads if h in done and h not in exited]
            files[module.path] = _file_report(covered + touched, not_covered)
        return _totals(files)


def _early_exits(bodies: list[_Body], first: int) -> dict[int, tuple[Any, ...]]:
    """The bodies (numbered from `first`) of rules whose bodies all give one constant value, where OPA's
    index lets its evaluator stop after the first that exits (EarlyExit), with their order in the index."""
    by_rule: dict[Rule, list[int]] = {}
    for number in range(first, len(bodies)):
        by_rule.setdefault(bodies[number].rule, []).append(number)
    found: dict[int, tuple[Any, ...]] = {}
    for numbers in by_rule.values():
        values = {json.dumps(bodies[n].constant) for n in numbers}
        if len(numbers) < 2 or len(values) != 1 or any(bodies[n].constant == VARYING for n in numbers):
            continue
        numbers.sort(key=lambda n: bodies[n].where)  # OPA builds the index by file, then as written
        keys = index_order([(*bodies[n].where, bodies[n].requires) for n in numbers])
        found.update(zip(numbers, keys, strict=True))
    return found


def _requirements(rewritten: Parsed, written: Module | None, paths: set) -> list[list[_Needs]]:
    """Per rule the user wrote (in order) and per body (one for a rule without), what OPA's index
    requires to enter it and whether its head's value is evaluated in it: read from the module as
    written (OPA's view; the rewritten one where it does not parse or its rules do not pair with the
    rewritten ones row for row)."""
    tree = parse(written)[0] if written is not None else None
    mine = list(rewritten.written_rules())
    theirs = list(tree.written_rules()) if tree is not None else []
    if tree is None or [_first_row(tree, r) for r in theirs] != [_first_row(rewritten, r) for r in mine]:
        tree, theirs = rewritten, mine
    scope = Scope(tree, paths)
    found = []
    for rule in theirs:
        if kind(rule) != "Spec":
            found.append([])
            continue
        head = body(body(rule)["head"])
        constant = _constant(kind(body(rule)["head"]), head)
        args, main = (
            head.get("args") or [],
            [t for t in ((head.get("assign") or {}).get("value"), head.get("key")) if t],
        )
        needs = []
        for each in body(rule)["bodies"] or [{"query": {"stmts": []}, "is_else": False}]:
            terms = (
                [each["assign"]["value"]] if each["is_else"] and each.get("assign") else [] if each["is_else"] else main
            )
            requires = constraints(scope, each["query"]["stmts"], args, terms)
            value = VARYING if each["is_else"] else constant
            needs.append(_Needs(requires, any(evaluated(scope, t) for t in terms), value))
        found.append(needs)
    return found


def _constant(head_kind: str, head: Node) -> Any:
    """A complete rule's value where it is a constant (`allow if ...`: true), else VARYING."""
    if head_kind != "Compr" or kind(head["refr"]) != "Var" or head.get("key") or head.get("args"):
        return VARYING
    value = (head.get("assign") or {}).get("value")
    if value is None:
        return True
    if kind(value) in ("String", "RawString", "Number", "Bool", "Null"):
        return body(value).get("value")
    return VARYING


def _first_row(tree: Parsed, rule: Node) -> int:
    return position(tree.source, span(rule)["start"])[0]


def written_items(module: Module, rewritten: Module | None = None) -> tuple[list[Rows], list[Rows], list[Rows]]:
    """The rule heads (and else heads), default rules' heads and expressions of a module as written;
    read from it as `rewritten` where regorus does not parse it as written (a template string): the
    rewrites keep its rows, and what they append at its end is left out."""
    parsed, _ = parse(module)
    if parsed is None and rewritten is not None:
        parsed, _ = parse(rewritten)
    if parsed is None:
        return [], [], []
    source, path = parsed.source, module.path
    heads, defaults = [], []
    for rule in parsed.written_rules():
        if kind(rule) != "Spec":
            defaults.append(_rows(path, source, span(rule)["start"], _end(source, body(rule))))
            continue
        spec = body(rule)
        heads.append(_rows(path, source, span(spec["head"])["start"], _end(source, spec["head"])))
        for each in spec["bodies"]:
            if each["is_else"]:
                assign = each.get("assign")
                end = _end(source, assign["value"]) if assign else each["span"]["start"]
                heads.append(_rows(path, source, each["span"]["start"], end))
    exprs = [
        _rows(path, source, stmt["span"]["start"], _end(source, stmt), declares=kind(stmt["literal"]) == "SomeIn")
        for rule in parsed.written_rules()
        for stmt in statements(rule)
        if kind(stmt["literal"]) != "SomeVars"
    ]
    return heads, defaults, exprs


def _end(source: bytes, node: Node) -> int:
    """Just past a node's text (tree.end_of), where regorus's span of an empty `set()` runs past it."""
    end = (node["span"] if "span" in node else span(node))["end"]
    for node_kind, inner in tagged(node):
        last = inner["span"]["end"] + (1 if node_kind in ("String", "RawString") else 0)
        if node_kind == "Set" and inner.get("items") == []:
            last = source.index(b")", inner["span"]["start"]) + 1
        end = max(end, last)
    return end


def _body(module: Module, mark: str) -> bytes:
    """A body holding only the call, for a rule written without one (v0 has no `if` unless imported)."""
    return f" {{ {mark} }}".encode() if module.v0 else f" if {{ {mark} }}".encode()


def _value(source: bytes, assign: Node | None) -> str:
    """A head's value (or key) as text on one line, `true` where it has none."""
    value = (assign or {}).get("value")
    if not value:
        return "true"
    start = min(span(value)["start"], extent(value)["start"])
    braced = kind(value) == "Object" or (kind(value) == "Set" and body(value)["items"])  # not `set()`
    if braced:  # regorus's span of these may start after the brace
        start = source.rindex(b"{", 0, start + 1)
    where = {"start": start, "end": _end(source, value)}
    spans_rows = b"\n" in source[where["start"] : where["end"]]
    if spans_rows and any(k.endswith("Compr") for k, _ in tagged(value)):
        return "true"  # its queries' statements would run together on one line; a comprehension is never undefined
    return flat(source, where["start"], where["end"]).decode()


def _after_else(source: bytes, each: Node) -> int:
    assign = each.get("assign")
    return _end(source, assign["value"]) if assign else each["span"]["end"]


def _rows(file: str, source: bytes, start: int, end: int, *, declares: bool = False) -> Rows:
    (first, first_col), (last, _) = position(source, start), position(source, max(start, end - 1))
    return Rows(file, first, last, first_col, position(source, max(start, end))[1], declares)


def _holds(outer: Rows, inner: Rows) -> bool:
    """Whether `outer`'s text holds `inner`'s (a head whose expression alone was evaluated is not covered)."""
    return (outer.first, outer.first_col) <= (inner.first, inner.first_col) and (inner.last, inner.end_col) <= (
        outer.last,
        outer.end_col,
    )


def _row_set(items: Iterable[Rows]) -> set[int]:
    return {row for item in items for row in range(item.first, item.last + 1)}


def _ranges(rows: set[int]) -> list[dict[str, Any]]:
    """Rows as OPA writes ranges of them: consecutive rows one range."""
    out: list[dict[str, Any]] = []
    for row in sorted(rows):
        if out and out[-1]["end"]["row"] == row - 1:
            out[-1]["end"]["row"] = row
        else:
            out.append({"start": {"row": row}, "end": {"row": row}})
    return out


def _file_report(covered: list[Rows], not_covered: list[Rows]) -> dict[str, Any]:
    """One file's entry; OPA leaves out what is empty or zero."""
    rows, missed = _row_set(covered), _row_set(not_covered)
    entry: dict[str, Any] = {}
    if rows:
        entry["covered"] = _ranges(rows)
    if missed:
        entry["not_covered"] = _ranges(missed)
    if rows:
        entry["covered_lines"] = len(rows)
    if missed:
        entry["not_covered_lines"] = len(missed)
    if rows:
        entry["coverage"] = 100.0 * len(rows) / (len(rows) + len(missed))
    return entry


def _totals(files: dict[str, Any]) -> dict[str, Any]:
    covered = sum(f.get("covered_lines", 0) for f in files.values())
    missed = sum(f.get("not_covered_lines", 0) for f in files.values())
    total = covered + missed
    return {
        "files": files,
        "covered_lines": covered,
        "not_covered_lines": missed,
        "coverage": 100.0 * covered / total if total else 0.0,
    }


def covered_rows(report: dict[str, Any]) -> dict[str, tuple[set[int], set[int]]]:
    """Per file, the rows a report (ours or OPA's) says are covered and not covered."""

    def rows(ranges: list[dict[str, Any]]) -> set[int]:
        return {r for x in ranges for r in range(x["start"]["row"], x["end"]["row"] + 1)}

    return {f: (rows(e.get("covered", [])), rows(e.get("not_covered", []))) for f, e in report["files"].items()}


def threshold_error(report: dict[str, Any], threshold: float) -> str | None:
    """OPA's error when the overall coverage is below `threshold` (percent), listing the rows not covered."""
    if not threshold or report["coverage"] >= threshold:
        return None
    lines = [f"Code coverage threshold not met: got {report['coverage']:.2f} instead of {threshold:.2f}"]
    missed = [
        f"\t{file}:{r['start']['row']}" + (f"-{r['end']['row']}" if r["end"]["row"] != r["start"]["row"] else "")
        for file in sorted(report["files"])
        for r in report["files"][file].get("not_covered", [])
    ]
    return "\n".join([*lines, "Lines not covered:", *missed] if missed else lines)
