"""The engine interface every decision goes through.

Two implementations give the same answers on the same bundle: `embedded`
(regorus, in process) and `opa` (a sidecar OPA over its REST API). Callers see
plain JSON-compatible values, and `UNDEFINED` where Rego produced nothing,
which is not the same as an empty set or `null`.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from regokite.bundle import Bundle, load_bundle, load_paths
from regokite.clusterdata.store import ReplicaStore
from regokite.engine.extensions import ExtensionOptions
from regokite.errors import PolicyLoadError, frames_released


class _Undefined:
    """Marker for a Rego reference that produced no value."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNDEFINED"


UNDEFINED: Final = _Undefined()


def first_value(results: list[dict[str, Any]]) -> Any:
    """The value of a query's first expression in its first result (OPA's result shape), or UNDEFINED."""
    if not results:
        return UNDEFINED
    return results[0]["expressions"][0]["value"]


class Capability(enum.Enum):
    """What an engine can do or needs beyond evaluating: callers ask these, never an engine's name."""

    INVENTORY = "inventory"  # follows replicated data as Gatekeeper's `data.inventory` view too
    IN_PROCESS = "in-process"  # evaluates here, holding the GIL: more cores take worker processes, each its own
    SIDECAR = "sidecar"  # evaluates in a server beside this process, which must be deployed and reachable
    EXTERNAL_DATA = "external-data"  # has Gatekeeper's external_data builtin (a Python extension)
    COVERAGE = "coverage"  # reports what evaluations covered, as OPA's cover tracer (engine/coverage.py)


KINDS: Final[dict[str, frozenset[Capability]]] = {
    "embedded": frozenset({Capability.INVENTORY, Capability.IN_PROCESS, Capability.EXTERNAL_DATA, Capability.COVERAGE}),
    "opa": frozenset({Capability.SIDECAR}),
}


def capabilities_of(kind: str) -> frozenset[Capability]:
    """What an engine of `kind` can do, before one is built (a setting, a manifest)."""
    if kind not in KINDS:
        raise ValueError(f"unknown engine {kind!r}: expected {' or '.join(map(repr, KINDS))}")
    return KINDS[kind]


OPA_URL: Final = "http://127.0.0.1:8181"  # a sidecar OPA's address unless told


@dataclass(frozen=True)
class EngineSettings:
    """What every engine of a process is built from, read once from its flags and passed whole to
    `open_engine` (and to whatever loads policies for it), so no caller carries its parts apart."""

    kind: str = "embedded"  # --engine: one of KINDS
    opa_url: str = OPA_URL  # --opa-url: where a sidecar engine listens
    v0_compatible: bool = False  # --v0-compatible: how the policy files are parsed
    extensions: ExtensionOptions = field(default_factory=ExtensionOptions)  # the embedded engine's extra builtins
    # --strict-builtin-errors: a builtin's error is the evaluation's error; by default the call is
    # undefined, as OPA's default (`opa eval`, its REST API, Gatekeeper), and reported (builtin_errors)
    strict_builtin_errors: bool = False

    def __post_init__(self) -> None:
        capabilities_of(self.kind)  # an unknown kind is refused here, before anything is loaded

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the engine built from these settings can do (callers ask this, never `kind`)."""
        return KINDS[self.kind]

    def load(
        self, paths: Sequence[str | os.PathLike[str]], *, as_bundle: bool = True, ignore: Sequence[str] = ()
    ) -> Bundle:
        """The policy files at `paths`, parsed as these settings say (tests included): as bundles, or
        (not `as_bundle`) as OPA's loader reads plain files (`opa test DIR`, `opa eval -d DIR`)."""
        return load_bundle(paths, v0_compatible=self.v0_compatible, as_bundle=as_bundle, ignore=ignore)

    def load_files(
        self, plain: Sequence[str | os.PathLike[str]], bundles: Sequence[str | os.PathLike[str]] = ()
    ) -> Bundle:
        """`opa eval -d PLAIN -b BUNDLE`: plain files as OPA's loader reads them, and bundle roots (a
        `.tar.gz` as `opa build` makes it, its roots checked; a signed one is refused: no keys here)."""
        from regokite.bundles.archive import combine, read_bundle_path

        archives = [str(b) for b in bundles if str(b).endswith(".tar.gz")]
        base = load_paths(plain, [b for b in bundles if str(b) not in archives], v0_compatible=self.v0_compatible)
        if not archives:
            return base
        return combine([read_bundle_path(a, a, v0_compatible=self.v0_compatible) for a in archives], base)

    def checking(self) -> EngineSettings:
        """These settings for the embedded engine: a load check before policies are served, which
        reaches no sidecar (a ConfigMap's modules, a ConstraintTemplate's Rego)."""
        return replace(self, kind="embedded")


