"""No function in regokite/ over 80 lines (nested functions count within the one that holds them): a longer
one does several jobs. The exceptions are named here, each with why it stands."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "regokite"
LIMIT = 80
EXCEPTIONS: dict[str, str] = {}


def long_functions() -> dict[str, int]:
    """`path:qualified name` -> lines, of every function over LIMIT lines."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        found.update(_long(tree, f"{path.relative_to(PACKAGE)}:", ""))
    return found


def _long(node: ast.AST, where: str, prefix: str) -> dict[str, int]:
    found = {}
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (child.end_lineno or child.lineno) - child.lineno + 1
            if lines > LIMIT:
                found[f"{where}{prefix}{child.name}"] = lines
            continue  # a nested function is part of its holder's length
        if isinstance(child, ast.ClassDef):
            found.update(_long(child, where, f"{prefix}{child.name}."))
    return found


def test_no_function_is_over_80_lines_but_the_named_exceptions() -> None:
    found = long_functions()
    unexcused = {name: lines for name, lines in found.items() if name not in EXCEPTIONS}
    assert not unexcused, f"functions over {LIMIT} lines: {unexcused}"
    stale = set(EXCEPTIONS) - set(found)
    assert not stale, f"no longer over {LIMIT} lines, drop them from EXCEPTIONS: {sorted(stale)}"


def test_the_check_sees_a_long_method_and_not_a_short_one() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(LIMIT))
    tree = ast.parse(f"class C:\n    def long(self):\n{body}\n\n    def short(self):\n        pass\n")
    assert _long(tree, "m.py:", "") == {"m.py:C.long": LIMIT + 1}
