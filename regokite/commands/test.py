"""`regokite test`: the test_* rules of the modules at the paths, as `opa test`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from regokite.commands import bench, options


def add_parser(sub: Any) -> None:
    test = sub.add_parser("test", help="run the test_* rules of Rego files like `opa test`")
    test.add_argument("paths", nargs="+", metavar="PATH", help="files or directories, loaded as `opa test` loads them")
    test.add_argument("-v", "--verbose", action="store_true", help="list every test")
    test.add_argument("--run", "-r", metavar="REGEX", help="only tests whose data.<package>.<name> matches")
    test.add_argument("--format", "-f", choices=["pretty", "json"], default="pretty")
    test.add_argument(
        "--bundle", "-b", action="store_true", help="load the paths as bundles: only data.json/data.yaml are data"
    )
    test.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATTERN",
        help="file and directory names to skip (shell pattern, repeatable or comma-separated: '.*' skips hidden ones)",
    )
    test.add_argument(
        "--exit-zero-on-skipped", "-z", action="store_true", help="skipped (todo_test_) tests do not make exit 2"
    )
    test.add_argument("--fail-on-empty", action="store_true", help="exit 1 when no test ran")
    test.add_argument(
        "--strict-builtin-errors",
        action="store_true",
        help="a builtin's error is the test's error (default, as opa test: the call is undefined)",
    )
    test.add_argument(
        "--coverage",
        "-c",
        action="store_true",
        help="print OPA's JSON coverage report of the files loaded (lines covered and not, percentages)",
    )
    test.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        metavar="PERCENT",
        help="with --coverage: exit 2 when the overall coverage is below PERCENT, as opa test",
    )
    test.add_argument(
        "--bench", action="store_true", help="measure each test that passes, as opa test --bench (ns/op, p50/p99)"
    )
    bench.add_measure_args(test)
    options.add_bundle_args(test)
    test.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite import benchmark, testing
    from regokite.engine import builtin_errors
    from regokite.engine.coverage import CoverageLog, threshold_error
    from regokite.errors import PolicyLoadError

    if args.coverage and args.bench:  # as opa test
        print("coverage reporting is not supported when benchmarking tests", file=sys.stderr)
        return 1
    coverage = CoverageLog() if args.coverage else None
    quiet = args.log_level.lower() != "debug"  # as opa test, which prints no builtin error it made undefined
    level = builtin_errors.log.level
    builtin_errors.log.setLevel(logging.ERROR if quiet else level)
    try:
        results = testing.run_tests(
            args.paths,
            run=args.run,
            engine=options.engine_settings(args),
            strict_builtin_errors=args.strict_builtin_errors,
            as_bundle=args.bundle,
            ignore=[pattern for given in args.ignore for pattern in given.split(",") if pattern],
            coverage=coverage,
            bench=_measure(args) if args.bench else None,
        )
    except PolicyLoadError as exc:  # as opa test: what does not load is exit 1, on stderr
        print(exc, file=sys.stderr)
        return 1
    finally:
        builtin_errors.log.setLevel(level)
    if coverage is not None:  # as opa test --coverage: the report is the output, whatever the format
        report = coverage.report()
        print(json.dumps(report, indent=2))
        failed = threshold_error(report, args.threshold)
        if failed:
            print(failed, file=sys.stderr)
            return 2
    elif args.bench:
        measured = [b for r in results for b in r.benchmarks]
        print(benchmark.format_json(measured) if args.format == "json" else testing.format_bench(results))
        compared = bench.report(args, measured)
        if compared:
            return compared
    elif args.format == "json":
        print(testing.format_json(results))
    elif results:
        print(testing.format_pretty(results, verbose=args.verbose))
    if not results and args.fail_on_empty:
        print("no tests were run", file=sys.stderr)
        return 1
    return testing.exit_code(results, zero_on_skipped=args.exit_zero_on_skipped)


def _measure(args: argparse.Namespace) -> Any:
    from regokite import benchmark
    from regokite.errors import RegokiteError

    try:
        seconds, runs = benchmark.parse_benchtime(args.benchtime)
    except ValueError as exc:
        raise RegokiteError(str(exc)) from None

    def measure(name: str, operation: Any) -> tuple[Any, ...]:
        return tuple(
            benchmark.measure(name, operation, seconds=seconds, runs=runs, memory=args.benchmem)
            for _ in range(args.count)
        )

    return measure
