"""`regokite test`: the *_test.rego tests of a bundle, as `opa test`."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands.options import add_bundle_args, engine_settings


def add_parser(sub: Any) -> None:
    test = sub.add_parser("test", help="run *_test.rego tests like `opa test`")
    test.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    test.add_argument("-v", "--verbose", action="store_true", help="list every test")
    test.add_argument("--run", "-r", metavar="REGEX", help="only tests whose name matches")
    test.add_argument("--format", choices=["pretty", "json"], default="pretty")
    test.add_argument(
        "--strict-builtin-errors",
        action="store_true",
        help="a builtin's error is the test's error (default, as opa test: the call is undefined)",
    )
    add_bundle_args(test)
    test.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite import testing

    results = testing.run_tests(
        args.paths, run=args.run, engine=engine_settings(args), strict_builtin_errors=args.strict_builtin_errors
    )
    if args.format == "json":
        print(testing.format_json(results))
    else:
        print(testing.format_pretty(results, verbose=args.verbose))
    return testing.exit_code(results)
