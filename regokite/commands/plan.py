"""`regokite plan`: what a controller would write for one object, offline."""

from __future__ import annotations

import argparse
import json
from typing import Any

from regokite.commands import options


def add_parser(sub: Any) -> None:
    plan = sub.add_parser(
        "plan", help="offline: what a Composite/DecoratorController or Watch would write for one object"
    )
    plan.add_argument("--controllers", action="append", required=True, metavar="PATH")
    plan.add_argument("--policies", action="append", required=True, metavar="DIR")
    plan.add_argument("--parent", required=True, metavar="FILE", help="the parent object (YAML or JSON)")
    plan.add_argument("--observed", metavar="DIR", help="observed children (YAML/JSON files)")
    plan.add_argument("--controller", metavar="NAME", help="which definition, when several match the parent")
    plan.add_argument(
        "--event", choices=["ADDED", "MODIFIED", "DELETED", "RESYNC"], default="ADDED", help="for a Watch: the event"
    )
    plan.add_argument("--format", choices=["pretty", "json"], default="pretty")
    options.add_bundle_args(plan)
    plan.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite.controllers.plan import plan_from_files

    report = plan_from_files(
        args.controllers,
        args.policies,
        args.parent,
        args.observed,
        controller=args.controller,
        engine=options.engine_settings(args),
        event=args.event,
    )
    print(json.dumps(report.as_dict(), indent=2) if args.format == "json" else report.render())
    return 0
