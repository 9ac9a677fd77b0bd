"""References through import aliases: written out as full paths for regorus, same answers as OPA.

Each case is a package `b` importing package `a`; the embedded engine (which
rewrites `alias.rule` to `data.a.rule` where nothing else bears the alias's
name) and OPA's own evaluator must give the same answer for `data.b.x`, and
the rewrite must happen exactly where the case says.
"""

from __future__ import annotations

from typing import Any

import pytest
from opa_oracle import OracleEngine

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.engine.rewrite import Columns, rewrite
from regokite.engine.rewrite.edits import Edit
from regokite.errors import EvaluationError, Location, PolicyLoadError

A = """package a

ok := 1

bad := 1 / input.n

items := ["p", "q"]

f(x) := x + 1

obj := {"k": "v"}
"""

# name -> (module b's rules after its imports, whether its references are rewritten)
CASES: dict[str, tuple[str, bool]] = {
    "a rule of the import": ("x := a.ok\n", True),
    # the reason for the rewrite: regorus evaluated the whole package, so a.bad failed a.ok
    "beside a failing rule": ("x := [a.ok, a.items[1]]\n", True),
    "the failing rule itself": ("x := a.bad\n", True),
    "a function through the import": ("x := a.f(a.ok)\n", True),
    "a bracket index": ('x := a["obj"].k\n', True),
    "a variable index": ("x := [v | some i in [0, 1]; v := a.items[i]]\n", True),
    "the whole package": ("x := a\n", False),
    "shadowed by :=": ('x if {\n\ta := {"ok": 7}\n\ta.ok == 7\n}\n', False),
    "shadowed by := in a comprehension": ('x := [v | a := {"ok": 3}; v := a.ok]\n', False),
    "shadowed by destructuring": ('x := y if {\n\t[a, y] := [{"ok": 1}, 2]\n\ta.ok == 1\n}\n', False),
    "shadowed by every": ('x if {\n\tevery a in [{"ok": 2}] { a.ok == 2 }\n}\n', False),
    "shadowed by an argument": ('g(a) := a.ok\n\nx := g({"ok": 9})\n', False),
    "only in the shadowing rule": ('g(a) := a.ok\n\nx := [g({"ok": 9}), a.ok]\n', True),
    "named in a string": ('x := sprintf("a.ok is %v", [a.ok])\n', True),
    "named in a comment": ("x := a.ok # a is the import\n", True),
    "a with target": ("y := a.ok\n\nx := z if {\n\tz := y with a.ok as 5\n}\n", True),
    "a dotted rule head": ("a.ok := 3\n\nx := data.b.a.ok\n", False),
    "another package of that name": ("x := data.c.a.ok\n", False),
}
ALIASED = {"an alias": ("import data.a as m\n", "x := [m.ok, m.items[0]]\n", True)}


def engines(b: str) -> tuple[EmbeddedEngine, OracleEngine]:
    c = 'package c.a\n\nok := "c"\n'
    bundle = Bundle((Module("a.rego", A), Module("b.rego", b), Module("c.rego", c)))
    return EmbeddedEngine(bundle), OracleEngine(bundle)


def answer(engine: Any, ref: str, input: Any) -> Any:
    try:
        return engine.evaluate(ref, input)
    except EvaluationError:
        return "<error>"


def rewritten(text: str) -> bool:
    """Whether the DirectImports stage changes the module."""
    module = Module("b.rego", text)
    (written,), _ = rewrite([module])
    (without,), _ = rewrite([module], without=frozenset({"DirectImports"}))
    return written.text != without.text


@pytest.mark.parametrize(
    ("imports", "rules", "rewrites"),
    [("import data.a\n", *case) for case in CASES.values()] + list(ALIASED.values()),
    ids=[*CASES, *ALIASED],
)
def test_a_reference_through_an_import_answers_as_opa(imports: str, rules: str, rewrites: bool) -> None:
    text = f"package b\n\n{imports}\n{rules}"
    assert rewritten(text) is rewrites
    ours, opa = engines(text)
    for input in ({"n": 0}, {"n": 2}, {}):
        assert answer(ours, "data.b.x", input) == answer(opa, "data.b.x", input), input


def test_an_error_on_a_rewritten_line_is_located_in_the_file_as_written() -> None:
    text = "package b\n\nimport data.a\n\nx := [a.ok, a.ok, 1 / input.n]\n"
    ours, _ = engines(text)
    with pytest.raises(EvaluationError) as raised:
        ours.evaluate("data.b.x", {"n": 0})
    # where the engine places the same error on a line without aliases
    plain = "package b\n\nx := [data.a.ok, 1 / input.n]\n"
    with pytest.raises(EvaluationError) as unaliased:
        engines(plain)[0].evaluate("data.b.x", {"n": 0})
    operator = unaliased.value.location.col - plain.splitlines()[2].index("1 /")
    assert raised.value.location == Location("b.rego", 5, text.splitlines()[4].index("1 /") + operator)


@pytest.mark.parametrize(
    "rules",
    ["x := [a | some a; [5][a] == 5]\n", "x if {\n\tsome i, a\n\t[[5]][i][a] == 5\n}\n"],
    ids=["in a comprehension", "in a body"],
)
def test_some_declaring_an_import_name_is_refused_at_load(rules: str) -> None:
    """OPA reads the declared variable; regorus read the import and answered [] / undefined, silently."""
    text = f"package b\n\nimport data.a\n\n{rules}"
    assert OracleEngine(Bundle((Module("a.rego", A), Module("b.rego", text)))).evaluate("data.b.x") in ([0], True)
    with pytest.raises(PolicyLoadError) as refused:
        engines(text)
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "some" in t)
    assert refused.value.location.file == "b.rego" and refused.value.location.line == line
    assert "`some a` declares a variable named like `import data.a`" in str(refused.value)


def test_columns_map_back_past_and_inside_replaced_paths() -> None:
    # line 3 as written: `x := k.a + k.b + 1`; both `k` (col 6 and 12) became `data.lib.k`
    columns = Columns({"m.rego": [Edit(3, 6, 1, 10), Edit(3, 12, 1, 10)]})
    at = lambda col: columns.original(Location("m.rego", 3, col)).col  # noqa: E731
    assert [at(1), at(6), at(10), at(16), at(21), at(30), at(35)] == [1, 6, 6, 7, 12, 12, 17]
    assert columns.original(Location("m.rego", 4, 9)) == Location("m.rego", 4, 9)
    assert columns.original(Location("other.rego", 3, 9)) == Location("other.rego", 3, 9)
    assert columns.original(None) is None
