"""Write references through `import data...` aliases out as full paths before regorus reads them.

regorus evaluates `alias.rule` by evaluating the whole imported package and
indexing the result. That is slow (0.1-0.35 ms per package and evaluation
on a 2-core machine: policies/admission/max_replicas took 0.41 ms, now 0.24)
and not what OPA does: an error in any other rule of that package fails the
reference, where OPA evaluates only the rule named. `data.pkg.rule` written
out is evaluated rule by rule. So each reference whose head is a data
import's alias becomes the import's path (`kubernetes.x` →
`data.lib.kubernetes.x`), in rules where the alias's name appears only in
such references and in calls: a local variable may shadow an import, and
such a rule is left as written. Calls through an alias are left alone;
regorus resolves those by path already.

The rewrite keeps lines but moves columns on the lines it touches;
`Columns.original` maps the engine's locations back to the file as written.
`check_shadowing` refuses the one shadowing of an import regorus gets wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from regokite.bundle import Bundle, Module
from regokite.errors import Location, PolicyLoadError
from regokite.rego_ast import objects

_NAME = re.compile(rb"(?<![\w.$])[A-Za-z_]\w*")
# what a rule's text may hold besides code: strings, raw strings and comments (masked before names are sought)
_NOT_CODE = re.compile(rb'"(?:[^"\\\n]|\\.)*"|`[^`]*`|#[^\n]*')


@dataclass(frozen=True)
class Edit:
    """One alias replaced by its path: where it was (line, 1-based byte column) and the lengths."""

    line: int
    col: int
    old: int
    new: int


@dataclass(frozen=True)
class Redirect:
    """Lines of text appended by a rewrite (a helper made for one place) whose locations belong at that
    place: (line, col) in the text before the rewrite."""

    first: int
    last: int
    line: int
    col: int


class Columns:
    """Maps locations in the rewritten modules back to the modules as written.

    Several rewrites in a row chain: each stage's edits hold columns of the
    text before it, so a location goes back through the last stage first.
    """

    def __init__(
        self, edits: dict[str, list[Edit | Redirect]], earlier: tuple[dict[str, list[Edit | Redirect]], ...] = ()
    ) -> None:
        self._stages = (*earlier, edits)

    @classmethod
    def chain(cls, *stages: Columns) -> Columns:
        """The map back through `stages`, applied to the text in that order."""
        edits = tuple(e for stage in stages for e in stage._stages if e)
        return cls(edits[-1], edits[:-1]) if edits else cls({})

    @property
    def changed(self) -> bool:
        """Whether any rewrite moved a column."""
        return any(self._stages)

    def original(self, location: Location | None) -> Location | None:
        for edits in reversed(self._stages):
            location = _before(edits, location)
        return location


def _before(edits: dict[str, list[Edit | Redirect]], location: Location | None) -> Location | None:
    """`location` in the text before one rewrite."""
    if location is None:
        return None
    found = edits.get(location.file, ())
    for redirect in found:
        if isinstance(redirect, Redirect) and redirect.first <= location.line <= redirect.last:
            return replace(location, line=redirect.line, col=redirect.col)
    col, shift = location.col, 0
    for edit in found:
        if isinstance(edit, Redirect) or edit.line != location.line:
            continue
        start = edit.col + shift  # where the path begins in the rewritten line
        if col < start:
            break
        if col < start + edit.new:
            return replace(location, col=edit.col)  # inside the path: the alias it replaced
        shift += edit.new - edit.old
    return replace(location, col=col - shift)


def direct_imports(modules: Sequence[Module], ast: list[dict[str, Any]]) -> tuple[tuple[Module, ...], Columns]:
    """`modules` with references through data imports written out, and the map back to their columns.

    `ast` is `get_ast_as_json()` of an engine holding exactly `modules`.
    """
    parsed = {entry["source"]["file"]: entry["ast"] for entry in ast}
    rewritten, edits = [], {}
    for module in modules:
        source = module.text.encode()
        found = _references(source, parsed[module.path]) if module.path in parsed else []
        if not found:
            rewritten.append(module)
            continue
        for span, path in sorted(found, key=lambda f: -f[0]["start"]):
            source = source[: span["start"]] + path + source[span["end"] :]
        rewritten.append(replace(module, text=source.decode()))
        # the engine's own line and column of each alias: it counts a tab as several columns
        edits[module.path] = sorted(
            (Edit(span["line"], span["col"], span["end"] - span["start"], len(path)) for span, path in found),
            key=lambda e: (e.line, e.col),
        )
    return tuple(rewritten), Columns(edits)


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


def _references(source: bytes, tree: dict[str, Any]) -> list[tuple[dict[str, Any], bytes]]:
    """(span of the alias, the path to write instead) of every reference through a data import."""
    aliases = _aliases(source, tree)
    if not aliases:
        return []
    found = []
    for rule in tree.get("rules", []):
        kind, body = next(iter(rule.items()))
        head = body if kind == "Default" else next(iter(body["head"].values()))
        if _head_var(head["refr"]) in aliases:
            continue  # a rule named like an import: leave it to the engine
        heads: dict[int, dict[str, Any]] = {}  # offset -> span, where the alias heads a reference
        calls: set[int] = set()  # where it heads a called function's name
        for node, role in _vars(rule, skip=head["refr"]):
            if node["value"] in aliases and role != "other":
                span = node["span"]
                if role == "head":
                    heads[span["start"]] = span
                else:
                    calls.add(span["start"])
        if not heads:
            continue
        # Every other place the name appears (a variable bound by `some`, `every`, `:=`, an
        # argument, a bare use) means it may not be the import here; some bindings are
        # not Var nodes in the AST, so the rule's text is searched.
        start, end = body["span"]["start"], body["span"]["end"]
        code = _code(source[start:end])
        named = {m.start() + start for m in _NAME.finditer(code) if m.group().decode() in aliases}
        if named - set(heads) - calls:
            continue
        found += [(span, aliases[source[span["start"] : span["end"]].decode()]) for span in heads.values()]
    return found


def _declared(node: Any) -> Iterator[dict[str, Any]]:
    """The span of every variable a `some x, y` declaration introduces below `node`."""
    for obj in objects(node):
        some = obj.get("SomeVars")
        if isinstance(some, dict):
            yield from some["vars"]


def _aliases(source: bytes, tree: dict[str, Any]) -> dict[str, bytes]:
    """The module's data imports: alias -> the imported path as written."""
    aliases: dict[str, bytes] = {}
    for imported in tree.get("imports", []):
        refr = imported["refr"]
        parts = _path(refr)
        if parts is None or parts[0] != "data" or len(parts) < 2:
            continue
        where = next(iter(refr.values()))["span"]
        alias = imported.get("as")
        name = source[alias["start"] : alias["end"]].decode() if alias else parts[-1]
        if name.isidentifier():
            aliases[name] = source[where["start"] : where["end"]]
    return aliases


