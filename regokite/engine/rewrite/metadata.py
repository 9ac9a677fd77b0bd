"""Metadata: `rego.metadata.rule()` and `rego.metadata.chain()` as the values OPA gives them, written in place.

OPA reads `# METADATA` comment blocks (YAML) as annotations of the statement
after them: a package (scope `package`, or `subpackages`) or a rule (scope
`rule`, or `document`: every definition of the rule's path). `rule()` is the
annotations of the rule scope of the definition calling it (`{}` without);
`chain()` lists, from the active rule outward, `{"path": [...], "annotations":
{...}}` for the rule itself (its annotations only where it has some), its
document, its package and every package above it annotated with
`subpackages`. regorus has neither builtin: both are known at load, so each
call becomes its value as a JSON literal. Annotations OPA would read
otherwise than written here (`schemas`, an unknown key) are refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change, refusal
from regokite.engine.rewrite.tree import (
    Node,
    Parsed,
    body,
    call_span,
    calls,
    fcn_name,
    kind,
    mock_targets,
    statements,
)

CALLS = ("rego.metadata.rule", "rego.metadata.chain")  # catalog.REWRITTEN
_BLOCK = re.compile(rb"^[ \t]*#[ \t]*METADATA[ \t]*$", re.MULTILINE)
_KEYS = frozenset(
    {"scope", "title", "description", "related_resources", "authors", "organizations", "entrypoint", "custom"}
)
_AUTHOR = re.compile(r"^\s*(?P<name>[^<]*?)\s*(?:<(?P<email>[^>]*)>)?\s*$")


@dataclass
class _Annotations:
    """The bundle's annotations by scope: package path or rule path -> annotations."""

    package: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    subpackages: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    document: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)


def rewrite(run: Pass) -> Changes:
    parsed = run.parsed(("METADATA", *CALLS))
    if not any(name.encode() in tree.source for _, tree in parsed for name in CALLS):
        return
    for target, tree in parsed:
        for name, modifier in mock_targets(tree.tree):
            if name in CALLS:  # its value is written in place of each call: no `with` could replace it
                raise refusal(
                    target.module, tree.source, modifier["span"]["start"], f"`with {name} as ...`: use --engine opa"
                )
    found = _Annotations()
    rule_scoped: dict[int, dict[int, dict[str, Any]]] = {}  # module -> rule's start -> its rule-scope annotations
    for target, tree in parsed:
        rule_scoped[target.identity] = _read(tree, found)
    for target, tree in parsed:
        if target.identity in run.pending:
            yield target.identity, list(_changes(tree, rule_scoped[target.identity], found))


def _read(tree: Parsed, found: _Annotations) -> dict[int, dict[str, Any]]:
    """The module's annotations: package and document scopes into `found`, rule scopes returned."""
    statements = sorted(
        [(tree.tree["package"]["span"]["start"], None), *((r["span"]["start"], r) for r in _rules(tree))],
        key=lambda statement: statement[0],
    )
    rules: dict[int, dict[str, Any]] = {}
    for block_end, found_here, at in _blocks(tree):
        following = next(((s, r) for s, r in statements if s > block_end), None)
        if following is None:
            continue
        start, rule = following
        scope = found_here.setdefault("scope", "package" if rule is None else "rule")
        allowed = ("package", "subpackages") if rule is None else ("rule", "document")
        if scope not in allowed:
            raise refusal(tree.module, tree.source, at, f"annotation scope {scope!r} does not apply here")
        if scope == "rule":
            rules[start] = found_here
        elif scope == "document":
            found.document[(*tree.package, *_path(rule))] = found_here
        else:
            getattr(found, scope)[tree.package] = found_here
    return rules


