"""DirectImports: references through `import data...` aliases written out as full paths; and the one
shadowing of an import regorus reads otherwise than OPA, refused.

regorus evaluates `alias.rule` by evaluating the whole imported package and
indexing the result. That is slow (0.1-0.35 ms per package and evaluation
on a 2-core machine: policies/admission/max_replicas took 0.41 ms, then 0.24)
and not what OPA does: an error in any other rule of that package fails the
reference, where OPA evaluates only the rule named. `data.pkg.rule` written
out is evaluated rule by rule. So each reference whose head is a data
import's alias becomes the import's path (`kubernetes.x` →
`data.lib.kubernetes.x`), in rules where the alias's name appears only in
such references and in calls: a local variable may shadow an import, and
such a rule is left as written. Calls through an alias are left alone;
regorus resolves those by path already.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from regokite.bundle import Bundle
from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import NOT_CODE, Change
from regokite.engine.rewrite.tree import Node, Parsed, body, kind, objects
from regokite.errors import Location, PolicyLoadError

_NAME = re.compile(rb"(?<![\w.$])[A-Za-z_]\w*")


def rewrite(target: Target, parsed: Parsed) -> list[Change]:
    return [Change(span["start"], span["end"], path) for span, path in _references(parsed)]


def check_shadowing(bundle: Bundle, ast: list[dict[str, Any]]) -> None:
    """Refuse `some x` declaring a variable named like a data import in its module.

    OPA reads `x` as the new variable there; regorus reads the import and
    answers something else without an error (an empty comprehension, an
    undefined rule). Other bindings (`:=`, `some x in`, `every`, arguments)
    it resolves as OPA does, or refuses itself.
    """
    for entry in ast:
        source = entry["source"]["contents"].encode()
        aliases = _aliases(source, entry["ast"])
        for span in _declared(entry["ast"]):
            name = source[span["start"] : span["end"]].decode()
            if name in aliases:
                file = entry["source"]["file"]
                module = bundle.module(file)
                raise PolicyLoadError(
                    f"`some {name}` declares a variable named like `import {aliases[name].decode()}`: the embedded "
                    "engine would read the import where OPA reads the variable; rename the variable",
                    Location(file, span["line"], span["col"]),
                    module.line(span["line"]) if module else None,
                )


def _references(parsed: Parsed) -> list[tuple[Node, bytes]]:
    """(span of the alias, the path to write instead) of every reference through a data import."""
    source = parsed.source
    aliases = _aliases(source, parsed.tree)
    if not aliases:
        return []
    found = []
    for rule in parsed.rules:
        rule_body = body(rule)
        head = rule_body if kind(rule) == "Default" else body(rule_body["head"])
        if _head_var(head["refr"]) in aliases:
            continue  # a rule named like an import: leave it to the engine
        heads: dict[int, Node] = {}  # offset -> span, where the alias heads a reference
        called: set[int] = set()  # where it heads a called function's name
        for node, role in _vars(rule, skip=head["refr"]):
            if node["value"] in aliases and role != "other":
                if role == "head":
                    heads[node["span"]["start"]] = node["span"]
                else:
                    called.add(node["span"]["start"])
        if not heads:
            continue
        # Every other place the name appears (a variable bound by `some`, `every`, `:=`, an
        # argument, a bare use) means it may not be the import here; some bindings are
        # not Var nodes in the AST, so the rule's text is searched.
        start, end = rule_body["span"]["start"], rule_body["span"]["end"]
        code = NOT_CODE.sub(lambda m: b" " * len(m.group()), source[start:end])
        named = {m.start() + start for m in _NAME.finditer(code) if m.group().decode() in aliases}
        if named - set(heads) - called:
            continue
        found += [(span, aliases[source[span["start"] : span["end"]].decode()]) for span in heads.values()]
    return found


def _declared(node: Any) -> Iterator[Node]:
    """The span of every variable a `some x, y` declaration introduces below `node`."""
    for obj in objects(node):
        some = obj.get("SomeVars")
        if isinstance(some, dict):
            yield from some["vars"]


def _aliases(source: bytes, tree: Node) -> dict[str, bytes]:
    """The module's data imports: alias -> the imported path as written."""
    aliases: dict[str, bytes] = {}
    for imported in tree.get("imports", []):
        refr = imported["refr"]
        parts = _path(refr)
        if parts is None or parts[0] != "data" or len(parts) < 2:
            continue
        where = body(refr)["span"]
        alias = imported.get("as")
        name = source[alias["start"] : alias["end"]].decode() if alias else parts[-1]
        if name.isidentifier():
            aliases[name] = source[where["start"] : where["end"]]
    return aliases


def _path(ref: Node) -> list[str] | None:
    """`data.a["b"]` as ["data", "a", "b"]; None for anything but static names and strings."""
    ref_kind, node = kind(ref), body(ref)
    if ref_kind == "Var":
        return [node["value"]]
    if ref_kind == "RefDot":
        head = _path(node["refr"])
        return None if head is None else [*head, node["field"][1]]
    if ref_kind == "RefBrack":
        head = _path(node["refr"])
        index = node["index"]
        return None if head is None or kind(index) != "String" else [*head, body(index)["value"]]
    return None


def _head_var(ref: Node) -> str | None:
    if kind(ref) == "Var":
        return body(ref)["value"]
    return _head_var(body(ref)["refr"]) if kind(ref) in ("RefDot", "RefBrack") else None


def _vars(node: Any, skip: Any, role: str = "other") -> Iterator[tuple[Node, str]]:
    """Every Var node below `node` with its role: "head" of a reference, "call" (in a called
    function's name) or "other"; nothing below `skip` (the rule's own name)."""
    if node is skip:
        return
    if isinstance(node, list):
        for item in node:
            yield from _vars(item, skip)
        return
    if not isinstance(node, dict):
        return
    if len(node) == 1:
        node_kind, contents = next(iter(node.items()))
        if node_kind == "Var" and isinstance(contents, dict) and "value" in contents:
            yield contents, role
            return
        if node_kind in ("RefDot", "RefBrack") and isinstance(contents, dict):
            yield from _vars(contents["refr"], skip, "call" if role == "call" else "head")
            yield from _vars(contents.get("index"), skip)
            return
        if node_kind == "Call" and isinstance(contents, dict):
            yield from _vars(contents["fcn"], skip, "call")
            yield from _vars(contents["params"], skip)
            return
    for value in node.values():
        yield from _vars(value, skip)
