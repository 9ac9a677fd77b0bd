"""`regokite verify`: gator Suite files, as `gator verify`."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands import options
from regokite.errors import RegokiteError


def add_parser(sub: Any) -> None:
    ver = sub.add_parser("verify", help="run gator Suite files (Gatekeeper ConstraintTemplates) like `gator verify`")
    ver.add_argument("paths", nargs="+", help="suite files or directories holding them")
    ver.add_argument("--run", help="only tests or cases whose name matches this regex")
    ver.add_argument("-v", "--verbose", action="store_true", help="list every test and case")
    ver.add_argument("--allow-http-send", action="append", default=[], metavar="HOST[:PORT]", help=argparse.SUPPRESS)
    ver.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite.gatekeeper import verify

    suites = verify.find_suites(args.paths)
    if not suites:
        raise RegokiteError(f"no gator Suite ({verify.SUITE_API}) found in {', '.join(args.paths)}")
    results = [verify.run_suite(path, run=args.run, engine=options.engine_settings(args)) for path in suites]
    print(verify.format_results(results, verbose=args.verbose))
    return 1 if any(r.failed for r in results) else 0