class Bound(Protocol):
    def evaluate(self, ref: str) -> Any: ...


class Engine(Protocol):
    """Evaluates references and queries against one loaded bundle."""

    name: str
    capabilities: frozenset[Capability]
    bundle: Bundle
    strict_builtin_errors: bool  # a builtin's error is an error (else the call is undefined, as OPA's default)

    def evaluate(self, ref: str, input: Any = UNDEFINED) -> Any:
        """Value of `ref` (e.g. `data.admission.x.deny`), or UNDEFINED."""
        ...

    def bind(self, input: Any) -> Bound:
        """An evaluator with `input` converted once, for several refs in a row."""
        ...

    def query(self, query: str, input: Any = UNDEFINED) -> list[dict[str, Any]]:
        """Results of an ad-hoc query, shaped like `opa eval`'s `result` array."""
        ...

    def release_thread(self) -> None:
        """Drop what the calling thread holds; the engine stays usable elsewhere."""
        ...

    def follow(self, store: ReplicaStore, *, stepped: bool = False) -> None:
        """Evaluate with `store`'s replicated objects in `data`, kept current incrementally
        (`stepped`: whole loads only by `load_replica`, outside evaluations)."""
        ...

    def loaded_generation(self) -> int | None:
        """The replica generation the calling thread evaluates on, whole (0: none yet); None when
        evaluations load the replica themselves."""
        ...

    def load_replica(self) -> Iterator[None]:
        """Catch the calling thread's data up with the followed store, yielding between steps."""
        ...

    def close(self) -> None: ...


def rule_ref(path: str) -> str:
    """Normalise `a/b/c`, `a.b.c` or `data.a.b.c` to `data.a.b.c`."""
    path = path.strip().strip("/")
    if "/" in path:
        path = ".".join(p for p in path.split("/") if p)
    if path == "data" or path.startswith("data."):
        return path
    return f"data.{path}" if path else "data"


@frames_released  # a refused bundle's check engines go on this thread
def open_engine(bundle: Bundle, settings: EngineSettings | None = None, *, coverage: Any = None) -> Engine:
    """Build the engine `settings` choose (default: the embedded one) for `bundle`: the one place an
    engine is built. The settings' extensions configure the embedded engine's extension builtins (a
    sidecar OPA has its own); a builtin's error is undefined unless `strict_builtin_errors`. `coverage`
    (a coverage.CoverageLog) gathers what the evaluations cover, where the engine has Capability.COVERAGE."""
    settings = settings or EngineSettings()
    if coverage is not None and Capability.COVERAGE not in settings.capabilities:
        raise PolicyLoadError(f"the {settings.kind} engine reports no coverage: use the embedded engine")
    if settings.kind == "embedded":
        from regokite.engine.embedded import EmbeddedEngine

        strict = settings.strict_builtin_errors
        return EmbeddedEngine(bundle, settings.extensions, strict_builtin_errors=strict, coverage=coverage)
    if settings.kind == "opa":
        from regokite.engine.opa import OpaEngine

        return OpaEngine(bundle, settings.opa_url, strict_builtin_errors=settings.strict_builtin_errors)
    raise AssertionError(f"engine {settings.kind!r} has capabilities but no constructor in open_engine")
