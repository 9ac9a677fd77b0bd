"""Load a policies directory the way OPA loads a bundle.

Every `*.rego` below a root is a module, `*_test.rego` are tests (loaded by
`regokite test`, never served), `data.json` / `data.yaml` in `a/b/` become
`data.a.b`, and hidden files and directories are ignored. Loading is pure:
the result is an immutable value that an engine is built from, so a reload
can be built off to the side and swapped in whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from regokite.errors import Location, PolicyLoadError

DATA_FILES = ("data.json", "data.yaml", "data.yml")


@dataclass(frozen=True)
class Module:
    """One Rego source file; `v0` selects the Rego v0 parser for it."""

    path: str
    text: str
    v0: bool = False

    @property
    def is_test(self) -> bool:
        return self.path.endswith("_test.rego")

    def line(self, number: int) -> str | None:
        lines = self.text.splitlines()
        return lines[number - 1] if 0 < number <= len(lines) else None


@dataclass(frozen=True)
class Bundle:
    """Modules and base documents loaded from one or more roots."""

    modules: tuple[Module, ...]
    data: dict[str, Any] = field(default_factory=dict)
    roots: tuple[str, ...] = ()

    @property
    def policies(self) -> tuple[Module, ...]:
        return tuple(m for m in self.modules if not m.is_test)

    @property
    def tests(self) -> tuple[Module, ...]:
        return tuple(m for m in self.modules if m.is_test)

    def without_tests(self) -> Bundle:
        return Bundle(self.policies, self.data, self.roots)

    def module(self, path: str) -> Module | None:
        return next((m for m in self.modules if m.path == path), None)


def load_bundle(paths: Sequence[str | os.PathLike[str]], *, v0_compatible: bool = False) -> Bundle:
    """Load every root in `paths` (directories or single files) into one bundle."""
    modules: list[Module] = []
    data = _DataTree()
    for root in paths:
        root_path = Path(root)
        if not root_path.exists():
            raise PolicyLoadError(f"{root}: no such file or directory")
        for file, data_path in _walk(root_path):
            shown = _display(file)
            if file.suffix == ".rego":
                modules.append(Module(shown, _read(file), v0=v0_compatible))
            else:
                data.merge(data_path, _parse_data(file, shown), shown)
    modules.sort(key=lambda m: m.path)
    return Bundle(tuple(modules), data.value, tuple(str(p) for p in paths))


def _walk(root: Path) -> Iterable[tuple[Path, tuple[str, ...]]]:
    """Yield (file, data path) for every module and data file below `root`."""
    if root.is_file():
        yield root, ()
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(root)
        data_path = tuple(p for p in rel.parts if p != ".")
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            if name.endswith(".rego") or name in DATA_FILES:
                yield Path(dirpath) / name, data_path


def _display(file: Path) -> str:
    try:
        return str(file.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(file)


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyLoadError(f"{_display(file)}: not UTF-8 text ({exc.reason})") from exc


def _parse_data(file: Path, shown: str) -> Any:
    text = _read(file)
    if file.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            loc = Location(shown, exc.lineno, exc.colno)
            raise PolicyLoadError(f"invalid JSON: {exc.msg}", loc, _line_of(text, exc.lineno)) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is None:
            raise PolicyLoadError(f"{shown}: invalid YAML: {problem}") from exc
        loc = Location(shown, mark.line + 1, mark.column + 1)
        source_line = _line_of(text, mark.line + 1)
        raise PolicyLoadError(f"invalid YAML: {problem}", loc, source_line) from exc


def _line_of(text: str, number: int) -> str | None:
    lines = text.splitlines()
    return lines[number - 1] if 0 < number <= len(lines) else None


class _DataTree:
    """Merges data files into one document, refusing two files writing one path."""

    def __init__(self) -> None:
        self.value: dict[str, Any] = {}
        self._owners: dict[tuple[str, ...], str] = {}

    def merge(self, path: tuple[str, ...], doc: Any, source: str) -> None:
        if doc is None:
            return
        if not path:
            if not isinstance(doc, dict):
                raise PolicyLoadError(f"{source}: the root data document must be an object")
            for key, value in doc.items():
                self._place(self.value, key, value, (key,), source)
            return
        node = self.value
        for i, key in enumerate(path[:-1]):
            node = self._child(node, key, path[: i + 1], source)
        self._place(node, path[-1], doc, path, source)

    def _child(self, node: dict[str, Any], key: str, at: tuple[str, ...], source: str) -> dict:
        existing = node.setdefault(key, {})
        if not isinstance(existing, dict):
            self._conflict(at, source)
        return existing

    def _place(self, node: dict, key: str, value: Any, at: tuple[str, ...], source: str) -> None:
        if key not in node:
            node[key] = value
            self._owners[at] = source
            return
        existing = node[key]
        if not (isinstance(existing, dict) and isinstance(value, dict)):
            self._conflict(at, source)
        for k, v in value.items():
            self._place(existing, k, v, (*at, k), source)

    def _conflict(self, at: tuple[str, ...], source: str) -> None:
        owner = next((self._owners[at[:i]] for i in range(len(at), 0, -1) if at[:i] in self._owners), "?")
        dotted = ".".join(("data", *at))
        raise PolicyLoadError(f"{source}: {dotted} is already written by {owner}")
