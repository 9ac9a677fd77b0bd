"""Bundle archives as `opa build` writes them, read as OPA reads them (bundle/bundle.go).

A `.tar.gz` of `/.manifest` (revision, roots, rego_version,
file_rego_versions, metadata), `data.json` / `data.yaml` documents at their
directories' paths, `*.rego` modules and `/.signatures.json`; other files are
carried (and signed) but not loaded. A bundle may write only below its roots:
its manifest's roots may not overlap one another, every module's package and
every data path must lie below one, and two bundles served together may not
have overlapping roots (OPA's activation refuses it). A bundle directory
(`--bundle DIR`) is read by the same rules.
"""

from __future__ import annotations

import fnmatch
import io
import json
import re
import tarfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regokite import input_guard, yamldoc
from regokite.bundle import Bundle, Module
from regokite.bundles.config import Key, Signing
from regokite.bundles.signing import SIGNATURES_FILE, verify_bundle
from regokite.errors import RegokiteError

MANIFEST = ".manifest"
DATA_FILES = ("data.json", "data.yaml")
_SEGMENT = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\["((?:[^"\\]|\\.)*)"\]')


class BundleError(RegokiteError):
    """A bundle that OPA would not activate: named, with what is wrong in it."""


@dataclass(frozen=True)
class Manifest:
    revision: str = ""
    roots: tuple[str, ...] = ("",)
    rego_version: int | None = None
    file_rego_versions: Mapping[str, int] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedBundle:
    """One named bundle, verified and checked against its roots; `bundle` holds its modules and data."""

    name: str
    manifest: Manifest
    bundle: Bundle
    size: int = 0


def read_archive(
    name: str,
    blob: bytes,
    *,
    signing: Signing | None = None,
    keys: Mapping[str, Key] | None = None,
    v0_compatible: bool = False,
    size_limit: int = 1024**3,
    verified: bool = False,
) -> LoadedBundle:
    """A `.tar.gz` bundle's bytes, verified when `signing` is configured (or the bundle is signed), unless
    `verified` already (an archive the bundle plugin activated)."""
    files = _tar_files(name, blob, size_limit)
    if not verified:
        verify_bundle(files, signing, keys or {}, name=name)
    return _loaded(name, files, v0_compatible, len(blob))


def read_bundle_path(
    name: str,
    path: str | Path,
    *,
    signing: Signing | None = None,
    keys: Mapping[str, Key] | None = None,
    v0_compatible: bool = False,
) -> LoadedBundle:
    """`--bundle PATH`: a `.tar.gz` file or a bundle directory (hidden files other than the manifest
    and signatures skipped, as OPA's directory loader does)."""
    root = Path(path)
    if root.is_file():
        return read_archive(name, root.read_bytes(), signing=signing, keys=keys, v0_compatible=v0_compatible)
    if not root.is_dir():
        raise BundleError(f"--bundle {path}: no such file or directory")
    files: dict[str, bytes] = {}
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        relative = file.relative_to(root).as_posix()
        hidden = any(part.startswith(".") for part in relative.split("/"))
        if not hidden or relative in (MANIFEST, SIGNATURES_FILE):
            files[relative] = file.read_bytes()
    verify_bundle(files, signing, keys or {}, name=name)
    return _loaded(name, files, v0_compatible, sum(map(len, files.values())))


def _tar_files(name: str, blob: bytes, size_limit: int) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(_gunzip(name, blob, size_limit)), mode="r:") as tar:
            for member in tar:
                if member.isdir():
                    continue
                path = _member_path(name, member.name)
                if not member.isfile():
                    raise BundleError(f"bundle {name}: {member.name}: links and special files are not loaded")
                if member.size > size_limit:
                    raise BundleError(f"bundle {name}: {path}: larger than the size limit of {size_limit} bytes")
                if path in files:
                    raise BundleError(f"bundle {name}: {path} is in the archive twice")
                extracted = tar.extractfile(member)
                files[path] = extracted.read() if extracted is not None else b""
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise BundleError(f"bundle {name}: not a gzipped tarball: {exc}") from None
    return files


