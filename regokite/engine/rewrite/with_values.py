"""WithValues: a `with` value that needs evaluating is bound to a variable before its statement, as OPA binds it.

OPA's compiler (RewriteWithValues) binds every `with` value holding a
reference, a call or a comprehension to a generated variable, evaluated
before the expression and outside the replacement. regorus evaluates the value
inside it, where a rule the value names is undefined: `v == "a" with input as
{"x": v}` fails, and so does a test built as `f(check.x) with input as
build_input({"value": check.version})`. The value is bound on the statement's
line, its newlines after the statement (lines are kept): `__rk0__ := ({"x":
v}); v == "a" with input as __rk0__`. A value naming a function or a builtin
is a mock, not a value, and stays (FunctionMocks, BuiltinMocks).
"""

from __future__ import annotations

from regokite.engine.extensions import arities
from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change, flat, masked, trimmed
from regokite.engine.rewrite.helpers import first_free
from regokite.engine.rewrite.tree import (
    CALLS,
    COMPREHENSIONS,
    REFS,
    Node,
    Parsed,
    bundle_functions,
    end_of,
    extent,
    fcn_name,
    queries,
    tagged,
)


def rewrite(run: Pass) -> Changes:
    from regokite.engine.catalog import regorus_builtins  # catalog reaches regorus's list lazily

    if not any("with" in m.text for m in run.modules):
        return
    parsed = run.parsed()  # every module: a package's rules and functions may be written where no `with` is
    rules: dict[tuple[str, ...], set[str]] = {}
    for _, tree in parsed:
        rules.setdefault(tree.package, set()).update(tree.rule_names())
    functions = set(bundle_functions(tree for _, tree in parsed)) | regorus_builtins() | set(arities())
    for target, tree in parsed:
        if target.identity not in run.pending or "with" not in target.module.text:
            continue
        refs = rules[tree.package] | tree.import_names() | tree.aliases() | {"input", "data"}
        changes = _changes(tree, refs, functions)
        if changes:
            yield target.identity, changes


def _changes(tree: Parsed, refs: set[str], functions: set[str]) -> list[Change]:
    source, code = tree.source, masked(tree.source)
    imported = {i.name: ".".join(i.parts) for i in tree.imports if i.parts[0] == "data"}
    found = []  # (statement, the spans of its values to bind, whether its query has braces)
    for query in queries(tree.tree):
        braced = source[query["span"]["start"] : query["span"]["start"] + 1] in (b"{", b"|")
        for statement in query["stmts"]:
            spans = [
                _value(source, code, m)
                for m in statement.get("with_mods", [])
                if _evaluated(m["as"], refs) and not _mock(m["as"], imported, functions)
            ]
            if spans:
                found.append((statement, spans, braced))
    starts = [statement["span"]["start"] for statement, *_ in found]
    counter = first_free(source)
    changes: list[Change] = []
    for statement, spans, braced in found:
        if any(start <= at < end for start, end in spans for at in starts):
            continue  # a statement with a `with` inside one of these values (a comprehension's): that one first
        bindings = b""
        for start, end in spans:
            name = f"__rk{counter}__".encode()
            counter += 1
            bindings += name + b" := (" + flat(source, start, end) + b"); "
            changes.append(Change(start, end, name))
        at, end = extent(statement)["start"], end_of(statement)  # a statement's span may start inside a string
        newlines = b"\n" * sum(source[start:end].count(b"\n") for start, end in spans)  # the lines the values took
        changes.append(Change(at, at, (b"" if braced else b"{ ") + bindings))
        changes.append(Change(end, end, newlines + (b"" if braced else b" }")))
    return changes


def _value(source: bytes, code: bytes, modifier: Node) -> tuple[int, int]:
    """Where a `with`'s value is written: from after its `as` (regorus's span of an object or a set may start
    inside the braces) to its end, brackets balanced. `code`: the source masked."""
    start = code.index(b"as", extent(modifier["refr"])["end"]) + 2
    while source[start : start + 1].isspace() or source[start : start + 1] == b"#":  # spaces, a comment
        start = source.index(b"\n", start) + 1 if source[start : start + 1] == b"#" else start + 1
    return trimmed(source, start, extent(modifier["as"])["end"])


def _evaluated(term: Node, refs: set[str]) -> bool:
    """Whether OPA evaluates the value: it holds a reference (a rule or an import by its name too), a call or a
    comprehension. A local variable alone is already a value."""
    for node_kind, node in tagged(term):
        if node_kind in REFS or node_kind in CALLS or node_kind in COMPREHENSIONS:
            return True
        if node_kind == "Var" and node["value"] in refs:
            return True
    return False


def _mock(term: Node, imported: dict[str, str], functions: set[str]) -> bool:
    """Whether the value names a function of the bundle (by its name, full path or through an import of
    `imported`, name to path) or a builtin."""
    name = fcn_name({"fcn": term})
    if name is None:
        return False
    first, _, rest = name.partition(".")
    return name in functions or (first in imported and f"{imported[first]}.{rest}".rstrip(".") in functions)
