"""The package's shape, read from its imports: no `_private` name crosses a module boundary, no import cycle
between files, and the layers point one way (the vocabulary and the decisions never import the runtime)."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "regokite"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, list[tuple[str, str | None, int]]]:
    """module -> [(imported module, imported name or None, line)] for every import in regokite/."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    found: dict[str, list[tuple[str, str | None, int]]] = {}
    for name, path in modules.items():
        rows: list[tuple[str, str | None, int]] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                rows += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("regokite")]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                assert not node.level, f"{path}:{node.lineno}: a relative import"
                if not base.startswith("regokite"):
                    continue
                for alias in node.names:
                    submodule = f"{base}.{alias.name}"
                    rows.append(
                        (submodule, None, node.lineno) if submodule in modules else (base, alias.name, node.lineno)
                    )
        found[name] = rows
    return found


def test_no_private_name_is_imported_from_another_module() -> None:
    offenders = [
        f"{module}:{line} imports {name} from {source}"
        for module, rows in _imports().items()
        for source, name, line in rows
        if name is not None and name.startswith("_") and not name.startswith("__") and source != module
    ]
    assert offenders == []


def test_no_import_cycle_between_files() -> None:
    """Deferred imports (inside functions) count too: a cycle hidden in a function is still a cycle."""
    graph = {m: {src for src, _, _ in rows if src != m} for m, rows in _imports().items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # a package's __init__ importing its own submodules is how packages re-export, not a cycle between files
    cycles = [c for c in cycles if not any(b.startswith(a + ".") for a, b in itertools.pairwise(c))]
    assert cycles == []


def test_the_decisions_never_import_the_runtime() -> None:
    """`controllers/` decides and `resources` names things; only `kube/` talks to the API server."""
    offenders = [
        f"{module} imports {source}"
        for module, rows in _imports().items()
        if module.startswith(("regokite.controllers", "regokite.resources"))
        for source, _, _ in rows
        if source.startswith("regokite.kube")
    ]
    assert offenders == []
