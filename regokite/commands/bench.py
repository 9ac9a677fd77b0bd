"""`regokite bench`: a query's cost as `opa bench` measures it, or a Gatekeeper policy set's on objects
(`gator bench`'s role)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from regokite.commands import options
from regokite.errors import RegokiteError


def add_parser(sub: Any) -> None:
    bench = sub.add_parser(
        "bench", help="measure a query like `opa bench`, or admission policies on manifests (gator bench)"
    )
    bench.add_argument("query", nargs="?", metavar="QUERY", help="the query (not with --policies)")
    bench.add_argument("-d", "--data", action="append", default=[], metavar="PATH", help="as `opa bench -d`")
    bench.add_argument("-b", "--bundle", action="append", default=[], metavar="PATH", help="as `opa bench -b`")
    bench.add_argument("-i", "--input", metavar="FILE", help="input JSON (or .yaml) file, or - for stdin")
    bench.add_argument(
        "--policies",
        action="append",
        default=[],
        metavar="DIR",
        help="admission policies (ConstraintTemplates, constraints, Rego): each manifest of -f is reviewed",
    )
    bench.add_argument("-f", "--filename", action="append", default=[], metavar="FILE|DIR", help="with --policies")
    bench.add_argument("--namespace", default="default", help="for namespaced manifests that name none")
    bench.add_argument("--format", choices=["pretty", "json"], default="pretty")
    add_measure_args(bench)
    options.add_engine_args(bench)
    bench.set_defaults(func=run)


def add_measure_args(p: argparse.ArgumentParser) -> None:
    """The flags `bench` and `test --bench` share."""
    p.add_argument("--benchtime", default="1s", help="how long to run each benchmark (1s, 500ms) or how often (100x)")
    p.add_argument("--count", type=int, default=1, help="how many times to run each benchmark, one result each")
    p.add_argument(
        "--benchmem",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure memory: the Python heap's peak growth per operation, under tracemalloc",
    )
    p.add_argument("--save", metavar="FILE", help="write the results as JSON, a baseline for --baseline")
    p.add_argument("--baseline", metavar="FILE", help="compare ns/op with the results saved there (--save)")
    p.add_argument(
        "--max-ratio",
        type=float,
        metavar="R",
        help="with --baseline: exit 3 when a benchmark's ns/op is above R times the baseline's",
    )


def run(args: argparse.Namespace) -> int:
    from regokite import benchmark

    seconds, runs = _benchtime(args.benchtime)
    if args.policies:
        if args.query or args.data or args.bundle:
            raise RegokiteError("bench: --policies reviews manifests; give no QUERY, -d or -b with it")
        results = _gatekeeper(args, seconds, runs)
    else:
        results = _query(args, seconds, runs)
    print(benchmark.format_json(results) if args.format == "json" else benchmark.format_pretty(results))
    return report(args, results)


def report(args: argparse.Namespace, results: list[Any]) -> int:
    """--save and --baseline for `bench` and `test --bench`: 3 when a result exceeds --max-ratio."""
    from regokite import benchmark

    if args.save:
        Path(args.save).write_text(benchmark.format_json(results) + "\n", encoding="utf-8")
    if not args.baseline:
        return 0
    try:
        baseline = json.loads(Path(args.baseline).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RegokiteError(f"{args.baseline}: not a saved benchmark: {exc}") from None
    rows = benchmark.compare(results, baseline)
    print(benchmark.format_comparison(rows), file=sys.stderr)
    if args.max_ratio and any(ratio > args.max_ratio for *_, ratio in rows):
        return 3
    return 0


def _benchtime(text: str) -> tuple[float | None, int | None]:
    from regokite import benchmark

    try:
        return benchmark.parse_benchtime(text)
    except ValueError as exc:
        raise RegokiteError(str(exc)) from None


def _query(args: argparse.Namespace, seconds: float | None, runs: int | None) -> list[Any]:
    from regokite import benchmark
    from regokite.commands.eval import read_input
    from regokite.engine import open_engine

    if not args.query:
        raise RegokiteError("bench: give a QUERY (with -d / -b), or --policies and -f")
    settings = options.engine_settings(args)
    engine = open_engine(settings.load_files(args.data, args.bundle), settings)
    given = read_input(args.input)
    try:
        engine.query(args.query, given)  # fails here, once, on a query that does not evaluate
        return [
            benchmark.measure(
                args.query, lambda: engine.query(args.query, given), seconds=seconds, runs=runs, memory=args.benchmem
            )
            for _ in range(args.count)
        ]
    finally:
        engine.close()


def _gatekeeper(args: argparse.Namespace, seconds: float | None, runs: int | None) -> list[Any]:
    """One operation: the validating decision on one manifest's CREATE review, the manifests in turn."""
    from regokite import benchmark, check
    from regokite.admission.decide import decide
    from regokite.admission.policies import load_policy_set
    from regokite.admission.review import creation_review
    from regokite.clusterdata.store import guess_resource

    manifests = check.read_manifests(args.filename, args.namespace)
    if not manifests:
        raise RegokiteError("no input data identified")
    reviews = []
    for i, m in enumerate(manifests):
        group, _, version = m.object["apiVersion"].rpartition("/")
        reviews.append(creation_review(m.object, (group, version, guess_resource(m.kind)), f"bench-{i}"))
    policy_set = load_policy_set(args.policies, options.engine_settings(args))
    turn = iter(range(sys.maxsize))
    name = f"{len(policy_set.policies)} policies on {len(reviews)} objects (validate, per review)"
    try:
        return [
            benchmark.measure(
                name,
                lambda: decide(policy_set, reviews[next(turn) % len(reviews)], mode="validate"),
                seconds=seconds,
                runs=runs,
                memory=args.benchmem,
            )
            for _ in range(args.count)
        ]
    finally:
        policy_set.close()
