"""A small typed view of regorus's AST (`Engine.get_ast_as_json`), and the parses the stages share.

regorus's AST is JSON: a term is a tagged node, `{"Kind": {"span": ..., ...}}`
(Var, RefDot, RefBrack, Call, ArithExpr, ...); a rule is `{"Spec": {"head":
..., "bodies": [...]}}` or `{"Default": {...}}`; a statement carries
`literal` (`{"Expr": ...}`, `{"NotExpr": ...}`, `{"SomeVars": ...}`) and
`with_mods`. The nodes stay the parser's dicts (never modified: parses are
cached and shared); `Parsed` and the functions below name what the stages
read from them, so a stage says `parsed.package`, not
`ref_parts(tree["package"]["refr"])`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import regorus

from regokite.bundle import Module

Node = dict[str, Any]  # one node of the tree: a tagged term `{"Kind": {...}}`, or a rule, a statement, a query

CALLS = frozenset({"Call", "ArithExpr", "BinExpr", "BoolExpr", "Membership", "UnaryExpr"})  # calls in OPA
COMPREHENSIONS = frozenset({"ArrayCompr", "SetCompr", "ObjectCompr"})
REFS = frozenset({"RefDot", "RefBrack"})
APPENDED = "__rk_"  # the first letters of every rule a stage appends to a module
_NAME = re.compile(r"[A-Za-z_]\w*")


def kind(term: Node) -> str:
    """A tagged node's kind (`Var`, `Call`, ...)."""
    return next(iter(term))


def body(term: Node) -> Node:
    """A tagged node's contents."""
    return next(iter(term.values()))


def span(term: Node) -> Node:
    """The span of a tagged node (`{"Var": {"span": ...}}`)."""
    return body(term)["span"]


def ref_parts(ref: Node) -> list[str]:
    """`data.a["b"].c` as ["data", "a", "b", "c"]."""
    node_kind, node = kind(ref), body(ref)
    if node_kind == "Var":
        return [node["value"]]
    if node_kind == "RefDot":
        return [*ref_parts(node["refr"]), node["field"][1]]
    if node_kind == "RefBrack":
        index_kind, index = kind(node["index"]), body(node["index"])
        key = index["value"] if index_kind in ("String", "Var") else str(index.get("value"))
        return [*ref_parts(node["refr"]), key]
    raise ValueError(f"unexpected reference node {node_kind}")


def call_operands(call_kind: str, call: Node) -> list[Node]:
    """The operand terms of a call (a node of a kind in CALLS): a Call's arguments, a membership's key (if
    any), value and collection, a unary minus's term, an infix operator's two sides."""
    if call_kind == "Call":
        return call["params"]
    if call_kind == "Membership":
        return [t for t in (call.get("key"), call["value"], call["collection"]) if t]
    if call_kind == "UnaryExpr":
        return [call["expr"]]
    return [call["lhs"], call["rhs"]]


def rule_heads(tree: Node) -> Iterator[tuple[str, Node]]:
    """(head kind, head) of every rule of a module: kind is Compr, Set, Func or Default."""
    for rule in tree.get("rules", []):
        rule_kind, rule_body = kind(rule), body(rule)
        if rule_kind == "Default":
            yield "Default", rule_body
        else:
            yield next(iter(rule_body["head"].items()))


def rule_name(rule: Node) -> str:
    """The first name of a rule's head (`p` of `p.q[x]`)."""
    rule_kind, rule_body = kind(rule), body(rule)
    head = rule_body if rule_kind == "Default" else body(rule_body["head"])
    return ref_parts(head["refr"])[0]


def appended(rule: Node) -> bool:
    """A helper a stage appended to the module (`__rk_...`), not a rule the user wrote."""
    return kind(rule) != "Default" and rule_name(rule).startswith(APPENDED)


