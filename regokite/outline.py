"""What a bundle declares: its packages and the rules in each, with lines.

Read from the parser's AST rather than by evaluating anything, so test
discovery and policy discovery never run a policy to learn its shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import regorus

from regokite.bundle import Module
from regokite.engine.embedded import add_modules


@dataclass(frozen=True)
class Rule:
    name: str
    line: int
    is_function: bool = False


@dataclass(frozen=True)
class ModuleOutline:
    file: str
    package: str
    rules: tuple[Rule, ...]

    def rule_names(self) -> set[str]:
        return {r.name for r in self.rules}


def outline(modules: Iterable[Module]) -> list[ModuleOutline]:
    """Outline every module; raises PolicyLoadError on a syntax error."""
    modules = list(modules)
    parser = regorus.Engine()
    add_modules(parser, modules)
    return [_module_outline(entry) for entry in json.loads(parser.get_ast_as_json())]


def packages(outlines: Iterable[ModuleOutline]) -> dict[str, set[str]]:
    """Rule names per package, merged across the files that share a package."""
    merged: dict[str, set[str]] = {}
    for entry in outlines:
        merged.setdefault(entry.package, set()).update(entry.rule_names())
    return merged


def _module_outline(entry: dict[str, Any]) -> ModuleOutline:
    ast = entry["ast"]
    rules = []
    for rule in ast.get("rules", []):
        kind, body = next(iter(rule.items()))
        if kind == "Default":
            head_kind, head = "Default", body
        else:
            head_kind, head = next(iter(body["head"].items()))
        name = _ref_parts(head["refr"])[0]
        rules.append(Rule(name, head["span"]["line"], head_kind == "Func"))
    package = ".".join(_ref_parts(ast["package"]["refr"]))
    return ModuleOutline(entry["source"]["file"], package, tuple(rules))


def _ref_parts(ref: dict[str, Any]) -> list[str]:
    kind, node = next(iter(ref.items()))
    if kind == "Var":
        return [node["value"]]
    if kind == "RefDot":
        return [*_ref_parts(node["refr"]), node["field"][1]]
    if kind == "RefBrack":
        index_kind, index = next(iter(node["index"].items()))
        key = index["value"] if index_kind in ("String", "Var") else str(index.get("value"))
        return [*_ref_parts(node["refr"]), key]
    raise ValueError(f"unexpected reference node {kind}")
