"""Real OPA as a test oracle: OPA 1.20.2's Go engine behind regokite's Engine protocol.

PyPI's `opa-golib-python-bindings` is OPA compiled as a C library and loaded
with ctypes; `scripts/test` installs it (`--no-deps --ignore-requires-python`:
its wheel says Python >= 3.14 but the library is plain ctypes). It parses
Rego v1 only, so v0 bundles stay with regorus wherever this is used.

Semantics are OPA's: the bundle is compiled when it is built (type errors and
undefined functions refuse it, as `PUT /v1/policies` does), and builtin errors
are fatal (`?strict-builtin-errors=true`) unless `strict_builtin_errors=False`.
The library always evaluates strictly, but OPA's strict evaluation is its
default one with the first builtin error returned at the end instead of the
results (topdown's Query.Iter): the default's answer is the value a builtin
registered for it (`__regokite_capture`) receives at the end of the query,
whenever the error OPA returns is a builtin's (`eval_builtin_error`,
`eval_type_error`); any other error stays the error.
`query` returns OPA's bindings only (`[{"bindings": {...}}]`): the library
gives no expression values.

The library prepares (compiles) a query once per document path, which costs
as much as compiling the bundle (about a second for `policies/`). So a rule is
read from its package's document, evaluated once per input, and evaluated on
its own only when the package as a whole fails (another rule's error): the
same answers, one preparation per package instead of one per rule.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

from regokite.bundle import Bundle, Module
from regokite.engine import UNDEFINED, rule_ref
from regokite.errors import EvaluationError, Location, PolicyLoadError

# "prepare_error: bundle activation failed: 2 errors occurred: a.rego:3: rego_type_error: ..."
_ONE_ERROR = re.compile(r"(?P<file>[^\s:][^:]*):(?P<row>\d+): (?P<code>rego_\w+|eval_\w+): (?P<message>.*)")
BUILTIN_ERRORS = ("eval_builtin_error", "eval_type_error")  # the codes of OPA's builtinErrors
_CAPTURE = "__regokite_capture"


class OracleEngine:
    """An Engine (evaluate, bind, query) on OPA's own evaluator, for tests only."""

    name = "opa-go"
    capabilities: frozenset = frozenset()  # no data.inventory view, and no kind open_engine builds

    def __init__(self, bundle: Bundle, *, strict_builtin_errors: bool = True) -> None:
        v0 = [m.path for m in bundle.modules if m.v0]
        if v0:
            raise ValueError(f"OPA's library parses Rego v1 only; v0 modules: {', '.join(v0)}")
        self.bundle = bundle
        self.strict_builtin_errors = strict_builtin_errors
        self._lock = threading.Lock()  # one ctypes handle: one call at a time
        self._opa = OpaEngine()
        self._packages: dict[str, tuple[Any, Any]] = {}  # package -> (the input, its document)
        self._captured: list[Any] = []
        self._opa.register_function(_CAPTURE, self._capture, arity=1)
        try:
            for module in bundle.modules:
                self._opa.add_policy(module.path, module.text)
            if bundle.data:
                self._opa.add_data(bundle.data)
            self._opa.eval_query("true")  # compiles the bundle, as OPA does on PUT
        except OpaError as exc:
            self._opa.close()
            raise compile_error(exc) from None

    def evaluate(self, ref: str, input: Any = UNDEFINED) -> Any:
        ref = rule_ref(ref)
        path = ref.removeprefix("data").removeprefix(".")
        package, _, rule = path.rpartition(".")
        if package and "[" not in path:
            document = self._package(package, input)
            if isinstance(document, dict):
                return document.get(rule, UNDEFINED)
        return self._document(ref, path, input)

    def _package(self, package: str, input: Any) -> Any:
        """The package's whole document for this input, or None when it fails or is no object."""
        seen = self._packages.get(package)
        if seen is not None and seen[0] is input:
            return seen[1]
        try:
            value = self._document(f"data.{package}", package, input)
        except EvaluationError:
            value = None
        self._packages[package] = (input, value)
        return value

    def _document(self, ref: str, path: str, input: Any) -> Any:
        if not self.strict_builtin_errors:
            return self._default_document(ref, input)
        with self._lock:
            try:
                return self._opa.eval_document(path, None if input is UNDEFINED else input)
            except OpaUndefinedError:
                return UNDEFINED
            except OpaError as exc:
                error = evaluation_error(ref, exc)
        raise error

    def _capture(self, value: Any) -> bool:
        self._captured.append(value)
        return True

    def _default_document(self, ref: str, input: Any) -> Any:
        """`ref` as OPA's default evaluation answers it: see the module's docstring."""
        with self._lock:
            self._captured.clear()
            try:
                self._opa.eval_query(f"{_CAPTURE}({ref})", None if input is UNDEFINED else input)
            except OpaError as exc:
                if errors_of(exc)[0]["code"] not in BUILTIN_ERRORS:
                    error = evaluation_error(ref, exc)
                    raise error from None
            return self._captured[0] if self._captured else UNDEFINED

    def bind(self, input: Any) -> _Bound:
        return _Bound(self, input)

    def query(self, query: str, input: Any = UNDEFINED) -> list[dict[str, Any]]:
        with self._lock:
            try:
                bindings = self._opa.eval_query(query, None if input is UNDEFINED else input)
            except OpaError as exc:
                error = evaluation_error(query, exc)
            else:
                return [{"bindings": b} for b in bindings]
        raise error

    def release_thread(self) -> None:
        pass

    def close(self) -> None:
        with self._lock:
            self._opa.close()


