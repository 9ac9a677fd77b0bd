"""`regokite test`: load and run Rego tests as `opa test` does.

The paths are loaded as OPA's loader loads them (every module and data file,
`bundle.load_bundle`), or as bundles (`--bundle`). A test is a rule of any
module whose name starts with `test_`; one starting `todo_test_` is skipped.
A test passes when it evaluates to true; false or undefined fails it; an
evaluation error is an ERROR. A test rule defined twice is two tests, the
second reported as `name#01` (OPA renames it so). A test with cases
(`test_x[name] if ...`) is an ERROR: OPA reports a case whose body fails
from its trace, which regorus does not give, so it could pass here.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from regokite.benchmark import BenchResult
from regokite.bundle import Bundle, Module
from regokite.engine import Engine, EngineSettings, open_engine
from regokite.engine.coverage import CoverageLog
from regokite.engine.embedded import print_log
from regokite.errors import EvaluationError, Location, PolicyLoadError
from regokite.gatekeeper.constraints import read_sources
from regokite.gatekeeper.expansion import generated_modules
from regokite.outline import outline

RULE_LINE = "-" * 80
TEST_PREFIX = "test_"
SKIP_PREFIX = "todo_test_"
_RENAMED = "__rk_definition_"  # what the second definition of a test is called in the engine


class Outcome(Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"


@dataclass(frozen=True)
class TestResult:
    package: str
    name: str
    file: str
    line: int
    outcome: Outcome
    duration_ns: int = 0
    error: str | None = None
    output: tuple[str, ...] = ()  # what the test print()ed, as OPA shows it below the test
    benchmarks: tuple[BenchResult, ...] = ()  # `--bench`: the passing test measured, once per --count

    @property
    def ref(self) -> str:
        return f"data.{self.package}.{self.name}"


@dataclass(frozen=True)
class TestCase:
    """A test as OPA names it (`name`, `test_x#01` for a second definition) and as the engine does."""

    package: str
    name: str
    rule: str
    file: str
    line: int
    with_cases: bool = False  # `test_x[case] if ...`

    @property
    def ref(self) -> str:
        return f"data.{self.package}.{self.name}"


def run_tests(
    paths: Sequence[str],
    *,
    run: str | None = None,
    engine: EngineSettings | None = None,
    engine_for: Callable[[Bundle], Engine] | None = None,
    strict_builtin_errors: bool = False,
    as_bundle: bool = False,
    ignore: Sequence[str] = (),
    coverage: CoverageLog | None = None,
    bench: Callable[[str, Callable[[], object]], tuple[BenchResult, ...]] | None = None,
) -> list[TestResult]:
    """Load `paths` (as `opa test` does, or `as_bundle` as `opa test --bundle`) and run the selected tests.

    `engine_for` builds another engine than the embedded one, to run the same
    tests the same way (the differential tests compare regorus with OPA so). Raises
    PolicyLoadError when the files do not load.

    As `opa test`, a builtin's error makes its call undefined unless
    `strict_builtin_errors`.

    `coverage` gathers what the tests evaluate (the embedded engine only: `CoverageLog.report`
    then gives OPA's report over the files loaded). `bench` measures each test that passed, as
    `opa test --bench` does (given its name and the evaluation to repeat).
    """
    settings = replace(engine or EngineSettings(), strict_builtin_errors=strict_builtin_errors)
    selector = re.compile(run) if run else None
    loaded = settings.load(paths, as_bundle=as_bundle, ignore=ignore)
    bundle, cases = discover(with_gatekeeper_rego(loaded, paths))
    if coverage is not None:
        coverage.track(loaded.modules)  # the report is over the files as written, not the generated ones
        if engine_for is not None:
            raise ValueError("coverage is gathered by the engine open_engine builds, not by engine_for's")
    opened = open_engine(bundle, settings, coverage=coverage) if engine_for is None else engine_for(bundle)
    results: list[TestResult] = []
    with _printed() as printed:
        for case in cases:
            if selector and not selector.search(case.ref):
                continue
            if case.name.startswith(SKIP_PREFIX):
                results.append(TestResult(case.package, case.name, case.file, case.line, Outcome.SKIPPED))
                continue
            printed.clear()
            result = replace(_run_one(opened, case), output=tuple(printed))
            if bench is not None and result.outcome is Outcome.PASS:
                ref = f"data.{case.package}.{case.rule}"
                result = replace(result, benchmarks=bench(case.ref, lambda: opened.evaluate(ref)))  # noqa: B023
            results.append(result)
    return results


@contextlib.contextmanager
def _printed() -> Iterator[list[str]]:
    """What policies print() while the tests run, gathered (not logged), for the test that printed it."""
    lines: list[str] = []

    class Gather(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(str(getattr(record, "output", record.getMessage())))

    handler, propagate, level = Gather(), print_log.propagate, print_log.level
    print_log.addHandler(handler)
    print_log.propagate = False
    print_log.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        print_log.removeHandler(handler)
        print_log.propagate, print_log.level = propagate, level


def discover(bundle: Bundle) -> tuple[Bundle, list[TestCase]]:
    """The tests of every module, in file order, and the bundle with each test's later definitions renamed,
    so each definition is evaluated on its own as OPA evaluates it (`test_x`, `test_x#01`, ...)."""
    seen: Counter[tuple[str, str]] = Counter()
    cases: list[TestCase] = []
    renames: dict[str, list[tuple[int, str, str]]] = {}
    for module in outline(bundle.modules):
        for rule in module.rules:
            if rule.is_function or not rule.name.startswith((TEST_PREFIX, SKIP_PREFIX)):
                continue
            key = (module.package, rule.name)
            count, seen[key] = seen[key], seen[key] + 1
            name, engine_name = rule.name, rule.name
            if count and rule.name.startswith(TEST_PREFIX):  # OPA renames tests only, skips stay alike
                name, engine_name = f"{rule.name}#{count:02d}", f"{rule.name}{_RENAMED}{count:02d}"
                renames.setdefault(module.file, []).append((rule.line, rule.name, engine_name))
            head = bundle.module(module.file).line(rule.line) or ""
            with_cases = re.match(rf"\s*{re.escape(rule.name)}\s*\[", head) is not None
            cases.append(TestCase(module.package, name, engine_name, module.file, rule.line, with_cases))
    if not renames:
        return bundle, cases
    modules = tuple(_renamed(m, renames[m.path]) if m.path in renames else m for m in bundle.modules)
    return Bundle(modules, bundle.data, bundle.roots), cases


def _renamed(module: Module, renames: list[tuple[int, str, str]]) -> Module:
    lines = module.text.split("\n")
    for line, name, engine_name in renames:
        head = re.compile(rf"^(\s*(?:default\s+)?){re.escape(name)}\b")
        if not head.search(lines[line - 1]):
            raise PolicyLoadError(
                f"test {name} is defined again here and its head does not start the line: "
                "write it on a line of its own so it can run as its own test, as in OPA",
                Location(module.path, line, 1),
                lines[line - 1],
            )
        lines[line - 1] = head.sub(rf"\g<1>{engine_name}", lines[line - 1], count=1)
    return replace(module, text="\n".join(lines))


def with_gatekeeper_rego(bundle: Bundle, paths: Sequence[str]) -> Bundle:
    """The bundle plus the Rego of the Gatekeeper mutators and ExpansionTemplates below `paths`,
    so tests see `data.regokite_gatekeeper.mutation` and `.expansion` as the admission server does."""
    sources = read_sources(paths)
    if sources.broken_mutators or sources.broken_expansions:
        raise PolicyLoadError("\n".join((*sources.broken_mutators, *sources.broken_expansions)))
    generated = generated_modules(sources.mutators, sources.expansions)
    return Bundle((*bundle.modules, *generated), bundle.data, bundle.roots) if generated else bundle


def _run_one(engine: Engine, case: TestCase) -> TestResult:
    started = time.perf_counter_ns()
    if case.with_cases:
        return TestResult(case.package, case.name, case.file, case.line, Outcome.ERROR, error=_CASES)
    try:
        value = engine.evaluate(f"data.{case.package}.{case.rule}")
    except EvaluationError as exc:
        elapsed = time.perf_counter_ns() - started
        where = f"{exc.location}: " if exc.location else ""
        return TestResult(case.package, case.name, case.file, case.line, Outcome.ERROR, elapsed, where + exc.message)
    outcome = Outcome.PASS if value is True else Outcome.FAIL
    return TestResult(case.package, case.name, case.file, case.line, outcome, time.perf_counter_ns() - started)


_CASES = (
    "a test with cases (test_x[case]) is not run: OPA reports a case whose body fails from its evaluation "
    "trace, which the embedded engine does not give, so such a case would pass here; write a test per case, "
    "or run it with opa test"
)


def exit_code(results: Sequence[TestResult], *, zero_on_skipped: bool = False) -> int:
    """`opa test`'s: 2 when a test fails, errs or (unless `zero_on_skipped`, its `-z`) is skipped, else 0."""
    for r in results:
        if r.outcome in (Outcome.FAIL, Outcome.ERROR) or (r.outcome is Outcome.SKIPPED and not zero_on_skipped):
            return 2
    return 0


def go_duration(ns: int) -> str:
    """A duration as Go's `time.Duration` prints it (OPA's test lines): `812ns`, `1.5µs`, `2.000301ms`, `1.2s`."""
    if ns < 1_000:
        return f"{ns}ns"
    for unit, size in (("µs", 1_000), ("ms", 1_000_000)):
        if ns < size * 1_000:
            whole, frac = divmod(ns, size)
            digits = f"{frac:0{len(str(size)) - 1}d}".rstrip("0")
            return f"{whole}.{digits}{unit}" if digits else f"{whole}{unit}"
    minutes, rest = divmod(ns, 60_000_000_000)
    whole, frac = divmod(rest, 1_000_000_000)
    digits = f"{frac:09d}".rstrip("0")
    seconds = f"{whole}.{digits}s" if digits else f"{whole}s"
    return f"{minutes}m{seconds}" if minutes else seconds


def _line(result: TestResult) -> str:
    text = f"{result.ref}: {result.outcome.value}"
    if result.outcome is not Outcome.SKIPPED:
        text += f" ({go_duration(result.duration_ns)})"
    return text


def format_pretty(results: Sequence[TestResult], *, verbose: bool = False) -> str:
    """Report as `opa test` does: with `-v` the failures first, then each test that did not pass (every
    test with `-v`) under its file, its error or failed sub-results indented, and the counts.
    No test, no output."""
    out: list[str] = []
    failed = [r for r in results if r.outcome is Outcome.FAIL]
    if failed and verbose:
        out += ["FAILURES", RULE_LINE]
        for r in failed:
            out += [_line(r), ""]
        out += ["SUMMARY", RULE_LINE]
    current = None
    for r in results:
        if not verbose and r.outcome is Outcome.PASS:
            continue
        if r.file != current:
            if current is not None:
                out.append("")
            out.append(f"{r.file}:")
            current = r.file
        out.append(_line(r))
        if r.output:
            out += ["", *(f"  {line}" for line in "\n".join(r.output).strip().split("\n")), ""]
        if r.error:
            out.append(f"  {r.error}")
    if current is not None:
        out.append(RULE_LINE)
    counts = Counter(r.outcome for r in results)
    out += [f"{outcome.value}: {counts[outcome]}/{len(results)}" for outcome in Outcome if counts[outcome]]
    return "\n".join(out)


def format_json(results: Sequence[TestResult]) -> str:
    """The shape of `opa test --format json`, one object per test."""
    entries = []
    for r in results:
        entry: dict[str, object] = {
            "location": {"file": r.file, "row": r.line, "col": 1},
            "package": f"data.{r.package}",
            "name": r.name,
            "duration": r.duration_ns,
        }
        if r.outcome is Outcome.FAIL:
            entry["fail"] = True
        elif r.outcome is Outcome.ERROR:
            entry["error"] = {"message": r.error}
        elif r.outcome is Outcome.SKIPPED:
            entry["skip"] = True
        if r.output:  # Go writes the bytes as base64
            entry["output"] = base64.b64encode("".join(f"{line}\n" for line in r.output).encode()).decode()
        entries.append(entry)
    return json.dumps(entries, indent=2)


def format_bench(results: Sequence[TestResult]) -> str:
    """`opa test --bench`'s lines: each benchmark as Go prints one (name, runs, ns/op and the rest), then
    the tests that did not pass and the counts as without --bench."""
    out = []
    for r in results:
        for b in r.benchmarks:
            memory = "" if b.python_peak_bytes is None else f"\t{b.python_peak_bytes} python_peak_B/op"
            out.append(f"{r.ref}\t{b.n:>10}\t{b.ns_per_op:>12} ns/op\t{b.p50_ns} p50_ns\t{b.p99_ns} p99_ns{memory}")
    summary = format_pretty(results)  # the tests that did not pass under their files, a rule, the counts
    ruled = any(r.outcome is not Outcome.PASS for r in results)
    return "\n".join([*out, summary] if ruled else [*out, RULE_LINE, summary])
