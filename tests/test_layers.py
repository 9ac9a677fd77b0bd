"""The package's shape, read from its imports: no `_private` name crosses a module boundary, no import cycle
between files, and the layers point one way, checked through every chain of imports (README "Layout")."""

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


# The layers, lowest first. A module may reach (through any chain of imports, deferred ones included)
# only modules of its own layer or of a layer below it. Modules named here by package cover the package.
LAYERS: dict[str, tuple[str, ...]] = {
    # pure: vocabulary, engines, and the decisions; no API server, no process wiring
    "decisions": (
        "regokite",  # the package itself (its version), not its submodules
        "regokite.errors",
        "regokite.fields",
        "regokite.selectors",
        "regokite.names",
        "regokite.resources",
        "regokite.crd",
        "regokite.structural",
        "regokite.yamldoc",
        "regokite.input_guard",
        "regokite.bundle",
        "regokite.outline",
        "regokite.ops",
        "regokite.engine",
        "regokite.clusterdata",
        "regokite.gatekeeper",
        "regokite.controllers",
        "regokite.admission",  # its decisions; its HTTPS app and server are runtime, below
        "regokite.audit",  # what to audit and the findings; its runner is runtime, below
        "regokite.check",
        "regokite.testing",
        "regokite.manifests",
    ),
    # API machinery: the only code that talks to the API server
    "kube": ("regokite.kube",),
    # what runs on the machinery: controller runners, hook serving, sources read from the cluster, the
    # admission server, the audit runner and its health
    "runtime": (
        "regokite.runners",
        "regokite.hookserving",
        "regokite.sources",
        "regokite.admission.app",
        "regokite.admission.connections",
        "regokite.admission.settings",
        "regokite.admission.reload",
        "regokite.admission.worker",
        "regokite.admission.supervisor",
        "regokite.controllers.process",
        "regokite.audit.run",
        "regokite.audit.health",
    ),
    # process wiring and the command line
    "commands": ("regokite.commands", "regokite.cli", "regokite.__main__"),
}


def _layer(module: str) -> int:
    """The index in LAYERS of the most specific prefix naming `module`."""
    best = (-1, -1)
    for rank, prefixes in enumerate(LAYERS.values()):
        for prefix in prefixes:
            covers = module == prefix or (prefix != "regokite" and module.startswith(prefix + "."))
            if covers and len(prefix) > best[0]:
                best = (len(prefix), rank)
    assert best[1] >= 0, f"{module} is in no layer of tests/test_layers.py: place it"
    return best[1]


def _reach(graph: dict[str, set[str]], start: str) -> dict[str, list[str]]:
    """Every module `start` reaches through imports, each with one shortest chain leading to it."""
    chains = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for module in frontier:
            for nxt in sorted(graph.get(module, ())):
                if nxt in graph and nxt not in chains:
                    chains[nxt] = [*chains[module], nxt]
                    following.append(nxt)
        frontier = following
    return chains


def layer_violations(imports: dict[str, list[tuple[str, str | None, int]]]) -> list[str]:
    graph = {m: {src for src, _, _ in rows if src != m} for m, rows in imports.items()}
    names = list(LAYERS)
    found = []
    for module in sorted(graph):
        for reached, chain in _reach(graph, module).items():
            if _layer(reached) > _layer(module):
                path = " -> ".join(chain)
                found.append(f"{module} ({names[_layer(module)]}) reaches {reached} ({names[_layer(reached)]}): {path}")
    return found


def test_every_module_has_a_layer() -> None:
    for module in _imports():
        _layer(module)


def test_the_layers_point_down_through_every_chain_of_imports() -> None:
    """The decisions never reach the API machinery (`kube`), the machinery never reaches what runs on it,
    and nothing below the commands reaches them, directly or through any other module."""
    found = layer_violations(_imports())
    assert not found, "imports that point up a layer:\n" + "\n".join(found)


def test_a_chain_through_another_module_is_caught() -> None:
    """The check is transitive: a decision importing a vocabulary module that imports `kube` fails."""
    imports = {
        "regokite.controllers.hooks": [("regokite.resources", None, 1)],
        "regokite.resources": [("regokite.kube.client", None, 1)],
        "regokite.kube.client": [],
    }
    assert layer_violations(imports)[0] == (
        "regokite.controllers.hooks (decisions) reaches regokite.kube.client (kube): "
        "regokite.controllers.hooks -> regokite.resources -> regokite.kube.client"
    )
