"""`regokite test`: run the `test_*` rules of `*_test.rego` files like `opa test`.

A test passes when its rule evaluates to true; false or undefined fails it;
an evaluation error is an ERROR. `todo_*` rules are reported as skipped.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from regokite.bundle import Bundle
from regokite.engine import Engine, EngineSettings, open_engine
from regokite.errors import EvaluationError, PolicyLoadError
from regokite.gatekeeper.constraints import read_sources
from regokite.gatekeeper.expansion import generated_modules
from regokite.outline import outline

RULE_LINE = "-" * 80


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
) -> list[TestResult]:
    """Load `paths` as one bundle (tests included) and run the selected tests.

    `engine_for` builds another engine than the embedded one, to run the same
    tests the same way (the differential tests compare regorus with OPA so). Raises
    PolicyLoadError when the bundle does not load.

    As `opa test`, a builtin's error makes its call undefined unless
    `strict_builtin_errors`.
    """
    settings = replace(engine or EngineSettings(), strict_builtin_errors=strict_builtin_errors)
    bundle = with_gatekeeper_rego(settings.load(paths), paths)
    opened = open_engine(bundle, settings) if engine_for is None else engine_for(bundle)
    selector = re.compile(run) if run else None
    results: list[TestResult] = []
    for module in outline(bundle.tests):
        seen: set[str] = set()
        for rule in module.rules:
            if rule.is_function or rule.name in seen:
                continue
            if not rule.name.startswith(("test_", "todo_")):
                continue
            seen.add(rule.name)
            ref = f"data.{module.package}.{rule.name}"
            if selector and not selector.search(ref):
                continue
            if rule.name.startswith("todo_"):
                results.append(TestResult(module.package, rule.name, module.file, rule.line, Outcome.SKIPPED))
                continue
            results.append(_run_one(opened, module.package, rule.name, module.file, rule.line))
    return results


def with_gatekeeper_rego(bundle: Bundle, paths: Sequence[str]) -> Bundle:
    """The bundle plus the Rego of the Gatekeeper mutators and ExpansionTemplates below `paths`,
    so tests see `data.regokite_gatekeeper.mutation` and `.expansion` as the admission server does."""
    sources = read_sources(paths)
    if sources.broken_mutators or sources.broken_expansions:
        raise PolicyLoadError("\n".join((*sources.broken_mutators, *sources.broken_expansions)))
    generated = generated_modules(sources.mutators, sources.expansions)
    return Bundle((*bundle.modules, *generated), bundle.data, bundle.roots) if generated else bundle


def _run_one(engine: Engine, package: str, name: str, file: str, line: int) -> TestResult:
    started = time.perf_counter_ns()
    try:
        value = engine.evaluate(f"data.{package}.{name}")
    except EvaluationError as exc:
        elapsed = time.perf_counter_ns() - started
        where = f"{exc.location}: " if exc.location else ""
        return TestResult(package, name, file, line, Outcome.ERROR, elapsed, where + exc.message)
    elapsed = time.perf_counter_ns() - started
    outcome = Outcome.PASS if value is True else Outcome.FAIL
    return TestResult(package, name, file, line, outcome, elapsed)


def exit_code(results: Sequence[TestResult]) -> int:
    failed = any(r.outcome in (Outcome.FAIL, Outcome.ERROR) for r in results)
    return 1 if failed else 0


def _duration(ns: int) -> str:
    if ns < 1_000_000:
        return f"{ns / 1000:.0f}µs"
    return f"{ns / 1_000_000:.1f}ms"


def _line(result: TestResult) -> str:
    text = f"{result.ref}: {result.outcome.value}"
    if result.outcome is not Outcome.SKIPPED:
        text += f" ({_duration(result.duration_ns)})"
    return text


def format_pretty(results: Sequence[TestResult], *, verbose: bool = False) -> str:
    """Report like `opa test`: failures first, then a summary with counts."""
    if not results:
        return "no tests found"
    out: list[str] = []
    bad = [r for r in results if r.outcome in (Outcome.FAIL, Outcome.ERROR)]
    if bad:
        out += ["FAILURES", RULE_LINE]
        for r in bad:
            out.append(_line(r))
            out.append(f"  at {r.file}:{r.line}")
            if r.error:
                out.append(f"  error: {r.error}")
            out.append("")
    if verbose or bad:
        out += ["SUMMARY", RULE_LINE] if bad else []
        current = None
        for r in results:
            if not verbose and r.outcome not in (Outcome.FAIL, Outcome.ERROR):
                continue
            if r.file != current:
                if current is not None:
                    out.append("")
                out.append(f"{r.file}:")
                current = r.file
            out.append(_line(r))
        out.append(RULE_LINE)
    total = len(results)
    for outcome in Outcome:
        n = sum(1 for r in results if r.outcome is outcome)
        if n:
            out.append(f"{outcome.value}: {n}/{total}")
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
        entries.append(entry)
    return json.dumps(entries, indent=2)
