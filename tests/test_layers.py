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


# The layers, lowest first, each with the layers below it that it may reach: a module may reach (through
# any chain of imports, deferred ones included) only modules of its own layer or of a layer it names, or
# one those name, and so on down. Modules named by package cover the package; the most specific name wins.
# docs/development.md's Layout says the same, a paragraph per package.
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # the vocabulary every layer stands on: no I/O, no engine
    "vocabulary": (
        (
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
            "regokite.jsoncodec",
            "regokite.bundle",
            "regokite.bundles",
            "regokite.ops",
            "regokite.clusterdata",
        ),
        (),
    ),
    # the decision layer, pure (no API server, no process wiring), in its own inner layers:
    # engine < gatekeeper < admission < audit; the controllers beside gatekeeper, the offline tools on top
    "engine": (("regokite.engine", "regokite.outline"), ("vocabulary",)),
    "gatekeeper": (("regokite.gatekeeper",), ("engine",)),
    "controllers": (("regokite.controllers",), ("engine",)),  # their decisions; their runners are frontends
    "admission": (("regokite.admission",), ("gatekeeper",)),  # its decisions; its server is a frontend
    "audit": (("regokite.audit",), ("admission",)),  # what to audit and the findings; its runner is a frontend
    "decisionlogs": (("regokite.decisionlogs",), ("engine",)),  # events, mask/drop, the buffered logger
    "offline": (
        ("regokite.check", "regokite.testing", "regokite.manifests", "regokite.benchmark"),
        ("audit", "controllers"),
    ),
    # API machinery: the only code that talks to the API server
    "kube": (("regokite.kube",), ("vocabulary",)),
    # what runs controllers and replicates data on the machinery
    "runtime": (("regokite.runtime", "regokite.replication"), ("kube",)),
    # what runs on all of it: controller runners, hook serving, sources read from the cluster, the admission
    # server, the audit runner and its health
    "frontends": (
        (
            "regokite.hookserving",
            "regokite.sources",
            "regokite.admission.app",
            "regokite.admission.connections",
            "regokite.admission.settings",
            "regokite.admission.reload",
            "regokite.admission.worker",
            "regokite.admission.supervisor",
            "regokite.controllers.process",
            "regokite.controllers.composite.runner",
            "regokite.controllers.composite.rolling_runner",
            "regokite.controllers.decorator.runner",
            "regokite.controllers.watch.runner",
            "regokite.controllers.sync_reconciler",
            "regokite.controllers.related_resources",
            "regokite.controllers.hook_workers",
            "regokite.controllers.cluster_definitions",
            "regokite.audit.run",
            "regokite.audit.health",
        ),
        ("offline", "runtime", "decisionlogs"),
    ),
    # process wiring and the command line
    "commands": (("regokite.commands", "regokite.cli", "regokite.__main__"), ("frontends",)),
}


def _below(layer: str) -> set[str]:
    """The layers `layer` may reach: those it names, and theirs, down to the vocabulary."""
    found: set[str] = set()
    for lower in LAYERS[layer][1]:
        found |= {lower, *_below(lower)}
    return found


def _layer(module: str) -> str:
    """The layer whose most specific prefix names `module`."""
    best = (-1, "")
    for name, (prefixes, _) in LAYERS.items():
        for prefix in prefixes:
            covers = module == prefix or (prefix != "regokite" and module.startswith(prefix + "."))
            if covers and len(prefix) > best[0]:
                best = (len(prefix), name)
    assert best[1], f"{module} is in no layer of tests/test_layers.py: place it"
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
    found = []
    for module in sorted(graph):
        layer = _layer(module)
        allowed = {layer, *_below(layer)}
        for reached, chain in _reach(graph, module).items():
            if _layer(reached) not in allowed:
                path = " -> ".join(chain)
                found.append(f"{module} ({layer}) reaches {reached} ({_layer(reached)}): {path}")
    return found


def package(module: str) -> str:
    """A module's package: `regokite.X` for every module under regokite/X/ (subpackages included), a
    top-level module its own."""
    return ".".join(module.split(".")[:2])


def package_cycles(imports: dict[str, list[tuple[str, str | None, int]]]) -> list[list[str]]:
    """Cycles between packages, each as the chain of files that closes it (one per pair of packages)."""
    graph = {m: {src for src, _, _ in rows if src != m and src in imports} for m, rows in imports.items()}
    found: dict[frozenset[str], list[str]] = {}
    for module in sorted(graph):
        for reached, chain in _reach(graph, module).items():
            a, b = package(module), package(reached)
            if a == b or frozenset((a, b)) in found:
                continue
            back = _reach(graph, reached)
            home = next((m for m in sorted(back) if package(m) == a), None)
            if home is not None:
                found[frozenset((a, b))] = [*chain, *back[home][1:]]
    return list(found.values())


def test_every_module_has_a_layer() -> None:
    for module in _imports():
        _layer(module)


def test_the_layers_point_down_through_every_chain_of_imports() -> None:
    """The decisions never reach the API machinery (`kube`), the machinery never reaches the decisions or
    what runs on it, gatekeeper never reaches admission nor admission audit, and nothing below the
    commands reaches them, directly or through any other module."""
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
        "regokite.controllers.hooks (controllers) reaches regokite.kube.client (kube): "
        "regokite.controllers.hooks -> regokite.resources -> regokite.kube.client"
    )


def test_no_import_cycle_between_packages() -> None:
    """Packages of one layer too (gatekeeper and admission were: exempt.py imported admission's review)."""
    assert package_cycles(_imports()) == []


def test_a_package_cycle_is_caught_between_packages_of_one_layer() -> None:
    imports = {
        "regokite.runtime.manager": [("regokite.replication.replicate", None, 1)],
        "regokite.replication.replicate": [("regokite.kube.client", None, 1)],
        "regokite.replication.feed": [("regokite.runtime.health", None, 1)],
        "regokite.runtime.health": [],
        "regokite.kube.client": [],
    }
    assert layer_violations(imports) == []  # both are runtime: only the package check sees it
    assert package_cycles(imports) == []  # no cycle yet: manager -> replicate, feed -> health
    imports["regokite.replication.replicate"].append(("regokite.runtime.health", None, 2))
    imports["regokite.runtime.health"].append(("regokite.replication.feed", None, 2))
    assert package_cycles(imports) == [
        ["regokite.replication.feed", "regokite.runtime.health", "regokite.replication.feed"],
    ]


def test_gatekeeper_reaching_admission_is_caught() -> None:
    """The inner layers of the decisions: gatekeeper may not reach admission, even by a deferred import."""
    imports = {
        "regokite.gatekeeper.exempt": [("regokite.admission.review", None, 1)],
        "regokite.admission.review": [("regokite.input_guard", None, 1)],
        "regokite.input_guard": [],
    }
    assert layer_violations(imports) == [
        "regokite.gatekeeper.exempt (gatekeeper) reaches regokite.admission.review (admission): "
        "regokite.gatekeeper.exempt -> regokite.admission.review"
    ]


def test_kube_reaching_a_decision_is_caught() -> None:
    """kube/ stands on the vocabulary only (its actuator once imported controllers' Action)."""
    imports = {
        "regokite.kube.actuator": [("regokite.controllers.composite.decisions", None, 1)],
        "regokite.controllers.composite.decisions": [],
    }
    assert layer_violations(imports) == [
        "regokite.kube.actuator (kube) reaches regokite.controllers.composite.decisions (controllers): "
        "regokite.kube.actuator -> regokite.controllers.composite.decisions"
    ]