def objects(node: Any) -> Iterator[Node]:
    """Every object of the tree below `node` (itself included), outermost first.

    A stack of its own, not nested generators (which cost each object the depth it lies at): every
    stage walks every tree, and this is twice as fast. A parsed tree holds JSON's types only."""
    stack = [node]
    pop, extend = stack.pop, stack.extend
    while stack:
        current = pop()
        if type(current) is dict:
            yield current
            extend(reversed(current.values()))
        elif type(current) is list:
            extend(reversed(current))


def tagged(node: Any) -> Iterator[tuple[str, Node]]:
    """(kind, contents) of every tagged node at or below `node`, outermost first (a stack, as `objects`)."""
    stack: list[Any] = [node]
    pop, extend, append = stack.pop, stack.extend, stack.append
    while stack:
        current = pop()
        if type(current) is tuple:  # a key of an object and its value (a parsed tree holds no tuple)
            key, value = current
            if type(value) is dict:
                if "span" in value and key[:1].isupper():
                    yield key, value
                append(value)
            elif type(value) is list:
                append(value)
        elif type(current) is dict:
            extend(reversed(current.items()))
        elif type(current) is list:
            extend(reversed(current))


def calls(node: Any) -> Iterator[Node]:
    """Every `Call` node (`{"fcn": ref, "params": [...]}`) below `node`, outermost first."""
    for obj in objects(node):
        call = obj.get("Call")
        if isinstance(call, dict) and "fcn" in call:
            yield call


def statements(node: Any) -> Iterator[Node]:
    """Every statement of every query below `node`, outermost first."""
    return (obj for obj in objects(node) if "literal" in obj and "span" in obj)


def queries(node: Any) -> Iterator[Node]:
    """Every query (a rule body, a comprehension's) below `node`, outermost first."""
    return (obj for obj in objects(node) if "stmts" in obj and "span" in obj)


def with_modifiers(node: Any) -> Iterator[Node]:
    """Every `with` below `node`."""
    for statement in statements(node):
        yield from statement.get("with_mods", [])


def mock_targets(node: Any) -> Iterator[tuple[str, Node]]:
    """(the name replaced, the `with`) of every `with` below `node` replacing a function or builtin."""
    for modifier in with_modifiers(node):
        name = fcn_name({"fcn": modifier["refr"]})
        if name and name.split(".")[0] != "input":
            yield name, modifier


def package_ref(package: Sequence[str]) -> str:
    """`data.a["b-c"]`: a package's (or a rule's) path as a reference."""
    return "data" + "".join(f".{p}" if _NAME.fullmatch(p) else f"[{json.dumps(p)}]" for p in package)


def fcn_name(call: Node) -> str | None:
    """A call's function name as written (`data.p.f`, `json.marshal`), None when it is no plain reference."""
    try:
        return ".".join(ref_parts(call["fcn"]))
    except (ValueError, KeyError):
        return None


def fcn_span(call: Node) -> tuple[int, int]:
    """Where a call's function name is written."""
    where = span(call["fcn"])
    return where["start"], where["end"]


def call_span(call: Node) -> tuple[int, int]:
    """A call's extent: from its name to its closing parenthesis (regorus's span starts at the parenthesis)."""
    return span(call["fcn"])["start"], call["span"]["end"]


def extent(term: Node) -> dict[str, int]:
    """Where a term's text starts and ends: regorus's spans leave out a string's quotes, and an
    operator's span starts at its first operand's (so at that string's first character)."""
    start, end = None, None
    for node_kind, node in tagged(term):
        quoted = 1 if node_kind in ("String", "RawString") else 0
        first, last = node["span"]["start"] - quoted, node["span"]["end"] + quoted
        start = first if start is None else min(start, first)
        end = last if end is None else max(end, last)
    return {"start": start, "end": end}


def end_of(node: Node) -> int:
    """Just past a statement's (or a `with`'s) text: regorus's span of one ending in a string stops
    before the string's closing quote."""
    return max(node["span"]["end"], extent(node)["end"] or 0)


