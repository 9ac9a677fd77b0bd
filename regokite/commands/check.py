"""`regokite check`: manifests through the admission policies, offline."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands import options
from regokite.errors import RegokiteError
from regokite.gatekeeper.enforcement import GATOR, POINT_OF_PROCESS

POINTS = {point: process for process, point in POINT_OF_PROCESS.items()}  # the process judging at each point


def add_parser(sub: Any) -> None:
    chk = sub.add_parser("check", help="offline: the admission policies on manifests, as CREATE reviews")
    options.add_policies_arg(chk)
    chk.add_argument("-f", "--filename", action="append", metavar="FILE|DIR|-", help="manifests (repeatable)")
    chk.add_argument(
        "--data", action="append", default=[], metavar="FILE|DIR",
        help="manifests of objects already in the cluster: replicated data for policies, not checked",
    )  # fmt: skip
    chk.add_argument("--namespace", default="default", help="for namespaced objects that name none")
    chk.add_argument("--format", choices=["pretty", "json", "yaml"], default="pretty")
    chk.add_argument(
        "--enforcement-point",
        choices=sorted(POINTS),
        default=GATOR,
        help="the Gatekeeper enforcement point constraints are judged at (scopedEnforcementActions, a template's"
        " operations, the Config's exclusions): gator's, as `gator test`, or the admission webhook's or audit's",
    )
    chk.add_argument(
        "--mutation-annotations",
        action="store_true",
        help="a mutated object records its mutators, as the admission server's flag (Gatekeeper's) has it",
    )
    options.add_bundle_args(chk)
    chk.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite import check
    from regokite.admission.policies import load_policy_set

    manifests = check.read_manifests(args.filename or [], args.namespace)
    if not manifests:  # as gator test
        raise RegokiteError("no input data identified")
    existing = check.read_manifests(args.data, args.namespace)
    policy_set = load_policy_set(
        args.policies, options.engine_settings(args), mutation_annotations=args.mutation_annotations
    )
    try:
        check.check(policy_set, manifests, existing, POINTS[args.enforcement_point])
    finally:
        policy_set.close()
    render = {"json": check.render_json, "yaml": check.render_yaml}.get(args.format, check.render_pretty)
    print(render(manifests))
    return 1 if any(m.failures for m in manifests) else 0
