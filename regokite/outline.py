"""What a bundle declares: its packages and the rules in each, with lines.

Read from the parser's AST rather than by evaluating anything, so test
discovery and policy discovery never run a policy to learn its shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from regokite.bundle import Module
from regokite.engine import rewrite
from regokite.engine.embedded import add_modules
from regokite.engine.rewrite.tree import ref_parts, rule_heads
from regokite.errors import PolicyLoadError, frames_released


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


@frames_released  # its parser goes on this thread
def outline(modules: Iterable[Module]) -> list[ModuleOutline]:
    """Outline every module; raises PolicyLoadError on a syntax error."""
    modules = list(modules)
    rewritten, columns = rewrite.rewrite(modules)  # a v0 rule with several bodies parses only so
    parser = rewrite.new_engine()
    error = None
    try:
        add_modules(parser, rewritten)
    except PolicyLoadError as exc:
        error = rewrite.located(exc, columns, modules)
    if error is not None:
        raise error
    return [_module_outline(entry) for entry in json.loads(parser.get_ast_as_json())]


def packages(outlines: Iterable[ModuleOutline]) -> dict[str, set[str]]:
    """Rule names per package, merged across the files that share a package."""
    merged: dict[str, set[str]] = {}
    for entry in outlines:
        merged.setdefault(entry.package, set()).update(entry.rule_names())
    return merged


def package_files(outlines: Iterable[ModuleOutline]) -> dict[str, str]:
    """The package of each policy file."""
    return {entry.file: entry.package for entry in outlines}


def _module_outline(entry: dict[str, Any]) -> ModuleOutline:
    ast = entry["ast"]
    rules = [Rule(ref_parts(head["refr"])[0], head["span"]["line"], kind == "Func") for kind, head in rule_heads(ast)]
    package = ".".join(ref_parts(ast["package"]["refr"]))
    return ModuleOutline(entry["source"]["file"], package, tuple(rules))
