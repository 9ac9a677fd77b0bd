"""SplitBodies: several bodies after one head (`p[x] { a } { b }`, v0) as one rule per body.

OPA defines one rule per body; regorus reads the second body as an `else`
(a partial set rule fails to parse, a complete rule takes `true` for its
value). Each further body gets a copy of the head.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, closing, flat, masked, offset
from regokite.engine.rewrite.tree import Node, kind, parse
from regokite.errors import engine_diagnostic

_SET_BODIES = "else cannot be used with set rules"  # regorus's word for a partial set rule's second body


def split(target: Target) -> list[Change]:
    """A copy of the head before each body after a rule's first (not an `else`)."""
    module = target.module
    source = target.source
    probe, refused = source, []  # bodies regorus refused to parse are blanked until it parses the rest
    for _ in range(source.count(b"{") + 1):
        parsed, failure = parse(module, probe)
        if failure is None:
            break
        message, location = engine_diagnostic(failure)
        start = offset(probe, location.line, location.col) if location and _SET_BODIES in message else None
        end = closing(probe, start) if start is not None and probe[start : start + 1] == b"{" else None
        if end is None:
            return []
        probe = probe[:start] + re.sub(rb"[^\n]", b" ", probe[start:end]) + probe[end:]
        refused.append(start)
    else:
        return []
    assert parsed is not None
    changes = []
    for rule, first, extra in _bodies(parsed.tree, probe, refused):
        head = flat(source, rule["span"]["start"], first)
        changes += [Change(start, start, head) for start in extra]
    return changes


def _bodies(tree: Node, probe: bytes, refused: list[int]) -> Iterator[tuple[Node, int, list[int]]]:
    """(rule, where its first body starts, where each further body starts) of every rule with several."""
    rules = [rule["Spec"] for rule in tree.get("rules", []) if kind(rule) == "Spec"]
    for rule in rules:
        bodies = rule["bodies"]
        first = _opening(probe, bodies[0]["span"]["start"]) if bodies else None
        if first is None:
            continue
        extra = [b["span"]["start"] for b in bodies[1:] if not b["is_else"]]
        if any(b["is_else"] for b in bodies) and extra:
            continue  # bodies and `else` mixed: regorus refuses it; so does the load
        end = rule["span"]["end"]
        for start in sorted(refused):
            if start >= end and not masked(probe[end:start]).strip():
                extra.append(start)
                end = closing(probe, start) or end
        if extra:
            yield rule, first, extra


def _opening(source: bytes, start: int) -> int | None:
    """Where a rule body starting at `start` opens its brace (after v1's `if`); None for a body without."""
    if source[start : start + 1] == b"{":
        return start
    after = re.match(rb"if\s*\{", masked(source[start : start + 64]))
    return start + after.end() - 1 if after else None
