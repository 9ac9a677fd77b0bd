"""`regokite capabilities`: the builtins the embedded engine evaluates, adds and refuses."""

from __future__ import annotations

import argparse
import json
from typing import Any

from regokite.commands.options import extension_options


def add_parser(sub: Any) -> None:
    caps = sub.add_parser("capabilities", help="list the builtins the embedded engine evaluates, adds and refuses")
    caps.add_argument("--format", choices=["pretty", "json"], default="pretty")
    caps.add_argument("--allow-http-send", action="append", default=[], metavar="HOST[:PORT]")
    caps.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite.engine import catalog
    from regokite.engine.extensions import provided

    options = extension_options(args)
    lists = {
        "regorus": sorted(catalog.regorus_builtins()),
        "added": sorted(provided(options) | catalog.REWRITTEN),
        "refused": sorted(catalog.refused(options)),
    }
    if args.format == "json":
        print(json.dumps(lists, indent=2))
        return 0
    titles = {
        "regorus": "Evaluated by regorus",
        "added": "Added by regokite (Python extensions, values written at load)",
        "refused": "Refused at load time (use --engine opa; http.send: --allow-http-send)",
    }
    for key, names in lists.items():
        print(f"{titles[key]} ({len(names)}):")
        print("\n".join(f"  {n}" for n in names) or "  (none)")
    return 0
