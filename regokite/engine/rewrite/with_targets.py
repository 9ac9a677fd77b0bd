"""WithTargets: `with r as v`, `r` a rule named as its package's modules name it, written by full path.

OPA resolves a `with` target as any reference: a rule of the module's package
by its bare name (`with r as 2` is `with data.p.r as 2`), one of an imported
package through the import's name. regorus finds only `data...` and
`input...` targets ("undefined rule"). Functions are FunctionMocks's (every
call of a replaced function is written by full path there too).
"""

from __future__ import annotations

import re

from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change
from regokite.engine.rewrite.tree import bundle_functions, extent, package_ref, ref_parts, rule_heads, with_modifiers

BARE = re.compile(r"\bwith\s+(?!input\b|data\b)[A-Za-z_]")  # a `with` whose target is neither input nor data


def rewrite(run: Pass) -> Changes:
    if not any(BARE.search(m.text) for m in run.modules):
        return
    parsed = run.parsed()  # every module: a package's rules and functions may be written where no `with` is
    rules: dict[tuple[str, ...], set[str]] = {}
    for _, tree in parsed:
        rules.setdefault(tree.package, set()).update(
            ref_parts(head["refr"])[0] for kind, head in rule_heads(tree.tree) if kind != "Func"
        )
    functions = bundle_functions(tree for _, tree in parsed)
    for target, tree in parsed:
        if target.identity not in run.pending or not BARE.search(target.module.text):
            continue
        aliases = {i.name: i.parts for i in tree.imports if i.parts[0] == "data"}
        changes = []
        for modifier in with_modifiers(tree.tree):
            try:
                parts = ref_parts(modifier["refr"])
            except ValueError:
                continue
            if parts[0] in ("input", "data"):
                continue
            if parts[0] in rules.get(tree.package, ()):
                full = package_ref((*tree.package, *parts))
            elif parts[0] in aliases:
                full = package_ref((*aliases[parts[0]][1:], *parts[1:]))
            else:
                continue
            if full in functions:
                continue  # a function: FunctionMocks writes it and its calls
            where = extent(modifier["refr"])
            changes.append(Change(where["start"], where["end"], full.encode()))
        yield target.identity, changes
