"""BuiltinMocks: `with f as count` (a function or builtin replaced by a builtin).

regorus takes only a function of the bundle there, so the builtin gets one,
appended to the module: `__rk_mock_<tag>_<n>(a) := x if { x := count(a) }`,
placed at the builtin named (its errors are located at that `with`). The
arity is the replaced function's, or, for a builtin, that of its calls in the
bundle; with neither, left to the load's error.
"""

from __future__ import annotations

from collections.abc import Iterator

from regokite.engine.extensions import arities
from regokite.engine.rewrite import helpers
from regokite.engine.rewrite.base import Changes, Pass, Target
from regokite.engine.rewrite.edits import Change
from regokite.engine.rewrite.tree import Parsed, calls, extent, fcn_name, ref_parts, rule_heads, with_modifiers


def rewrite(run: Pass) -> Changes:
    from regokite.engine.catalog import regorus_builtins  # catalog reaches regorus's list lazily

    if not any("with" in m.text for m in run.modules):
        return  # no `with` at all: nothing to parse
    parsed = run.parsed()
    builtins = regorus_builtins() | set(arities())
    functions: dict[str, int] = {}  # a function of the bundle (full path, and name in its package) -> arity
    called: dict[str, int] = {}  # a builtin -> the fewest operands it is called with
    for _, tree in parsed:
        for kind, head in rule_heads(tree.tree):
            if kind == "Func":
                name = ".".join(ref_parts(head["refr"]))
                functions[name] = functions[".".join(["data", *tree.package, name])] = len(head["args"])
        for call in calls(tree.tree):
            name = fcn_name(call)
            if name:
                called[name] = min(called.get(name, 99), len(call["params"]))
    for target, tree in parsed:
        if target.identity in run.pending:
            yield target.identity, list(_mocks(target, tree, builtins, functions, called))


def _mocks(
    target: Target, tree: Parsed, builtins: set[str], functions: dict[str, int], called: dict[str, int]
) -> Iterator[Change]:
    source = tree.source
    number = 0
    for modifier in with_modifiers(tree.tree):
        replaced, value = fcn_name({"fcn": modifier["refr"]}), fcn_name({"fcn": modifier["as"]})
        if value is None or value not in builtins or value in functions or replaced is None:
            continue
        arity = functions.get(replaced, called.get(replaced))
        if arity is None or arity == 99:
            continue
        name = f"__rk_mock_{target.tag}_{number}"
        number += 1
        where = extent(modifier["as"])
        yield Change(where["start"], where["end"], name.encode())
        text = helpers.rego(
            "value",
            target.module.v0,
            name=name,
            operands=helpers.operands(arity),
            value=f"{value}({helpers.operands(arity)})",
        )
        yield helpers.placed(source, text, where["start"])