def _gunzip(name: str, blob: bytes, size_limit: int) -> bytes:
    """The whole archive unzipped, its checksum checked (a truncated or corrupt download is refused, not read
    up to its damage), and never more than `size_limit` bytes (a gzip bomb stops there)."""
    inflate = zlib.decompressobj(wbits=31)
    try:
        out = inflate.decompress(blob, size_limit + 1)
        if len(out) > size_limit:
            raise BundleError(f"bundle {name}: larger than the size limit of {size_limit} bytes")
        if not inflate.eof:
            raise BundleError(f"bundle {name}: not a gzipped tarball: truncated")
    except zlib.error as exc:
        raise BundleError(f"bundle {name}: not a gzipped tarball: {exc}") from None
    return out


def _member_path(name: str, raw: str) -> str:
    """A member's path in the bundle: `opa build` writes `/data.json`; `./` and `/` prefixes go."""
    path = raw
    while path.startswith(("./", "/")):
        path = path[1:] if path.startswith("/") else path[2:]
    if not path or ".." in path.split("/"):
        raise BundleError(f"bundle {name}: {raw!r}: not a path inside the bundle")
    return path


def _loaded(name: str, files: Mapping[str, bytes], v0_compatible: bool, size: int) -> LoadedBundle:
    """Delta bundles, Wasm modules and plans are refused: served without them, the bundle would decide
    otherwise than in OPA (a delta bundle would replace the policies with nothing)."""
    for path in files:
        base = path.rsplit("/", 1)[-1]
        if path == "patch.json":
            raise BundleError(f"bundle {name}: delta bundles (patch.json) are not supported")
        if base in ("policy.wasm", "plan.json"):
            raise BundleError(f"bundle {name}: {path}: Wasm modules and plans are not served")
    manifest = _manifest(name, files.get(MANIFEST))
    modules: list[Module] = []
    data: dict[str, Any] = {}
    for path, blob in sorted(files.items()):
        base = path.rsplit("/", 1)[-1]
        where = f"{name}/{path}"
        if path.endswith(".rego"):
            modules.append(Module(where, _text(where, blob), v0=_is_v0(manifest, path, v0_compatible)))
        elif base in DATA_FILES:
            directory = tuple(path.split("/")[:-1])
            _insert(data, directory, _document(where, blob), where)
    _check_roots(name, manifest.roots, modules, data)
    bundle = Bundle(tuple(sorted(modules, key=lambda m: m.path)), data, (name,))
    return LoadedBundle(name, manifest, bundle, size)


def _text(where: str, blob: bytes) -> str:
    try:
        return blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError(f"{where}: not UTF-8 text ({exc.reason})") from None


def _manifest(name: str, blob: bytes | None) -> Manifest:
    if blob is None:
        return Manifest()
    try:
        doc = json.loads(blob)
    except ValueError as exc:
        raise BundleError(f"bundle {name}: bundle load failed on manifest decode: {exc}") from None
    if not isinstance(doc, dict):
        raise BundleError(f"bundle {name}: .manifest must be a JSON object")
    roots = doc.get("roots", [""])
    if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
        raise BundleError(f"bundle {name}: .manifest roots must be a list of strings")
    revision = doc.get("revision", "")
    if not isinstance(revision, str):
        raise BundleError(f"bundle {name}: .manifest revision must be a string")
    version = doc.get("rego_version")
    files = doc.get("file_rego_versions") or {}
    for where, v in (("rego_version", version), *((f"file_rego_versions[{k!r}]", v) for k, v in files.items())):
        if v is not None and (v not in (0, 1) or isinstance(v, bool)):
            raise BundleError(f"bundle {name}: .manifest {where} must be 0 or 1, got {v!r}")
    metadata = doc.get("metadata") or {}
    return Manifest(revision, tuple(r.strip("/") for r in roots), version, files, metadata)


def _is_v0(manifest: Manifest, path: str, v0_compatible: bool) -> bool:
    for glob, version in manifest.file_rego_versions.items():
        if fnmatch.fnmatchcase(path, glob.lstrip("/")):
            return version == 0
    return manifest.rego_version == 0 if manifest.rego_version is not None else v0_compatible


