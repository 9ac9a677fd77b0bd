"""FunctionMocks: `with f as m`, `f` a function of the bundle, replaces that function wherever it is called.

regorus matches a `with` to calls by the name as written: `with w as m` in
package p replaced the `w(x)` calls of package q too, and `with data.p.w as m`
none written `w(x)`; OPA replaces the function the name resolves to. So once
any `with` replaces a function of the bundle, every call of a function of the
bundle, and every `with` replacing one, is written by full path (`w(x)` in
package q: `data.q.w(x)`).
"""

from __future__ import annotations

from collections.abc import Callable

from regokite.engine.rewrite.base import Changes, Pass
from regokite.engine.rewrite.edits import Change
from regokite.engine.rewrite.tree import (
    Parsed,
    bundle_functions,
    calls,
    extent,
    fcn_name,
    fcn_span,
    mock_targets,
    package_ref,
)


def rewrite(run: Pass) -> Changes:
    if not any("with" in m.text for m in run.modules):
        return  # no `with` at all: nothing to parse
    parsed = run.parsed()
    paths = {path for path in bundle_functions([tree for _, tree in parsed]) if path.startswith("data.")}
    resolved = [(target, tree, _resolver(tree, paths)) for target, tree in parsed]
    if not any(resolve(name) for _, tree, resolve in resolved for name, _ in mock_targets(tree.tree)):
        return
    for target, tree, resolve in resolved:
        if target.identity not in run.pending:
            continue
        changes = []
        for call in calls(tree.tree):
            name = fcn_name(call)
            full = resolve(name) if name and not name.startswith("data.") else None
            if full:
                changes.append(Change(*fcn_span(call), full.encode()))
        for name, modifier in mock_targets(tree.tree):
            full = resolve(name)
            if full and full != name:
                where = extent(modifier["refr"])
                changes.append(Change(where["start"], where["end"], full.encode()))
        yield target.identity, changes


def _resolver(tree: Parsed, paths: set[str]) -> Callable[[str | None], str | None]:
    """The full path of a function of the bundle as a name in the module refers to it, else None."""
    aliases = {i.name: list(i.parts) for i in tree.imports if i.parts[0] == "data"}

    def resolve(name: str | None) -> str | None:
        if not name:
            return None
        parts = name.split(".")
        if parts[0] == "data":
            full = parts
        elif parts[0] in aliases:
            full = [*aliases[parts[0]], *parts[1:]]
        else:
            full = ["data", *tree.package, *parts]
        text = package_ref(tuple(full[1:]))
        return text if text in paths else None

    return resolve