@dataclass(frozen=True)
class Import:
    """One `import` of a module: the path imported and the name it binds."""

    parts: tuple[str, ...]
    name: str  # the alias, or the path's last part
    aliased: bool
    where: Node  # the span of the imported reference


@dataclass(frozen=True, eq=False)
class Parsed:
    """A module with its tree, as a stage reads it."""

    module: Module
    source: bytes  # the module's text as parsed
    tree: Node

    @functools.cached_property
    def package(self) -> tuple[str, ...]:
        return tuple(ref_parts(self.tree["package"]["refr"]))

    @property
    def rules(self) -> list[Node]:
        return self.tree.get("rules", [])

    def written_rules(self) -> Iterator[Node]:
        """The rules the user wrote (not the helpers appended to the module)."""
        return (rule for rule in self.rules if not appended(rule))

    def rule_names(self) -> set[str]:
        return {ref_parts(head["refr"])[0] for _, head in rule_heads(self.tree)}

    @functools.cached_property
    def imports(self) -> tuple[Import, ...]:
        found = []
        for imported in self.tree.get("imports", []):
            parts = tuple(ref_parts(imported["refr"]))
            alias = imported.get("as")
            name = self.source[alias["start"] : alias["end"]].decode() if alias else parts[-1]
            found.append(Import(parts, name, alias is not None, span(imported["refr"])))
        return tuple(found)

    def import_names(self) -> set[str]:
        """Names `data` and `input` imports bring in without `as`."""
        return {i.name for i in self.imports if i.parts[0] in ("data", "input") and not i.aliased}

    def keeps_negations(self) -> bool:
        """Whether `not` negates its whole expression here (`import future.keywords.not`, or
        `future.keywords`): OPA's compiler then moves nothing out of a negation."""
        return any(i.parts in (("future", "keywords", "not"), ("future", "keywords")) for i in self.imports)

    def aliases(self) -> set[str]:
        """Names imports bring in with `as`."""
        return {i.name for i in self.imports if i.aliased}


def bundle_functions(parsed: Iterable[Parsed]) -> dict[str, tuple[str, ...]]:
    """Every function of the bundle by full path, and by its name within its own package's modules,
    each to its package."""
    functions: dict[str, tuple[str, ...]] = {}
    for tree in parsed:
        for head_kind, head in rule_heads(tree.tree):
            if head_kind == "Func":
                name = ".".join(ref_parts(head["refr"]))
                functions[f"{package_ref(tree.package)}.{name}"] = tree.package
                functions[name] = tree.package
    return functions


def new_engine() -> regorus.Engine:
    """A regorus engine that reads any module OPA reads: regorus's default refuses lines over
    1,024 columns, files over 1 MiB and 20,000 lines; OPA has no such limits (a generated policy
    or one rewritten here may pass them)."""
    engine = regorus.Engine()
    engine.set_policy_length_config(max_col=1 << 24, max_file_bytes=1 << 28, max_lines=1 << 24)
    return engine


def parse(module: Module, text: bytes | None = None) -> tuple[Parsed | None, str | None]:
    """The module (or `text` in its place) parsed, or regorus's error text."""
    source = module.text.encode() if text is None else text
    tree, failure = _parsed(module.path, source, module.v0)
    return (Parsed(module, source, tree) if tree is not None else None), failure


def parsed(module: Module) -> Parsed | None:
    """The module parsed as it is, or None where regorus cannot parse it (the load reports that)."""
    return parse(module)[0]


@functools.lru_cache(maxsize=512)
def _parsed(path: str, text: bytes, v0: bool) -> tuple[Node | None, str | None]:
    # cached: loading parses a module up to four times, and outline() and the engine both load
    engine = new_engine()
    engine.set_rego_v0(v0)
    try:
        engine.add_policy(path, text.decode())
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # regorus raises RuntimeError (a panic: BaseException); its text is the diagnostic
        return None, str(exc)
    return json.loads(engine.get_ast_as_json())[0]["ast"], None