class _Bound:
    def __init__(self, engine: OracleEngine, input: Any) -> None:
        self._engine = engine
        self._input = input

    def evaluate(self, ref: str) -> Any:
        return self._engine.evaluate(ref, self._input)


def errors_of(exc: OpaError) -> list[dict[str, Any]]:
    """OPA's errors as its REST API lists them: code, message, location."""
    found = []
    for line in str(exc.message).splitlines():
        match = _ONE_ERROR.search(line)
        if match:
            location = {"file": match["file"], "row": int(match["row"]), "col": 1}  # the library gives no column
            found.append({"code": match["code"], "message": match["message"], "location": location})
    return found or [{"code": exc.code, "message": str(exc.message)}]


def compile_errors(modules: dict[str, str]) -> list[dict[str, Any]]:
    """OPA's compile errors for these modules (id -> text), as its REST API lists them; [] when they compile."""
    opa = OpaEngine()
    try:
        for path, text in modules.items():
            opa.add_policy(path, text)
        opa.eval_query("true")
    except OpaError as exc:
        return errors_of(exc)
    finally:
        opa.close()
    return []


def compile_error(exc: OpaError) -> PolicyLoadError:
    first = errors_of(exc)[0]
    where = first.get("location")
    location = Location(where["file"], where["row"], 1) if where else None
    return PolicyLoadError(f"{first['code']}: {first['message']}", location)


def evaluation_error(query: str, exc: OpaError) -> EvaluationError:
    first = errors_of(exc)[0]
    where = first.get("location")
    location = Location(where["file"], where["row"], 1) if where else None
    return EvaluationError(query, f"{first['code']}: {first['message']}", location)


def answer(engine: Any, ref: str, input: Any) -> Any:
    """What the differential tests compare: a value, "<undefined>", or "<error>" (the engines word errors
    differently)."""
    try:
        value = engine.evaluate(ref, input)
    except EvaluationError:
        return "<error>"
    return "<undefined>" if value is UNDEFINED else value


def both(
    text: str, input: Any = None, ref: str = "data.p.x", others: Sequence[str] = (), *, strict: bool = True
) -> tuple[Any, Any]:
    """The embedded engine's answer and OPA's for `ref` of one module, `p.rego`, beside the modules `others`
    (`strict`: both with strict builtin errors)."""
    from regokite.engine.embedded import EmbeddedEngine

    bundle = Bundle((Module("p.rego", text), *(Module(f"other{i}.rego", t) for i, t in enumerate(others))))
    regokite = EmbeddedEngine(bundle, strict_builtin_errors=strict)
    return answer(regokite, ref, input), answer(OracleEngine(bundle, strict_builtin_errors=strict), ref, input)
