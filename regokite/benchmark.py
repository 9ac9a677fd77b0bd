"""Measure a call as `opa bench` and `opa test --bench` measure a query: ns/op, percentiles, allocations.

An operation runs back to back for `benchtime` seconds (or a fixed number of
times, Go's `Nx`); each run is timed on its own, so beside ns/op (the total
over the count, as Go's testing.B) the report has p50/p90/p99. Memory comes
from a second, shorter pass under tracemalloc (timing under it would be
slowed several-fold): the Python heap's peak growth during an operation,
the median over the pass. Go's allocs/op has no measure here: tracemalloc
sees the blocks alive, not how many were allocated and freed, and what
regorus allocates in Rust is not visible to Python at all.
`--count N` repeats the whole measurement N times, one result each.
"""

from __future__ import annotations

import json
import math
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ALLOC_RUNS = 50  # operations measured under tracemalloc


@dataclass(frozen=True)
class BenchResult:
    """One measurement of one operation (Go's testing.BenchmarkResult, plus percentiles)."""

    name: str
    n: int
    ns_total: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    python_peak_bytes: int | None  # the Python heap's peak growth during one operation (median)

    @property
    def ns_per_op(self) -> int:
        return self.ns_total // self.n if self.n else 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ns_per_op": self.ns_per_op}


def parse_benchtime(text: str) -> tuple[float | None, int | None]:
    """Go's -benchtime: `1s`, `500ms`, `2m` (a duration) or `100x` (that many runs)."""
    if text.endswith("x") and text[:-1].isdigit() and int(text[:-1]) > 0:
        return None, int(text[:-1])
    for unit, seconds in (("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("ns", 1e-9), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit):
            try:
                value = float(text[: -len(unit)]) * seconds
            except ValueError:
                break
            if value > 0:
                return value, None
            break
    raise ValueError(f"invalid benchtime {text!r}: a duration (1s, 500ms) or a count (100x)")


def measure(
    name: str,
    operation: Callable[[], Any],
    *,
    seconds: float | None = 1.0,
    runs: int | None = None,
    memory: bool = True,
) -> BenchResult:
    """`operation` run back to back for `seconds` (or exactly `runs` times) after one warm-up run."""
    operation()
    samples: list[int] = []
    started = time.perf_counter_ns()
    deadline = started + int((seconds or 0) * 1e9)
    while (len(samples) < runs) if runs else (time.perf_counter_ns() < deadline or not samples):
        before = time.perf_counter_ns()
        operation()
        samples.append(time.perf_counter_ns() - before)
    peak = _peak_bytes(operation) if memory else None
    ordered = sorted(samples)
    return BenchResult(
        name,
        len(samples),
        sum(samples),
        _percentile(ordered, 50),
        _percentile(ordered, 90),
        _percentile(ordered, 99),
        peak,
    )


def _peak_bytes(operation: Callable[[], Any]) -> int:
    """The median over ALLOC_RUNS operations of how far the Python heap grew above where it started."""
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    peaks = []
    try:
        for _ in range(ALLOC_RUNS):
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            operation()
            peaks.append(tracemalloc.get_traced_memory()[1] - start)
    finally:
        if not tracing:
            tracemalloc.stop()
    return sorted(peaks)[len(peaks) // 2]


def _percentile(ordered: Sequence[int], percent: int) -> int:
    if not ordered:
        return 0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(percent / 100 * len(ordered)) - 1))]


def format_pretty(results: Sequence[BenchResult]) -> str:
    """A table per result, as `opa bench` prints one (samples, ns/op, memory, percentiles)."""
    out = []
    for r in results:
        rows = [
            ("samples", r.n),
            ("ns/op", r.ns_per_op),
            ("python_peak_B/op", "n/a" if r.python_peak_bytes is None else r.python_peak_bytes),
            ("latency_ns_p50", r.p50_ns),
            ("latency_ns_p90", r.p90_ns),
            ("latency_ns_p99", r.p99_ns),
        ]
        width = max(len(k) for k, _ in rows)
        values = max(len(str(v)) for _, v in rows)
        rule = f"+-{'-' * width}-+-{'-' * values}-+"
        out += [r.name, rule, *(f"| {k:<{width}} | {v!s:>{values}} |" for k, v in rows), rule]
    return "\n".join(out)


def format_json(results: Sequence[BenchResult]) -> str:
    return json.dumps([r.to_json() for r in results], indent=2)


def compare(
    results: Sequence[BenchResult], baseline: Sequence[dict[str, Any]]
) -> list[tuple[str, float, float, float]]:
    """(name, baseline ns/op, ns/op now, ratio now/baseline) of each result the baseline has (by name, the
    baseline's median over its repeats)."""
    before: dict[str, list[int]] = {}
    for entry in baseline:
        before.setdefault(entry["name"], []).append(int(entry["ns_per_op"]))
    now: dict[str, list[int]] = {}
    for r in results:
        now.setdefault(r.name, []).append(r.ns_per_op)
    rows = []
    for name, values in now.items():
        if name in before:
            old, new = _median(before[name]), _median(values)
            rows.append((name, old, new, new / old if old else math.inf))
    return rows


def _median(values: Sequence[int]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return float(ordered[middle]) if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def format_comparison(rows: Sequence[tuple[str, float, float, float]]) -> str:
    lines = [f"{'name':<50} {'baseline ns/op':>15} {'ns/op':>12} {'ratio':>7}"]
    lines += [f"{name:<50} {old:>15.0f} {new:>12.0f} {ratio:>7.2f}" for name, old, new, ratio in rows]
    return "\n".join(lines)
