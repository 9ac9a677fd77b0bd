"""NotBodies: `not { ... }` (a negated body, with `import future.keywords.not`) as a comprehension.

OPA 1.x reads `not { a; b }` as true where the body has no solution;
regorus does not parse it. `[1 | a; b] == []` is true exactly there (the
comprehension sees the variables bound before it, and binds none after, as
the negation). Only in modules importing `future.keywords.not` (or
`future.keywords`), where OPA reads a negated body (and refuses a set or
object indexed there); elsewhere `not {...}` stays a negated set or object.
Runs on the text, before any stage that parses.
"""

from __future__ import annotations

import re

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, closing, masked, refusal

_IMPORT = re.compile(rb"^[ \t]*import[ \t]+future\.keywords(\.not)?[ \t]*(#[^\n]*)?$", re.MULTILINE)
_NOT_BODY = re.compile(rb"\bnot[ \t]*\{")


def rewrite(target: Target) -> list[Change]:
    source = target.source
    if b"not" not in source:
        return []
    code = masked(source)
    if not _IMPORT.search(code):
        return []
    changes = []
    for found in _NOT_BODY.finditer(code):
        brace = found.end() - 1
        end = closing(source, brace)
        if end is None:
            continue
        if code[end:].lstrip()[:1] in (b"[", b"."):  # `not {"a": 1}[k]`: OPA's parse error under the import
            raise refusal(
                target.module,
                source,
                brace,
                "`{...}` after `not` is a negated body here (import future.keywords.not): write "
                "`not ({...}[k] == v)` to negate the value",
            )
        changes += [Change(found.start(), brace + 1, b"[1 |"), Change(end - 1, end, b"] == []")]
    return changes
