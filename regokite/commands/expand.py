"""`regokite expand`: the resources ExpansionTemplates make, as `gator expand`."""

from __future__ import annotations

import argparse
import json
import sys
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
    exp.add_argument("--namespace", default="default", help="for namespaced objects that name none")
    exp.add_argument("--format", choices=["yaml", "json"], default="yaml")
    exp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from regokite import check
    from regokite.gatekeeper.constraints import read_sources
    from regokite.gatekeeper.expand import expand

    objects = [m.object for m in check.read_manifests(args.filename, args.namespace)]
    try:
        expanded = expand(read_sources(args.filename), objects)
    except RegokiteError as exc:  # gator expand exits 1 when it cannot expand
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(expanded, indent=2))
    else:
        print(yaml.safe_dump_all(expanded, sort_keys=True), end="")
    return 0
