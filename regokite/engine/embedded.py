"""The embedded engine: regorus in this process.

A regorus engine object is pinned to the thread that created it (using or
even dropping it on another thread panics) and holds the GIL while it
evaluates. So each thread prepares its own engine from the bundle once, and
every evaluation runs on a cheap clone of it (about a microsecond), which
keeps one request's input from leaking into the next.

Prepared engines live in a module-level thread-local table rather than on the
EmbeddedEngine: when an EmbeddedEngine is garbage-collected, a per-instance
threading.local would drop every thread's engine on the collecting thread.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, NamedTuple, TypeVar

import regorus

from regokite import input_guard, jsoncodec
from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import Change, ReplicaStore, check_replica_root, creations
from regokite.engine import KINDS, UNDEFINED, builtin_errors, first_value, object_keys, rewrite, rule_ref
from regokite.engine.capabilities import check_arguments, check_builtins, check_data_paths
from regokite.engine.catalog import extension_only
from regokite.engine.coverage import DONE, ENTER, MARKER, CoverageLog
from regokite.engine.extensions import ExtensionOptions, install, provided
from regokite.engine.extensions.common import Refusal
from regokite.engine.lenient import ROUNDS, Places, Variant, undefined_calls
from regokite.engine.rewrite import Columns, check_shadowing
from regokite.errors import (
    EvaluationError,
    EvaluationRefused,
    Location,
    PolicyLoadError,
    engine_diagnostic,
    frames_released,
)
from regokite.ops import logging as ops_logging

_UNDEFINED_JSON = '"<undefined>"'
_REFUSAL = f"Python error: {Refusal.__name__}: "  # how regorus words an extension's Refusal

# regorus captures a Rust backtrace for every evaluation error when
# RUST_BACKTRACE is set, which costs milliseconds on the fail-closed path and
# buries the message; panics keep their backtraces.
os.environ.setdefault("RUST_LIB_BACKTRACE", "0")


T = TypeVar("T")

_prepared = threading.local()  # .engines: {id(EmbeddedEngine): _Prepared}


# A load in steps (`EmbeddedEngine.load_replica`) merges about this much JSON text a step: about
# 14,000 small ConfigMaps, 0.2-0.6 s of regorus holding the GIL on this machine (bench.replica_load).
# Larger new objects than this, all at once, wait for such a load rather than merge in an evaluation,
# as do more than these many changes (a step) or, in an evaluation, more than REVIEW_MERGES.
LOAD_STEP_BYTES = 4 * 2**20
LOAD_STEP_MERGES = 1000
REVIEW_MERGES = 100


class _Prepared:
    """A thread's prepared engine, the engine holding its data (and no modules) it was cloned from, the
    variant of the modules it holds, and the replica generation its data holds."""

    __slots__ = ("data", "engine", "generation", "load_failure", "loading", "owner", "reloaded_at", "variant")

    def __init__(self, owner: weakref.ref, data: regorus.Engine, engine: regorus.Engine, variant: Variant) -> None:
        self.owner, self.data, self.engine, self.variant, self.generation = owner, data, engine, variant, 0
        self.reloaded_at = time.monotonic()
        self.loading = False  # a load in steps is under way (load_replica)
        self.load_failure: str | None = None  # the last load in steps failed: evaluations fail closed


def _thread_table() -> dict[int, _Prepared]:
    table = getattr(_prepared, "engines", None)
    if table is None:
        table = _prepared.engines = {}
    return table


class EmbeddedEngine:
    name = "embedded"
    capabilities = KINDS[name]

    def __init__(
        self,
        bundle: Bundle,
        options: ExtensionOptions | None = None,
        *,
        strict_builtin_errors: bool = True,
        lenient: frozenset[Location] = frozenset(),
        coverage: CoverageLog | None = None,
    ) -> None:
        """`strict_builtin_errors`: a builtin's error is the evaluation's error; otherwise the call is
        undefined, as OPA's default (lenient.py). The engine's own default is strict, as the OPA oracle
        the tests compare it with; `open_engine` passes the process's setting (OPA's default).
        `lenient`: builtin calls made undefined where they err from the start (the rewrite's tests).
        `coverage`: what every evaluation covers is gathered there (`regokite test --coverage`)."""
        self.bundle = bundle
        self._coverage = coverage
        self.options = options or ExtensionOptions()
        self.strict_builtin_errors = strict_builtin_errors
        self._prints = PrintLog(bundle)
        self._replica: ReplicaStore | None = None
        self._stepped = False  # the replica is loaded whole only by load_replica, never in an evaluation
        modules, read_as_opa = rewrite.rewrite(bundle.modules, lenient=lenient, mockable=extension_only(self.options))
        rewritten = replace(bundle, modules=modules)
        error = None
        try:
            ast = rewrite.parsed(modules)  # the rewrite's last parse, most often
            if ast is None:
                parser = rewrite.new_engine()
                add_modules(parser, modules)  # raises regorus's error, with the v0 hint
                ast = json.loads(parser.get_ast_as_json())
            check_builtins(rewritten, ast, provided(self.options))
            check_arguments(rewritten, ast)
            check_shadowing(rewritten, ast)
            check_data_paths(rewritten, ast)
        except PolicyLoadError as exc:
            error = rewrite.located(exc, read_as_opa, bundle.modules)  # raised below, outside the handler
        if error is not None:
            raise error
        if coverage is not None:  # after the checks: they know no MARKER
            modules, read_as_opa = coverage.instrument(modules, read_as_opa)
        self._lenient = Places(Variant(lenient, modules, read_as_opa), self._variant)
        self._base()  # prepare now, so a bad bundle fails here and not on first use

    def _variant(self, lenient: frozenset[Location]) -> Variant:
        """The modules with the builtin calls at `lenient` undefined where they err (checked at load
        already: the lenient rewrite adds calls of a builtin the engine has)."""
        modules, read_as_opa = rewrite.rewrite(
            self.bundle.modules, lenient=lenient, mockable=extension_only(self.options)
        )
        if self._coverage is not None:
            modules, read_as_opa = self._coverage.instrument(modules, read_as_opa)
        return Variant(lenient, modules, read_as_opa)

    def follow(self, store: ReplicaStore, *, stepped: bool = False) -> None:
        """Evaluate with `store`'s objects in `data`.

        Each thread's engine catches up before its next evaluation, all
        pending changes in one step: only new objects merge in (`add_data`,
        no re-preparing); a change or a removal reloads the data (regorus can
        add to its data but not edit it), still without recompiling, at most
        once per `store.max_lag` seconds (about 0.25 s of work per 10,000
        objects): meanwhile evaluations see the replica as it was.

        `stepped`: evaluations only merge new objects (up to LOAD_STEP_BYTES);
        the caller loads the rest with `load_replica`, outside evaluations,
        and asks `loaded_generation` whether a complete load is in.
        """
        check_replica_root(self.bundle.data, store)
        self._replica = store
        self._stepped = stepped

    def loaded_generation(self) -> int | None:
        """The replica generation the calling thread's engine holds whole (0: none yet); None when
        evaluations load the replica themselves (not `stepped`), so none ever runs without it."""
        if self._replica is None or not self._stepped:
            return None
        entry = _thread_table().get(id(self))
        return entry.generation if entry is not None and entry.owner() is self else 0

    def load_replica(self) -> Iterator[None]:
        """Bring the calling thread's engine up to the followed store, yielding between steps.

        New objects merge in one step (up to a step's size); otherwise (a
        change, a removal, the first load), at most once per `store.max_lag`
        seconds, a copy of the engine without data takes the whole replica a
        piece (LOAD_STEP_BYTES) a step, and replaces the engine's data only
        once complete: evaluations between the steps see the last complete
        load, never a part of one. Run it to its end or close it on this
        thread (it holds an engine).
        """
        store = self._replica
        if store is None:
            return
        entry = self._entry()
        if entry.loading or entry.generation == store.generation:
            return
        changes = store.changes_since(entry.generation)
        if _merge_creations(entry, store, changes, LOAD_STEP_MERGES) or not _reload_due(entry, store, changes):
            return
        entry.loading = True
        try:
            yield from self._load_steps(entry, store)
        finally:
            entry.loading = False

    def _load_steps(self, entry: _Prepared, store: ReplicaStore) -> Iterator[None]:
        fresh = entry.data.clone()  # the extensions shared; the data its own
        fresh.clear_data()
        if self.bundle.data:
            fresh.add_data(self.bundle.data)
        generation, pieces = store.pieces(LOAD_STEP_BYTES)
        for piece in pieces:
            yield
            _, failure = attempt(_add_data, fresh, store.loadable(store.rooted(piece)))
            if failure is not None:
                if entry.load_failure is None:
                    log.error("replica load failed; evaluations fail until a load completes", extra={"error": failure})
                entry.load_failure = failure
                return
        entry.data, entry.generation, entry.load_failure = fresh, generation, None
        entry.engine = self._compiled(fresh, entry.variant)

    def _prepare(self) -> _Prepared:
        data = rewrite.new_engine()
        data.set_gather_prints(True)  # print() output goes to the log (PrintLog), never raw to stderr
        install(data, self.options)  # clones share the extension callables
        if self._coverage is not None:
            data.add_extension(MARKER, 2, self._coverage.exited)
            data.add_extension(ENTER, 2, self._coverage.entered)
            data.add_extension(DONE, 1, self._coverage.done)
        if self.bundle.data:
            data.add_data(self.bundle.data)
        variant = self._lenient.current
        return _Prepared(weakref.ref(self), data, self._compiled(data, variant), variant)

    def _compiled(self, data: regorus.Engine, variant: Variant) -> regorus.Engine:
        """A clone of `data` (its data shared, not loaded again) holding `variant`'s modules, compiled.

        The first evaluation compiles the modules. Doing it here, on the engine
        every evaluation clones, makes clones start compiled: about 0.09 ms
        instead of 1 ms per evaluation of the policies/ bundle. It also does the
        work regorus redoes after the data changed (_settle).
        """
        engine = data.clone()
        add_modules(engine, variant.modules)
        _, failure = attempt(engine.eval_query, "true")
        if failure is not None:
            message, location = engine_diagnostic(failure)
            location = variant.columns.original(location)
            module = self.bundle.module(location.file) if location else None
            raise PolicyLoadError(message, location, module.line(location.line) if module and location else None)
        return engine

    def _entry(self) -> _Prepared:
        table = _thread_table()
        entry = table.get(id(self))
        if entry is None or entry.owner() is not self:
            for key in [k for k, e in table.items() if e.owner() is None]:
                del table[key]  # engines of collected EmbeddedEngines, dropped on their own thread
            entry = table[id(self)] = self._prepare()
        return entry

    def _base(self) -> tuple[Variant, regorus.Engine]:
        """The calling thread's engine, caught up with the replica and with the lenient places found."""
        entry = self._entry()
        if self._replica is not None and entry.generation != self._replica.generation:
            self._catch_up(entry, self._replica)
            if entry.load_failure is not None:  # the data changed and could not be loaded: decide on none of it
                failure = f"the cluster data could not be loaded into the engine: {entry.load_failure}"
                raise EvaluationRefused("data", failure)
        variant = self._lenient.current
        if entry.variant is not variant:  # places found since (here or on another thread): same data, new modules
            entry.engine, entry.variant = self._compiled(entry.data, variant), variant
        return variant, entry.engine

    def _catch_up(self, entry: _Prepared, store: ReplicaStore) -> None:
        changes = store.changes_since(entry.generation)
        if _merge_creations(entry, store, changes, REVIEW_MERGES if self._stepped else None) or self._stepped:
            return  # new objects merged; or stepped: a whole load is load_replica's to do, outside evaluations
        if not _reload_due(entry, store, changes):
            return
        data = entry.data
        data.clear_data()
        if self.bundle.data:
            data.add_data(self.bundle.data)
        entry.generation = store.full(lambda document: _add_data(data, store.loadable(store.rooted(document))))
        entry.engine = self._compiled(data, entry.variant)

    def _fresh(self, input: Any) -> tuple[Variant, regorus.Engine]:
        variant, base = self._base()
        engine = base.clone()
        if self._coverage is not None:
            engine.set_enable_coverage(True)
        if input is not UNDEFINED:
            engine.set_input(input)
        return variant, engine

    @frames_released
    def evaluate(self, ref: str, input: Any = UNDEFINED) -> Any:
        return self.bind(input).evaluate(ref)

    @frames_released
    def bind(self, input: Any) -> _Bound:
        if input is not UNDEFINED:
            input_guard.check(input)  # regorus segfaults or silently rounds on what it refuses
        return _Bound(self, input)

    @frames_released
    def query(self, query: str, input: Any = UNDEFINED) -> list[dict[str, Any]]:
        return self.bind(input).query(query)

    def answered(self, bound: _Bound, query: str, run: Callable[[regorus.Engine, Columns], T | _Failed]) -> T:
        """`run` on `bound`'s engine; where a builtin call errs and the engine is not strict, again on
        the variant with that call undefined where it errs (lenient.py), as often as new places err.
        Every builtin error made undefined is reported (builtin_errors); what a failed attempt printed
        goes with its clone (OPA evaluates once, and prints once)."""
        found: list[tuple[Location, str]] = []
        builtin_errors.drain()
        for _ in range(ROUNDS):
            answer = run(bound.engine, bound.variant.columns)
            if self._coverage is not None:
                self._coverage.gather(bound.engine)
            if not isinstance(answer, _Failed):
                self._report(bound.variant, found)
                return answer
            refused = _REFUSAL in answer.message  # OPA answers where this engine cannot: never undefined
            strict = self.strict_builtin_errors or refused
            if strict or self._lenient.covering(*answer, bound.variant) is None:
                self._prints.drain(bound.engine)  # what it printed before the error that stands
                self._report(bound.variant, [f for f in found if f[0] != answer.location])
                error = EvaluationRefused if refused else EvaluationError
                raise error(query, answer.message, self.bundle.placed(answer.location))
            found.append((answer.location, answer.message))  # type: ignore[arg-type]  # covering: a location
            bound.variant, bound.engine = self._fresh(bound.input)
        raise EvaluationError(query, f"more than {ROUNDS} places where a builtin erred in one evaluation")

    def _report(self, variant: Variant, found: list[tuple[Location, str]]) -> None:
        swallowed = builtin_errors.drain()
        if found or swallowed:
            for call in undefined_calls(variant, found, swallowed, self._prints.packages, self.bundle.placed):
                builtin_errors.report(call)

    def release_thread(self) -> None:
        """Drop the calling thread's prepared engine (it can never be used elsewhere)."""
        _thread_table().pop(id(self), None)

    def close(self) -> None:
        """Drop the calling thread's prepared engine; other threads' go with their threads."""
        self.release_thread()


class _Bound:
    """A clone with the input already converted: converting a large
    AdmissionReview costs more than evaluating a small policy. Where a builtin
    errs (not strict), the clone of the variant making it undefined there."""

    def __init__(self, owner: EmbeddedEngine, input: Any) -> None:
        self._owner = owner
        self.input = input
        self.variant, self.engine = owner._fresh(input)

    @frames_released
    def evaluate(self, ref: str) -> Any:
        ref, prints = rule_ref(ref), self._owner._prints
        return self._owner.answered(self, ref, lambda engine, columns: _evaluate(engine, ref, prints, columns))

    @frames_released
    def query(self, query: str) -> list[dict[str, Any]]:
        try:
            read = rewrite.query(query)
        except ValueError as exc:  # a template string OPA would not read either
            raise EvaluationError(query, str(exc)) from None
        prints = self._owner._prints
        return self._owner.answered(self, query, lambda engine, columns: _query(engine, query, prints, columns, read))


class PrintLog:
    """Turns what policies print() into log lines: one JSON line per print, never raw stderr.

    regorus gathers prints as `file:line: text`; each becomes a `policy print`
    line on the `regokite.policy.print` logger with the package of that file,
    the location, the text (newlines escaped by the formatter, so a printed
    object name cannot forge a line) and the log context (the review's uid).
    """

    def __init__(self, bundle: Bundle) -> None:
        self.packages = {m.path: m.package for m in bundle.modules}

    def drain(self, engine: regorus.Engine) -> None:
        for printed in engine.take_prints():
            found = _PRINTED.match(printed)
            file, line, text = found.groups() if found else ("", "", printed)
            print_log.info(
                "policy print",
                extra={
                    **ops_logging.context(),
                    "policy": self.packages.get(file, ""),
                    "location": f"{file}:{line}" if found else "",
                    "output": text,
                },
            )


_PRINTED = re.compile(r"(.+?):(\d+): (.*)", re.DOTALL)
print_log = logging.getLogger("regokite.policy.print")
log = logging.getLogger("regokite.engine")


class _Failed(NamedTuple):
    """An evaluation's error as regorus gave it, located in the modules as written."""

    message: str
    location: Location | None


def _evaluate(engine: regorus.Engine, ref: str, prints: PrintLog, columns: Columns) -> Any:
    raw, failure = _call(engine.eval_rule_as_json, ref)
    if failure is not None:  # its prints are logged if the error stands (EmbeddedEngine.answered)
        message, location = failure
        if "not a valid rule path" not in message:
            return _Failed(message, columns.original(location))
        results = _query(engine, ref, prints, columns)  # a package or a base document
        return results if isinstance(results, _Failed) else first_value(results)
    prints.drain(engine)
    # regorus's marker for undefined; a rule whose value is that very string
    # is not worth a second query on every undefined decision.
    if raw == _UNDEFINED_JSON:
        return UNDEFINED
    return _as_opa_writes(ref, raw, jsoncodec.loads(raw))


def _query(
    engine: regorus.Engine, query: str, prints: PrintLog, columns: Columns, read: str | None = None
) -> list[dict[str, Any]] | _Failed:
    """`read`: the query as regorus reads it (rewrite.query), where not as written (`query`, for errors)."""
    raw, failure = _call(engine.eval_query_as_json, read or query)
    if failure is not None:
        message, location = failure
        return _Failed(message, columns.original(location))
    prints.drain(engine)
    return _as_opa_writes(query, raw, jsoncodec.loads(raw)).get("result", [])


def _as_opa_writes(query: str, raw: str, value: Any) -> Any:
    """`value`, unless a composite object key in it would read otherwise in OPA (object_keys)."""
    key = object_keys.differing_key(raw, value)
    if key is not None:
        raise EvaluationError(query, object_keys.message(key))
    return value


def _call(method: Any, query: str) -> tuple[str, tuple[str, Location | None] | None]:
    """Run one evaluation; a failure comes back as (message, location)."""
    raw, failure = attempt(method, query)
    return (raw, None) if failure is None else ("", engine_diagnostic(failure))


def attempt(method: Any, *args: Any) -> tuple[Any, str | None]:
    """Call into regorus; return (result, None), or (None, its error text).

    Callers raise their own error afterwards, outside any `except` block and
    without keeping it in a local: either would make a reference cycle through
    the frame holding the thread-pinned engine, and the garbage collector may
    free a cycle on any thread, where regorus refuses to be dropped. A Rust
    panic arrives as a bare BaseException and is reported as one.
    """
    try:
        return method(*args), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        return None, str(exc)
    except BaseException as exc:
        return None, f"engine panic: {exc}"


def add_modules(engine: regorus.Engine, modules: Iterable[Module]) -> None:
    """Parse `modules` into `engine`, turning parser errors into PolicyLoadError."""
    for module in modules:
        engine.set_rego_v0(module.v0)
        _, failure = attempt(engine.add_policy, module.path, module.text)
        if failure is not None:
            raise _load_error(module, failure)
    engine.set_rego_v0(False)


def _load_error(module: Module, failure: str) -> PolicyLoadError:
    message, location = engine_diagnostic(failure)
    if location is None:
        return PolicyLoadError(f"{module.path}: {message}")
    # regorus's v1 parser says "`if` keyword is required", "`contains` keyword
    # is required", ... for v0 rule bodies; only then is a v0 parse worth trying
    # (the v0 parser prints warnings of its own on v1 text).
    if not module.v0 and "keyword is required" in message and _parses_as_v0(module):
        message += " (this module is Rego v0 syntax: load it with --v0-compatible)"
    if "cannot parse number" in message:
        message += (
            " (the embedded engine holds a number as a 64-bit integer or double: write a smaller number, "
            "or a string, or use --engine opa)"
        )
    return PolicyLoadError(message, location, module.line(location.line))


def _parses_as_v0(module: Module) -> bool:
    probe = rewrite.new_engine()
    probe.set_rego_v0(True)
    return attempt(probe.add_policy, module.path, module.text)[1] is None


def _add_data(engine: regorus.Engine, data: dict[str, Any] | str) -> None:
    """Merge a store's `loadable` document: Python values, or JSON text (objects a TextReplicaStore holds)."""
    if isinstance(data, str):
        engine.add_data_json(data)
    else:
        engine.add_data(data)


def _reload_due(entry: _Prepared, store: ReplicaStore, changes: list[Change] | None) -> bool:
    """Is a whole reload due (then marked begun)? Not within `store.max_lag` of the last one while the
    log still holds the changes: evaluations meanwhile see the replica as it was a moment ago."""
    now = time.monotonic()
    if changes is not None and entry.generation and now - entry.reloaded_at < store.max_lag:
        return False
    entry.reloaded_at = now
    return True


def _merge_creations(entry: _Prepared, store: ReplicaStore, changes: list[Change] | None, most: int | None) -> bool:
    """Merge `changes` into `entry`'s engine when they only add objects; False when it did not (none,
    other changes, more than `most` changes or LOAD_STEP_BYTES of text unless `most` is None, or
    regorus refused them)."""
    if not changes or not all(c.created for c in changes) or (most is not None and len(changes) > most):
        return False
    data = store.loadable(store.rooted(creations(changes)))
    if most is not None and isinstance(data, str) and len(data) > LOAD_STEP_BYTES:
        return False
    for engine in (entry.data, entry.engine):  # the same objects in both: a new variant is compiled on the data
        _, failure = attempt(_add_data, engine, data)
        if failure is not None:
            return False
    entry.generation += len(changes)
    _settle(entry.engine)
    return True


def _settle(engine: regorus.Engine) -> None:
    """Evaluate once on the engine whose data changed, before it is cloned again.

    regorus redoes work proportional to the data on the first evaluation after
    the data changed; done on the base engine, its clones inherit the result,
    while every clone of an unsettled base would redo it (measured: +7 ms per
    review with 10,000 replicated ConfigMaps).
    """
    attempt(engine.eval_query, "true")
