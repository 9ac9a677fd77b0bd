"""The `regokite` command line: the list of commands and main. Each command is one module of
`regokite.commands` holding its parser and its run; a run imports what it wires only when it runs (the
admission server must set up its metrics before anything imports prometheus_client)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from regokite import __version__
from regokite.commands import (
    admission,
    audit,
    bench,
    capabilities,
    check,
    configmaps,
    controller,
    eval,
    expand,
    gatekeeper,
    hooks,
    manifests,
    plan,
    test,
    verify,
)
from regokite.errors import RegokiteError

# in the order `regokite --help` lists them
COMMANDS = (test, verify, expand, gatekeeper, configmaps, eval, bench, admission, check, audit, controller, hooks,
            plan, capabilities, manifests)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's --help shows the defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if "help" not in kwargs and args and str(args[0]).startswith("-") and kwargs.get("default") is not None:
            kwargs["help"] = "default: %(default)s"  # the formatter shows defaults only beside some help
        return super().add_argument(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="regokite",
        description="Kubernetes automation whose every decision is made by Rego policies.",
    )
    parser.add_argument("--version", action="version", version=f"regokite {__version__}")
    parser.add_argument("--log-level", default="info", help="debug, info, warning, error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


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
