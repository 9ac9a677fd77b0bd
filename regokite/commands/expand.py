"""`regokite expand`: the resources ExpansionTemplates make, as `gator expand`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from regokite.errors import RegokiteError


def add_parser(sub: Any) -> None:
    exp = sub.add_parser(
        "expand", help="print the resources ExpansionTemplates make of workloads, mutated (gator expand)"
    )
    exp.add_argument(
        "-f", "--filename", action="append", required=True, metavar="FILE|DIR|-",
        help="workloads, ExpansionTemplates, mutators and Namespaces (repeatable)",
    )  # fmt: skip
    exp.add_argument("--namespace", help="for namespaced objects that name none (default: as written, as gator)")
    exp.add_argument("--format", choices=["yaml", "json"], default="yaml")
    exp.add_argument("-o", "--outputfile", metavar="FILE", help="write the resources to FILE, as gator's flag")
    exp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite import check
    from regokite.gatekeeper.constraints import read_sources
    from regokite.gatekeeper.expand import expand, render

    objects = [m.object for m in check.read_manifests(args.filename, args.namespace)]
    if not objects:
        print("no input data identified", file=sys.stderr)
        return 1
    try:
        expanded = expand(read_sources(args.filename), objects)
    except RegokiteError as exc:  # gator expand exits 1 when it cannot expand
        print(exc, file=sys.stderr)
        return 1
    output = render(expanded, args.format)
    if args.outputfile:
        print(f"Writing output to file: {args.outputfile}")
        Path(args.outputfile).write_text(output, encoding="utf-8")
    else:
        print(output)
    return 0
