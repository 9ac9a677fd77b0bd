"""Which rule bodies OPA's rule index lets its evaluator enter (ast/index.go), for coverage.

OPA looks a rule up through an index built from its compiled bodies and
never enters a body the index leaves out: none of its expressions is
evaluated, so none is covered. regorus has no such index; it evaluates (and
covers) a body's first expression and fails there. coverage.py asks here
which bodies the index would leave out for the values an evaluation meets.

What the index reads, per body, from each expression without `with` (none
from a body calling `print`, which OPA indexes never), the last one read for
a reference winning:
  * `ref = value`, `ref == value`, `x := ref` (either side): `ref` must equal a
    scalar, or an array of scalars and variables (which match anything); a
    variable as `value` only needs `ref` defined;
  * the references OPA's compiler binds to variables before an expression
    (`__local0__ = ref`): a call's operands (operators, `in`, nested calls,
    the items of composites, also under `not`, where the binding stays outside
    the negation), and the brackets of any reference: each must be defined;
  * a bare reference: defined;
  * `glob.match(pattern, delimiters, m)` with literal pattern and delimiters:
    `m`'s string split at the delimiters must match the pattern's parts (`*` a
    whole part matches anything), where `m` is a reference, a variable bound to
    one before, or an argument;
  * for a function, `arg == value` on one of its arguments;
  * the head's value (or key), which OPA's compiler binds at the end of the
    body (`__local0__ = value`), read as such a binding.
A reference counts only when every part is a constant and it is `input`'s or
base data's (a rule's value, `data.p.r`, is never indexed); `some x in ref`
(compiled to `x = ref[_]`) and `every` give nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from regokite.engine.rewrite.tree import (
    CALLS,
    COMPREHENSIONS,
    REFS,
    Node,
    Parsed,
    body,
    call_operands,
    extent,
    kind,
    ref_parts,
    tagged,
)

ANY = object()  # a value matching whatever is defined
SCALARS = frozenset({"String", "RawString", "Number", "Bool", "Null"})
Key = tuple[Any, ...]  # ("input", "a", 0) / ("data", ...) / ("args", i)


@dataclass(frozen=True)
class Constraint:
    """What the index requires of one reference for a body to be entered."""

    key: Key
    pattern: Any = ANY  # ANY, a scalar, or a tuple (an array's items: scalars or ANY)
    delimiters: str | None = None  # glob.match: the value split at these is matched against `pattern`
    at: int = field(default=0, compare=False)  # where the reference is first written in the body (an offset)

    def text(self, args: Sequence[str]) -> str:
        """The reference as Rego on one line: a value, or nothing where undefined (`[v | v := ref]`)."""
        if self.key[0] == "args":
            return f"[{args[self.key[1]]}]"
        parts = "".join(f"[{json.dumps(p)}]" for p in self.key[1:])
        return f"[__rk_cover_v | __rk_cover_v := {self.key[0]}{parts}]"

    def met(self, found: list[Any]) -> bool:
        """Whether the index would select the body for the value found (none: undefined)."""
        if not found:
            return False
        value = found[0]
        if _matches(self.pattern, value):
            return True
        return (
            self.delimiters is not None
            and isinstance(value, str)
            and _matches(self.pattern, _split(value, self.delimiters))
        )


def _matches(pattern: Any, value: Any) -> bool:
    if pattern is ANY:
        return True
    if isinstance(pattern, tuple):
        return isinstance(value, list) and len(value) == len(pattern) and all(map(_matches, pattern, value))
    if _number(pattern):
        return _number(value) and value == pattern
    return type(value) is type(pattern) and value == pattern


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _split(text: str, delimiters: str) -> list[str]:
    """`text` split at any of `delimiters` not escaped by a backslash (the index's splitStringEscaped)."""
    parts, last, escaped = [], 0, False
    for at, char in enumerate(text):
        if char == "\\" or escaped:
            escaped = not escaped
            continue
        if char in delimiters:
            parts.append(text[last:at])
            last = at + 1
    return [*parts, text[last:]]


class Scope:
    """What a module's references resolve to: its imports, its package's rules, the bundle's rule paths."""

    def __init__(self, tree: Parsed, rule_paths: set[tuple[str, ...]]) -> None:
        self.names: dict[str, tuple[str, ...]] = {"input": ("input",), "data": ("data",)}
        for rule in tree.rule_names():
            self.names[rule] = ("data", *tree.package, rule)
        for imported in tree.imports:
            if imported.parts[0] in ("input", "data"):
                self.names[imported.name] = imported.parts
        self.rule_paths = rule_paths
        self.negations_kept = tree.keeps_negations()
        self.source = tree.source

    def virtual(self, parts: tuple[Any, ...]) -> bool:
        """Whether a data reference meets a rule (the index reads base documents only)."""
        return any(p[: len(parts)] == parts[: len(p)] for p in self.rule_paths)


def rule_paths(trees: Iterable[Parsed]) -> set[tuple[str, ...]]:
    """Every rule's path (its head's constant prefix) in the bundle, from `data`."""
    paths = set()
    for tree in trees:
        for rule in tree.rules:
            head = body(rule) if kind(rule) == "Default" else body(body(rule)["head"])
            paths.add(("data", *tree.package, *_constant_prefix(head["refr"])))
    return paths


def _constant_prefix(ref: Node) -> list[Any]:
    """`a.b[x].c` as ["a", "b"]: its parts up to the first that is not a constant."""
    chain = list(reversed(_chain(ref)))
    parts = [body(chain[0])["refr"] if chain else ref]
    out: list[Any] = [body(parts[0])["value"]] if kind(parts[0]) == "Var" else []
    for link in chain:
        part = _part(link)
        if part is _VARIABLE:
            break
        out.append(part)
    return out


_VARIABLE = object()  # a reference's part that is not a constant


def _part(link: Node) -> Any:
    """A reference link's key where it is a constant (`.b`, `["b"]`, `[0]`), else _VARIABLE."""
    node = body(link)
    if kind(link) == "RefDot":
        return node["field"][1]
    return _scalar_of(node["index"]) if kind(node["index"]) in SCALARS else _VARIABLE


def _chain(ref: Node) -> list[Node]:
    """A reference's links (RefDot, RefBrack), outermost first."""
    out = []
    while kind(ref) in REFS:
        out.append(ref)
        ref = body(ref)["refr"]
    return out


class _Body:
    """One body's constraints as its expressions are read in order (ast.refindices.Update)."""

    def __init__(self, scope: Scope, args: dict[str, int], declared: set[str]) -> None:
        self.scope, self.args = scope, args
        self.names = {name: parts for name, parts in scope.names.items() if name not in declared}
        self.found: dict[Key, Constraint] = {}
        self.bound: dict[str, Key] = {}  # local variables bound to a reference: `v := input.x`
        self.seen: dict[Key, int] = {}  # where each reference is first read

    def put(self, constraint: Constraint) -> None:
        self.found.pop(constraint.key, None)
        self.found[constraint.key] = constraint

    def statement(self, statement: Node) -> None:
        if statement.get("with_mods"):
            return
        literal_kind, literal = kind(statement["literal"]), body(statement["literal"])
        if literal_kind == "NotExpr":
            if not self.scope.negations_kept:
                self.negated(literal["expr"])
        elif literal_kind == "Expr":
            self.expression(literal["expr"])

    def negated(self, expr: Node) -> None:
        """`not E`: only the bindings OPA's compiler writes before the negation."""
        expr_kind, node = kind(expr), body(expr)
        if expr_kind == "AssignExpr" or (expr_kind == "BoolExpr" and node["op"] == "Eq"):
            self.in_place(node["lhs"])
            self.in_place(node["rhs"])
        elif expr_kind in CALLS:
            for operand in call_operands(expr_kind, node):
                self.operand(operand)
        else:
            self.in_place(expr)

    def expression(self, expr: Node) -> None:
        expr_kind, node = kind(expr), body(expr)
        if expr_kind == "AssignExpr" or (expr_kind == "BoolExpr" and node["op"] == "Eq"):
            sides = [self.in_place(node["lhs"]), self.in_place(node["rhs"])]
            self.equality(*sides) or self.equality(*reversed(sides))
            if node["op"] == "ColEq" and kind(node["lhs"]) == "Var" and sides[1] and sides[1][0] == "ref":
                self.bound[body(node["lhs"])["value"]] = sides[1][1]
        elif expr_kind == "Call" and _name(node) == "glob.match" and len(node["params"]) == 3:
            for operand in node["params"]:
                self.operand(operand)
            self.glob(*node["params"])
        elif expr_kind in CALLS:
            for operand in call_operands(expr_kind, node):
                self.operand(operand)
        elif (side := self.in_place(expr)) and side[0] == "ref":
            self.put(Constraint(side[1]))

    def equality(self, a: tuple | None, b: tuple | None) -> bool:
        """`a = b` read as the index reads it (eqOperandsToRefAndValue): a reference (or an
        argument) on the left, a value it can hold on the right."""
        if a is None or b is None or b[0] not in ("value", "var"):
            return False
        if a[0] == "ref" or (a[0] == "var" and a[1] in self.args):
            key = a[1] if a[0] == "ref" else ("args", self.args[a[1]])
            self.put(Constraint(key, b[1] if b[0] == "value" else ANY))
            return True
        return False

    def glob(self, pattern: Node, delimiters: Node, subject: Node) -> None:
        split = _delimiters(delimiters)
        parts = _pattern(pattern, split) if split is not None else None
        if parts is None:
            return
        key = None
        if (side := self.in_place(subject)) and side[0] == "ref":
            key = side[1]
        elif kind(subject) == "Var" and (name := body(subject)["value"]) in self.bound:
            key = self.bound[name]
        elif kind(subject) == "Var" and name in self.args:
            key = ("args", self.args[name])
        if key is not None:
            self.put(Constraint(key, parts, split))

    def in_place(self, term: Node) -> tuple | None:
        """A term compared in place; what the index can read of it: ("ref", key), ("value", pattern),
        ("var", name), or None. What its brackets and items hold is bound (and read) first."""
        term_kind, node = kind(term), body(term)
        if term_kind in REFS or (term_kind == "Var" and node["value"] in self.names):
            key = self.reference(term)
            return ("ref", key) if key is not None else None
        if term_kind == "Var":
            return ("var", node["value"])
        if term_kind in CALLS:
            for operand in call_operands(term_kind, node):
                self.operand(operand)
            return ("var", None)  # the call's output variable
        if term_kind in ("Array", "Set", "Object"):
            self.operand(term)
            return ("value", _array(term)) if term_kind == "Array" and _array(term) is not None else None
        if term_kind in SCALARS:
            return ("value", _scalar_of(term))
        return None

    def operand(self, term: Node) -> None:
        """A term in an operand position: each reference in it is bound, so must be defined."""
        term_kind, node = kind(term), body(term)
        if term_kind in CALLS:
            for operand in call_operands(term_kind, node):
                self.operand(operand)
        elif term_kind in REFS or (term_kind == "Var" and node["value"] in self.names):
            key = self.reference(term)
            if key is not None:
                self.put(Constraint(key))
        elif term_kind in ("Array", "Set"):
            for item in node["items"]:
                self.operand(item)
        elif term_kind == "Object":
            for _, key, value in node["fields"]:
                self.operand(key)
                self.operand(value)

    def reference(self, term: Node) -> Key | None:
        """A reference's key where the index reads it (constant parts, input or base data); what
        its brackets hold is bound (read) first."""
        chain = list(reversed(_chain(term)))
        root = body(chain[0])["refr"] if chain else term
        if kind(root) != "Var" or body(root)["value"] not in self.names:
            for ref in chain:
                if "index" in body(ref):
                    self.operand(body(ref)["index"])
            return None
        parts: list[Any] = list(self.names[body(root)["value"]])
        constant = True
        for ref in chain:
            part = _part(ref)
            if part is _VARIABLE:
                self.operand(body(ref)["index"])
                constant = False
            else:
                parts.append(part)
        if (
            not constant
            or parts[0] not in ("input", "data")
            or (parts[0] == "data" and self.scope.virtual(tuple(parts)))
        ):
            return None
        self.seen.setdefault(tuple(parts), extent(term)["start"] or 0)
        return tuple(parts)


def constraints(
    scope: Scope, statements: Sequence[Node], args: Sequence[Node], head: Sequence[Node] = ()
) -> tuple[Constraint, ...]:
    """What the index requires for a body (its statements, the function's arguments, the head's value and
    key, which OPA's compiler binds at the end of the body: `__local0__ = value`) to be entered."""
    if any(_prints(s) for s in statements):
        return ()  # OPA indexes no body calling print (internal.print)
    names = {body(a)["value"]: i for i, a in enumerate(args) if kind(a) == "Var" and body(a)["value"] != "_"}
    reader = _Body(scope, names, _declared(scope.source, statements) | set(names))
    for statement in statements:
        reader.statement(statement)
    for term in head:
        reader.equality(reader.in_place(term), ("var", None))
    return tuple(replace(c, at=reader.seen.get(c.key, 0)) for c in reader.found.values())


def evaluated(scope: Scope, term: Node | None) -> bool:
    """Whether OPA's compiler moves a head's value (or key) into the body (a reference, a call, a
    comprehension, in it): evaluated there after the body, it covers the head's row even where it is
    undefined."""
    if term is None:
        return False
    found = tagged(term)
    return any(
        k in REFS or k in CALLS or k in COMPREHENSIONS or (k == "Var" and n["value"] in scope.names) for k, n in found
    )


def _declared(source: bytes, statements: Sequence[Node]) -> set[str]:
    """The local variables a body declares (`:=`, `some`): they hide imports and rules of the same name."""
    found = set()
    for statement in statements:
        literal_kind, literal = kind(statement["literal"]), body(statement["literal"])
        if literal_kind == "SomeVars":
            found |= {source[v["start"] : v["end"]].decode() for v in literal["vars"]}
        elif literal_kind == "SomeIn":
            terms = [literal.get("key"), literal.get("value")]
            found |= {node["value"] for t in terms if t for k, node in tagged(t) if k == "Var"}
        elif (
            literal_kind == "Expr" and kind(literal["expr"]) == "AssignExpr" and body(literal["expr"])["op"] == "ColEq"
        ):
            found |= {node["value"] for k, node in tagged(body(literal["expr"])["lhs"]) if k == "Var"}
    return found


def _prints(statement: Node) -> bool:
    literal = statement["literal"]
    expr = body(literal).get("expr") if kind(literal) == "Expr" else None
    return expr is not None and kind(expr) == "Call" and _name(body(expr)) == "print"


def _name(call: Node) -> str | None:
    try:
        return ".".join(ref_parts(call["fcn"]))
    except (ValueError, KeyError):
        return None


def _scalar_of(term: Node) -> Any:
    term_kind, node = kind(term), body(term)
    if term_kind == "Null":
        return None
    value = node["value"]
    return json.loads(value) if term_kind == "Number" and isinstance(value, str) else value


def _array(term: Node) -> tuple | None:
    """An array's items as the index holds them: scalars, and ANY for a variable (or a reference or
    call, bound to one); None where an item is a composite or a comprehension."""
    items = []
    for item in body(term)["items"]:
        item_kind = kind(item)
        if item_kind in SCALARS:
            items.append(_scalar_of(item))
        elif item_kind == "Var" or item_kind in REFS or item_kind in CALLS:
            items.append(ANY)
        else:
            return None
    return tuple(items)


def _delimiters(term: Node) -> str | None:
    if kind(term) != "Array":
        return None
    items = body(term)["items"]
    if not all(kind(i) in ("String", "RawString") for i in items):
        return None
    return "".join(body(i)["value"] for i in items) if items else "."


def _pattern(term: Node, delimiters: str) -> tuple | None:
    """A glob pattern's parts (ANY for a whole `*`), None where it uses more than that (`?`, `[`, `{`, `**`)."""
    if kind(term) not in ("String", "RawString"):
        return None
    parts: list[Any] = []
    for part in _split(body(term)["value"], delimiters):
        if part == "*":
            parts.append(ANY)
            continue
        escaped = False
        for char in part:
            if char == "\\":
                escaped = not escaped
                continue
            if not escaped and char in "[?{*":
                return None
            escaped = False
        parts.append(part)
    return tuple(parts)


def index_order(bodies: Sequence[tuple[str, int, Sequence[Constraint]]]) -> list[tuple[Any, ...]]:
    """The order OPA's index hands a rule's bodies to its evaluator, as a sort key per body, for bodies
    given as (file, row, constraints) in the order OPA builds the index (by file, then as written).

    The index is a trie over the references the bodies constrain, the most constrained first (then the
    first written); at each, a body that does not constrain it comes before one that needs it defined,
    before one that needs a value; a body left where several are, in the order given."""
    counts: dict[Key, int] = {}
    first: dict[Key, tuple[str, int]] = {}
    for file, _, found in bodies:
        for c in found:
            counts[c.key] = counts.get(c.key, 0) + 1
            first.setdefault(c.key, (file, c.at))
    refs = sorted(counts, key=lambda k: (-counts[k], first[k]))
    keys = []
    for number, (_, _, found) in enumerate(bodies):
        by_key = {c.key: c for c in found}
        ranks = tuple(_rank(by_key.get(ref)) for ref in refs)
        keys.append((ranks, number))
    return keys


def _rank(constraint: Constraint | None) -> int:
    if constraint is None:
        return 0
    if constraint.pattern is ANY:
        return 1
    return 3 if constraint.delimiters is not None else 2