def _document(where: str, blob: bytes) -> Any:
    text = _text(where, blob)
    try:
        doc = yamldoc.load(text) if where.endswith(".yaml") else json.loads(text)
    except (ValueError, yamldoc.YAMLError) as exc:
        raise BundleError(f"{where}: bundle load failed: {exc}") from None
    try:
        input_guard.check(doc, root="data")
    except input_guard.InputRejected as exc:
        raise BundleError(f"{where}: {exc}") from None
    return doc


def _insert(data: dict[str, Any], path: tuple[str, ...], doc: Any, where: str) -> None:
    if doc is None:
        return
    if not path:
        if not isinstance(doc, dict):
            raise BundleError(f"{where}: root value must be object")
        _merge(data, doc, (), where)
        return
    _merge(data, {path[0]: _nest(path[1:], doc)}, (), where)


def _nest(path: tuple[str, ...], doc: Any) -> Any:
    for key in reversed(path):
        doc = {key: doc}
    return doc


def _merge(into: dict[str, Any], doc: dict[str, Any], at: tuple[str, ...], where: str) -> None:
    for key, value in doc.items():
        if key in into and isinstance(into[key], dict) and isinstance(value, dict):
            _merge(into[key], value, (*at, key), where)
        elif key in into:
            raise BundleError(f"{where}: merge error: data.{'.'.join((*at, key))} is written twice")
        else:
            into[key] = value


def package_path(package: str) -> tuple[str, ...]:
    """`a.b["c-d"]` -> ("a", "b", "c-d"): a package as the path roots are compared with."""
    return tuple(
        m.group(1) if m.group(1) is not None else json.loads(f'"{m.group(2)}"') for m in _SEGMENT.finditer(package)
    )


def _contains(root: str, path: Sequence[str]) -> bool:
    segments = root.split("/")
    return root == "" or (len(segments) <= len(path) and tuple(path[: len(segments)]) == tuple(segments))


def roots_overlap(a: str, b: str) -> bool:
    return _contains(a, b.split("/")) or _contains(b, a.split("/"))


def _check_roots(name: str, roots: Sequence[str], modules: Sequence[Module], data: dict[str, Any]) -> None:
    for i, a in enumerate(roots):
        for b in roots[i + 1 :]:
            if roots_overlap(a, b):
                raise BundleError(f"bundle {name}: manifest has overlapped roots: '{a}' and '{b}'")
    for module in modules:
        if not any(_contains(root, package_path(module.package)) for root in roots):
            raise BundleError(
                f"bundle {name}: manifest roots {list(roots)} do not permit 'package {module.package}' in module"
                f" '{module.path}'"
            )
    _check_data(name, roots, data, ())


def _check_data(name: str, roots: Sequence[str], node: Any, at: tuple[str, ...]) -> None:
    """OPA's walk: a path below a root is permitted; an object above one is walked into; else refused."""
    if at and any(_contains(root, at) for root in roots):
        return
    if isinstance(node, dict) and (not at or any(_contains("/".join(at), r.split("/")) for r in roots)):
        for key, value in node.items():
            _check_data(name, roots, value, (*at, key))
        return
    raise BundleError(
        f"bundle {name}: manifest roots {list(roots)} do not permit data at path '/{'/'.join(at)}'"
        " (hint: check bundle directory structure)"
    )


def combine(bundles: Sequence[LoadedBundle], base: Bundle | None = None) -> Bundle:
    """Bundles served together (and `base`, the policy directories' set): roots may not overlap."""
    for i, a in enumerate(bundles):
        for b in bundles[i + 1 :]:
            if any(roots_overlap(x, y) for x in a.manifest.roots for y in b.manifest.roots):
                raise BundleError(f"detected overlapping roots in bundle manifests of {a.name!r} and {b.name!r}")
    modules = list(base.modules) if base is not None else []
    data: dict[str, Any] = json.loads(json.dumps(base.data)) if base is not None else {}
    for loaded in bundles:
        modules += loaded.bundle.modules
        try:
            _merge(data, loaded.bundle.data, (), f"bundle {loaded.name}")
        except BundleError as exc:
            raise BundleError(f"{exc} (by --policies and a bundle)") from None
    roots = (*(base.roots if base is not None else ()), *(b.name for b in bundles))
    return Bundle(tuple(modules), data, roots)


def revisions(bundles: Sequence[LoadedBundle]) -> dict[str, str]:
    return {b.name: b.manifest.revision for b in bundles}
