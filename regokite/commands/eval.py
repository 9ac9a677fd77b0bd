"""`regokite eval`: one query, as `opa eval`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from regokite import yamldoc
from regokite.commands import options
from regokite.errors import RegokiteError


def add_parser(sub: Any) -> None:
    ev = sub.add_parser("eval", help="evaluate a query like `opa eval`")
    ev.add_argument("query", metavar="QUERY")
    ev.add_argument(
        "-d",
        "--data",
        action="append",
        default=[],
        metavar="PATH",
        help="policy and data files or directories, loaded as `opa eval -d` (every .rego, .json, .yaml, .yml)",
    )
    ev.add_argument(
        "-b", "--bundle", action="append", default=[], metavar="PATH",
        help="a bundle directory, loaded as `opa eval -b` (only data.json / data.yaml are data)",
    )  # fmt: skip
    ev.add_argument("-i", "--input", metavar="FILE", help="input JSON (or .yaml) file, or - for stdin (JSON)")
    ev.add_argument("--format", choices=["json", "pretty"], default="json")
    ev.add_argument("--fail", action="store_true", help="exit 1 when the result is undefined")
    options.add_engine_args(ev)
    ev.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite.engine import open_engine

    settings = options.engine_settings(args)
    if not args.data and not args.bundle:
        raise RegokiteError("eval: give policy and data files with -d PATH or bundles with -b PATH")
    engine = open_engine(settings.load_files(args.data, args.bundle), settings)
    try:
        results = engine.query(args.query, read_input(args.input))
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


def read_input(source: str | None) -> Any:
    from regokite.engine import UNDEFINED

    if source is None:
        return UNDEFINED
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        if source.endswith((".yaml", ".yml")):  # as opa eval -i reads them
            return yamldoc.load(text)
        return json.loads(text)
    except OSError as exc:
        raise RegokiteError(f"{source}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        where = f"{source}:{exc.lineno}:{exc.colno}"
        raise RegokiteError(f"{where}: invalid JSON input: {exc.msg}") from None
    except yamldoc.YAMLError as exc:
        raise RegokiteError(f"{source}: invalid YAML input: {exc}") from None