def _changes(tree: Parsed, rule_scoped: dict[int, dict[str, Any]], found: _Annotations) -> Iterator[Change]:
    # `not rego.metadata.rule()` is true in OPA whatever the annotations (the negated call binds nothing it
    # could read): written `not false`
    negated = {
        id(body(body(s["literal"])["expr"]))
        for s in statements(tree.tree)
        if kind(s["literal"]) == "NotExpr" and kind(body(s["literal"])["expr"]) == "Call"
    }
    for rule in _rules(tree):
        path = (*tree.package, *_path(rule))
        own = rule_scoped.get(rule["span"]["start"])
        for call in calls(rule):
            name = fcn_name(call)
            if name not in CALLS or call["params"]:
                continue
            value: Any = own or {}
            if id(call) in negated:
                value = False
            elif name == "rego.metadata.chain":
                value = list(_chain(path, tree.package, own, found))
            yield Change(*call_span(call), json.dumps(value, ensure_ascii=False, sort_keys=True).encode())


def _chain(
    path: tuple[str, ...], package: tuple[str, ...], own: dict[str, Any] | None, found: _Annotations
) -> Iterator[dict[str, Any]]:
    yield {"path": list(path), **({"annotations": own} if own else {})}
    if path in found.document:
        yield {"path": list(path), "annotations": found.document[path]}
    if package in found.package:
        yield {"path": list(package), "annotations": found.package[package]}
    for depth in range(len(package), 0, -1):
        if package[:depth] in found.subpackages:
            yield {"path": list(package[:depth]), "annotations": found.subpackages[package[:depth]]}


def _rules(tree: Parsed) -> Iterator[Node]:
    return (body(rule) for rule in tree.written_rules())


def _path(rule: Node) -> list[str]:
    """A rule's path within its package, up to its first part that is not a name or a string."""
    head = rule if "refr" in rule else body(rule["head"])
    parts: list[str] = []
    ref = head["refr"]
    while kind(ref) in ("RefDot", "RefBrack"):
        node = body(ref)
        if kind(ref) == "RefDot":
            parts.insert(0, node["field"][1])
        elif kind(node["index"]) == "String":
            parts.insert(0, body(node["index"])["value"])
        else:
            parts.clear()  # a variable part: the path is the ground part before it
        ref = node["refr"]
    return [body(ref)["value"], *parts]


def _blocks(tree: Parsed) -> Iterator[tuple[int, dict[str, Any], int]]:
    """(where each METADATA block ends, its annotations as OPA gives them, where it starts)."""
    source = tree.source
    for found in _BLOCK.finditer(source):
        lines, at = [], found.end() + 1
        while at < len(source):
            end = source.find(b"\n", at)
            end = len(source) if end < 0 else end
            line = source[at:end].lstrip(b" \t")
            if not line.startswith(b"#") or _BLOCK.fullmatch(source[at:end]):
                break
            lines.append(line[1:].decode())
            at = end + 1
        yield at - 1, _normalized(tree, found.start(), "\n".join(lines)), found.start()


def _normalized(tree: Parsed, at: int, text: str) -> dict[str, Any]:
    try:
        raw = yaml.load(text, Loader=_Loader) or {}
    except yaml.YAMLError as exc:
        raise refusal(tree.module, tree.source, at, f"the METADATA block is not YAML: {exc}") from None
    unknown = set(raw) - _KEYS if isinstance(raw, dict) else {"(not a mapping)"}
    if unknown:
        raise refusal(
            tree.module, tree.source, at, f"annotations the embedded engine does not read as OPA: {sorted(unknown)}"
        )
    out = {k: v for k, v in raw.items() if k in ("scope", "title", "description", "organizations", "custom") and v}
    if raw.get("entrypoint"):
        out["entrypoint"] = True
    if raw.get("related_resources"):
        out["related_resources"] = [{"ref": r} if isinstance(r, str) else r for r in raw["related_resources"]]
    if raw.get("authors"):
        out["authors"] = [_author(a) if isinstance(a, str) else a for a in raw["authors"]]
    return out


def _author(text: str) -> dict[str, str]:
    found = _AUTHOR.match(text)
    name, email = (found["name"], found["email"]) if found else (text, None)
    return {k: v for k, v in (("name", name), ("email", email)) if v}


class _Loader(yaml.SafeLoader):
    """YAML as OPA reads annotations: a date stays a string."""


_Loader.yaml_implicit_resolvers = {
    key: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
