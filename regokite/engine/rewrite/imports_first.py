"""ImportsFirst: an `import` after a rule moved before the rules, as OPA reads it.

OPA's parser takes an import anywhere in a module (it applies to the whole
module); regorus only before the first rule ("unexpected keyword `import`").
Each such import goes at the end of the package's line (`package p import
data.lib.x`, which regorus reads), its own line left blank: lines are kept.
Runs on the text, before any stage that parses.
"""

from __future__ import annotations

import re

from regokite.engine.rewrite.base import Target
from regokite.engine.rewrite.edits import Change, masked, offset
from regokite.engine.rewrite.tree import parse
from regokite.errors import engine_diagnostic

_LATE_IMPORT = "unexpected keyword `import`"
_PACKAGE = re.compile(rb"^[ \t]*package[ \t]+[^\n]*", re.MULTILINE)


def rewrite(target: Target) -> list[Change]:
    source = target.source
    if b"import" not in source:
        return []
    code = masked(source)
    package = _PACKAGE.search(code)
    if package is None:
        return []
    probe, moved = source, []
    for _ in range(source.count(b"import")):
        _, failure = parse(target.module, probe)
        if failure is None:
            break
        message, location = engine_diagnostic(failure)
        start = offset(probe, location.line, location.col) if location and _LATE_IMPORT in message else None
        if start is None or start < package.end():
            break
        end = source.find(b"\n", start)
        end = len(source) if end < 0 else end
        end = start + len(code[start:end].rstrip())  # a comment after the import stays where it is
        moved.append((start, end))
        probe = probe[:start] + b" " * (end - start) + probe[end:]
    if not moved:
        return []
    after = package.start() + len(code[package.start() : package.end()].rstrip())
    text = b"".join(b" " + source[start:end] for start, end in moved)
    return [Change(after, after, text), *(Change(start, end, b"") for start, end in moved)]
