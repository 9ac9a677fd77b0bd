"""Load policy files the two ways OPA loads them: as a bundle, or as plain files.

As a bundle (`opa run --bundle DIR`, what the servers serve): every `*.rego`
below a root is a module, `data.json` / `data.yaml` in `a/b/` become
`data.a.b`, and hidden files and directories are ignored. As plain files
(`opa test DIR`, `opa eval -d DIR`, OPA's loader package): every `*.rego`,
`*.json`, `*.yaml` and `*.yml` below a root is loaded, hidden ones too, each
data file's document merged at its directory's path. Either way
`*_test.rego` modules are tests, never served. Loading is pure: the result
is an immutable value that an engine is built from, so a reload can be built
off to the side and swapped in whole.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regokite import input_guard, yamldoc
from regokite.errors import Location, PolicyLoadError, display_path

DATA_FILES = ("data.json", "data.yaml", "data.yml")
DATA_SUFFIXES = (".json", ".yaml", ".yml")
_PACKAGE = re.compile(r"^[ \t]*package[ \t]+([^\s#]+)", re.MULTILINE)


@dataclass(frozen=True)
class Module:
    """One Rego source: `path` is its identity in a bundle (a file's name, or a name of its own for
    Rego held in another document, unique within the bundle); `v0` selects the Rego v0 parser for
    it; `origin` is where its first line and column sit in the file that holds it, when that file
    holds more than this module (a ConstraintTemplate's YAML)."""

    path: str
    text: str
    v0: bool = False
    origin: Location | None = None

    @property
    def is_test(self) -> bool:
        return self.path.endswith("_test.rego")

    def line(self, number: int) -> str | None:
        lines = self.text.splitlines()
        return lines[number - 1] if 0 < number <= len(lines) else None

    def placed(self, location: Location) -> Location:
        """A location in this module's text, as a place in the file that holds it."""
        if self.origin is None:
            return location
        col = location.col + self.origin.col - 1 if location.col > 0 else location.col
        return Location(self.origin.file, self.origin.line + location.line - 1, col)

    @property
    def package(self) -> str:
        """The package this module declares, as written (`a.b`, `a["b-c"]`); "" if none is found."""
        found = _PACKAGE.search(self.text)
        return found.group(1) if found else ""


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

    def placed(self, location: Location | None) -> Location | None:
        """A location in one of the bundle's modules, as a place in the file that holds it."""
        module = self.module(location.file) if location is not None else None
        return module.placed(location) if module is not None and location is not None else location


def load_bundle(
    paths: Sequence[str | os.PathLike[str]],
    *,
    v0_compatible: bool = False,
    as_bundle: bool = True,
    ignore: Sequence[str] = (),
) -> Bundle:
    """Load every root in `paths` (directories or single files) into one bundle: as bundles, or (not
    `as_bundle`) as OPA's loader loads plain files (`_PlainFiles`). `ignore` holds `--ignore`'s shell
    patterns, matched against the name of every file and directory below a root."""
    plain, bundles = ((), paths) if as_bundle else (paths, ())
    return load_paths(plain, bundles, v0_compatible=v0_compatible, ignore=ignore)


def load_paths(
    plain: Sequence[str | os.PathLike[str]],
    bundles: Sequence[str | os.PathLike[str]] = (),
    *,
    v0_compatible: bool = False,
    ignore: Sequence[str] = (),
) -> Bundle:
    """`opa eval -d PLAIN... -b BUNDLE...`: plain files and bundle roots loaded into one bundle."""
    modules: list[Module] = []
    data = _DataTree()
    roots = [(str(p), False) for p in plain] + [(str(p), True) for p in bundles]
    for given, as_bundle in roots:
        prefix, root = ((), given) if as_bundle else _split_prefix(given)
        root_path = Path(root)
        if not root_path.exists():
            raise PolicyLoadError(f"{root}: no such file or directory")
        versions = _RegoVersions.read(root_path, v0_compatible, as_bundle=as_bundle)
        for file, data_path in _walk(root_path, _BundleFiles(ignore) if as_bundle else _PlainFiles(ignore)):
            shown = display_path(file)
            if file.suffix == ".rego":
                modules.append(Module(shown, _read(file), v0=versions.is_v0(file)))
            else:
                doc = _parse_data(file, shown, first_document=not as_bundle)
                data.merge((*prefix, *data_path), doc, shown, keep_null=not as_bundle)
    modules.sort(key=lambda m: m.path)
    return Bundle(tuple(modules), data.value, tuple(root for root, _ in roots))


def _split_prefix(path: str) -> tuple[tuple[str, ...], str]:
    """OPA's `a.b:dir`: the files of `dir` loaded below `data.a.b` (a URL's `://` is no prefix)."""
    if path.find("://") == path.find(":"):
        return (), path
    head, _, rest = path.partition(":")
    return (tuple(head.split(".")), rest) if head else ((), path)


@dataclass(frozen=True)
class _RegoVersions:
    """Which Rego version parses each file: the switch, then the bundle's `.manifest`.

    OPA 1.x bundles declare `rego_version` (0 or 1) for the whole bundle and
    `file_rego_versions` (glob of a path relative to the bundle root -> 0 or 1)
    for single files, so v0 and v1 modules can live in one bundle.
    """

    root: Path
    default_v0: bool
    per_file: tuple[tuple[str, bool], ...] = ()

    @classmethod
    def read(cls, root: Path, v0_compatible: bool, *, as_bundle: bool = True) -> _RegoVersions:
        """Plain files (not `as_bundle`): OPA reads no `.manifest` then."""
        if not as_bundle:
            return cls(root, v0_compatible)
        manifest = root / ".manifest"
        if not (root.is_dir() and manifest.is_file()):
            return cls(root, v0_compatible)
        _inside(manifest, root, root.resolve())
        shown = display_path(manifest)
        try:
            doc = json.loads(_read(manifest))
        except json.JSONDecodeError as exc:
            raise PolicyLoadError(f"invalid JSON: {exc.msg}", Location(shown, exc.lineno, exc.colno), None) from None
        if not isinstance(doc, dict):
            raise PolicyLoadError(f"{shown}: the manifest must be a JSON object")
        default_v0 = v0_compatible
        if "rego_version" in doc:
            default_v0 = _version(doc["rego_version"], f"{shown}: rego_version") == 0
        files = doc.get("file_rego_versions") or {}
        if not isinstance(files, dict):
            raise PolicyLoadError(f"{shown}: file_rego_versions must map file globs to 0 or 1")
        per_file = tuple(
            (glob.lstrip("/"), _version(v, f"{shown}: file_rego_versions[{glob!r}]") == 0) for glob, v in files.items()
        )
        return cls(root, default_v0, per_file)

    def is_v0(self, file: Path) -> bool:
        relative = file.relative_to(self.root).as_posix() if self.root.is_dir() else file.name
        for pattern, v0 in self.per_file:
            if fnmatch.fnmatchcase(relative, pattern):
                return v0
        return self.default_v0


def _version(value: Any, where: str) -> int:
    if value not in (0, 1) or isinstance(value, bool):
        raise PolicyLoadError(f"{where} must be 0 or 1, got {value!r}")
    return value


@dataclass(frozen=True)
class _BundleFiles:
    """What a bundle directory holds: modules and `data.json`/`data.yaml`, hidden names skipped."""

    ignore: Sequence[str] = ()

    def enters(self, name: str) -> bool:
        return not name.startswith(".") and not _ignored(name, self.ignore)

    def loads(self, name: str) -> bool:
        return self.enters(name) and (name.endswith(".rego") or name in DATA_FILES)

    def root_file(self, file: Path) -> None:
        pass


@dataclass(frozen=True)
class _PlainFiles(_BundleFiles):
    """What OPA's loader takes without `--bundle`: every module and data file, hidden ones too."""

    def enters(self, name: str) -> bool:
        return not _ignored(name, self.ignore)

    def loads(self, name: str) -> bool:
        if name.endswith(".tar.gz") and self.enters(name):
            raise PolicyLoadError(f"{name}: bundle archives are not loaded here; unpack it and load the directory")
        return self.enters(name) and (name.endswith(".rego") or Path(name).suffix in DATA_SUFFIXES)

    def root_file(self, file: Path) -> None:
        if file.suffix != ".rego" and file.suffix not in DATA_SUFFIXES:
            raise PolicyLoadError(f"{file}: can't recognize file type (expected .rego, .json, .yaml or .yml)")


def _ignored(name: str, ignore: Sequence[str]) -> bool:
    """`--ignore`: a shell pattern on the name of a file or directory below a root (never a root itself)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in ignore)


def _walk(root: Path, select: _BundleFiles) -> Iterable[tuple[Path, tuple[str, ...]]]:
    """Yield (file, data path) for every module and data file below `root` that `select` takes,
    names sorted; a file's data path is its directory's below the root.

    Links are followed only where they stay inside the root: a Kubernetes
    ConfigMap volume is `file -> ..data/file` and `dir -> ..data/dir` with
    `..data -> ..<timestamp>/`, all inside the mount, while a `.rego` or a
    `data.yaml` linked to a file elsewhere (/etc/hostname) must not become
    policy or data. Such a link is a load error, as is a directory reached twice.
    """
    if root.is_file():
        select.root_file(root)
        if root.suffix == ".rego" or root.name in DATA_FILES or not _holds_objects(root):
            yield root, ()
        return
    real_root = root.resolve()
    seen = {real_root}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if select.enters(d))
        for name in dirnames:
            real = _inside(here / name, root, real_root)
            if real in seen:
                raise PolicyLoadError(f"{here / name}: a link to a directory already loaded ({real})")
            seen.add(real)
        data_path = here.relative_to(root).parts
        for name in sorted(filenames):
            if select.loads(name):
                _inside(here / name, root, real_root)
                yield here / name, data_path


def _inside(path: Path, root: Path, real_root: Path) -> Path:
    """`path` resolved; a load error when it leads outside the root."""
    real = path.resolve()
    if not real.is_relative_to(real_root):
        raise PolicyLoadError(f"{path}: links to {real}, outside the policy root {root}: refused")
    return real


def _holds_objects(file: Path) -> bool:
    """Whether a single YAML or JSON file given as a root holds Kubernetes objects (ConstraintTemplates,
    constraints, mutators, as `kubectl get -o yaml` or gator's inputs hold them): those are read by
    their loaders, never as a base document."""
    if file.suffix not in (".yaml", ".yml", ".json"):
        return False
    try:
        docs = list(yamldoc.load_all(_read(file)))
    except (yamldoc.YAMLError, PolicyLoadError):
        return False  # read as data: its error names the place
    return any(isinstance(d, dict) and isinstance(d.get("apiVersion"), str) and "kind" in d for d in docs)


def _read(file: Path) -> str:
    """The file's text as written: OPA reads its bytes, so a carriage return inside a raw string stays
    (Python's text mode would turn `\r\n` into `\n`, another string than OPA's)."""
    try:
        return file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyLoadError(f"{display_path(file)}: not UTF-8 text ({exc.reason})") from exc


def _parse_data(file: Path, shown: str, *, first_document: bool = False) -> Any:
    """A data file's document; `first_document`: of a YAML stream, its first (OPA's YAML reader
    reads one and ignores the rest), where a bundle's data file must hold one."""
    doc = _decode_data(file, shown, first_document)
    try:
        input_guard.check(doc, root="data")  # what no engine may be given
    except input_guard.InputRejected as exc:
        raise PolicyLoadError(f"{shown}: {exc}") from None
    return doc


def _decode_data(file: Path, shown: str, first_document: bool) -> Any:
    text = _read(file)
    if file.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            loc = Location(shown, exc.lineno, exc.colno)
            raise PolicyLoadError(f"invalid JSON: {exc.msg}", loc, _line_of(text, exc.lineno)) from exc
    try:
        return next(iter(yamldoc.load_all(text)), None) if first_document else yamldoc.load(text)
    except yamldoc.YAMLError as exc:
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
    """Merges data files into one document, refusing two files writing one path (OPA's "merge error":
    two values at one key, unless both are objects). A plain file's null (`keep_null`, an empty file) is a
    value below a root, as in OPA's loader, where a bundle's empty data file writes nothing."""

    def __init__(self) -> None:
        self.value: dict[str, Any] = {}
        self._owners: dict[tuple[str, ...], str] = {}

    def merge(self, path: tuple[str, ...], doc: Any, source: str, *, keep_null: bool = False) -> None:
        if doc is None and not keep_null:
            return
        if not path:
            if not isinstance(doc, dict):
                raise PolicyLoadError(f"{source}: document must be of type object (a data file at a root)")
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
        raise PolicyLoadError(f"{source}: merge error: {dotted} is already written by {owner}")


def fingerprint(paths: Iterable[str | None]) -> tuple:
    """Cheap change detection: names, sizes and mtimes of every file below `paths`."""
    entries = []
    for root in paths:
        if not root:
            continue
        base = Path(root)
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for f in files:
            with contextlib.suppress(OSError):
                st = f.stat()
                entries.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(entries)
