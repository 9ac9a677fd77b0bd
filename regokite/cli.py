"""The `regokite` command line: parse arguments, call the layer that decides, print."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from regokite import __version__
from regokite.errors import RegokiteError


def _add_bundle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--v0-compatible",
        action="store_true",
        help="parse modules as Rego v0 (e.g. `deny[msg] { ... }`), as OPA 1.x does",
    )


def _cmd_test(args: argparse.Namespace) -> int:
    from regokite import testing

    results = testing.run_tests(args.paths, run=args.run, v0_compatible=args.v0_compatible)
    if args.format == "json":
        print(testing.format_json(results))
    else:
        print(testing.format_pretty(results, verbose=args.verbose))
    return testing.exit_code(results)


def _read_input(source: str | None) -> Any:
    from regokite.engine import UNDEFINED

    if source is None:
        return UNDEFINED
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        return json.loads(text)
    except OSError as exc:
        raise RegokiteError(f"{source}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        where = f"{source}:{exc.lineno}:{exc.colno}"
        raise RegokiteError(f"{where}: invalid JSON input: {exc.msg}") from None


def _cmd_eval(args: argparse.Namespace) -> int:
    from regokite.bundle import load_bundle
    from regokite.engine import open_engine

    bundle = load_bundle(args.data, v0_compatible=args.v0_compatible)
    engine = open_engine(bundle.without_tests(), args.engine, opa_url=args.opa_url)
    try:
        results = engine.query(args.query, _read_input(args.input))
    finally:
        engine.close()
    if args.format == "json":
        print(json.dumps({"result": results} if results else {}, indent=2))
    elif not results:
        print("undefined")
    else:
        for result in results:
            for expression in result["expressions"]:
                print(json.dumps(expression["value"], indent=2))
    return 1 if args.fail and not results else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="regokite",
        description="Kubernetes automation whose every decision is made by Rego policies.",
    )
    parser.add_argument("--version", action="version", version=f"regokite {__version__}")
    parser.add_argument("--log-level", default="info", help="debug, info, warning, error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    test = sub.add_parser("test", help="run *_test.rego tests like `opa test`")
    test.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    test.add_argument("-v", "--verbose", action="store_true", help="list every test")
    test.add_argument("--run", "-r", metavar="REGEX", help="only tests whose name matches")
    test.add_argument("--format", choices=["pretty", "json"], default="pretty")
    _add_bundle_args(test)
    test.set_defaults(func=_cmd_test)

    ev = sub.add_parser("eval", help="evaluate a query like `opa eval`")
    ev.add_argument("query", metavar="QUERY")
    ev.add_argument("-d", "--data", action="append", default=[], metavar="PATH", required=True)
    ev.add_argument("-i", "--input", metavar="FILE", help="input JSON file, or - for stdin")
    ev.add_argument("--format", choices=["json", "pretty"], default="json")
    ev.add_argument("--fail", action="store_true", help="exit 1 when the result is undefined")
    _add_engine_args(ev)
    _add_bundle_args(ev)
    ev.set_defaults(func=_cmd_eval)
    return parser


def _add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["embedded", "opa"], default="embedded")
    p.add_argument("--opa-url", default="http://127.0.0.1:8181", help="sidecar OPA address")


def main(argv: Sequence[str] | None = None) -> int:
    from regokite.ops import logging as ops_logging

    args = build_parser().parse_args(argv)
    ops_logging.configure(args.log_level)
    try:
        return args.func(args)
    except RegokiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