def _path(ref: dict[str, Any]) -> list[str] | None:
    """`data.a["b"]` as ["data", "a", "b"]; None for anything but static names and strings."""
    kind, node = next(iter(ref.items()))
    if kind == "Var":
        return [node["value"]]
    if kind == "RefDot":
        head = _path(node["refr"])
        return None if head is None else [*head, node["field"][1]]
    if kind == "RefBrack":
        head = _path(node["refr"])
        index_kind, index = next(iter(node["index"].items()))
        return None if head is None or index_kind != "String" else [*head, index["value"]]
    return None


def _head_var(ref: dict[str, Any]) -> str | None:
    kind, node = next(iter(ref.items()))
    if kind == "Var":
        return node["value"]
    return _head_var(node["refr"]) if kind in ("RefDot", "RefBrack") else None


def _vars(node: Any, skip: Any, role: str = "other") -> Iterator[tuple[dict[str, Any], str]]:
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
        kind, body = next(iter(node.items()))
        if kind == "Var" and isinstance(body, dict) and "value" in body:
            yield body, role
            return
        if kind in ("RefDot", "RefBrack") and isinstance(body, dict):
            yield from _vars(body["refr"], skip, "call" if role == "call" else "head")
            yield from _vars(body.get("index"), skip)
            return
        if kind == "Call" and isinstance(body, dict):
            yield from _vars(body["fcn"], skip, "call")
            yield from _vars(body["params"], skip)
            return
    for value in node.values():
        yield from _vars(value, skip)


def _code(text: bytes) -> bytes:
    """`text` with strings and comments blanked, offsets kept."""
    return _NOT_CODE.sub(lambda m: b" " * len(m.group()), text)
