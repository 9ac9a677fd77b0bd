"""`regokite check`: manifests through the admission policies, offline."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands.options import add_bundle_args, add_policies_arg, engine_settings


def add_parser(sub: Any) -> None:
    chk = sub.add_parser("check", help="offline: the admission policies on manifests, as CREATE reviews")
    add_policies_arg(chk)
    chk.add_argument(
        "-f", "--filename", action="append", required=True, metavar="FILE|DIR|-", help="manifests (repeatable)"
    )
    chk.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="FILE|DIR",
        help="manifests of objects already in the cluster: replicated data for policies, not checked",
    )
    chk.add_argument("--namespace", default="default", help="for namespaced objects that name none")
    chk.add_argument("--format", choices=["pretty", "json"], default="pretty")
    add_bundle_args(chk)
    chk.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite import check
    from regokite.admission.policies import load_policy_set

    manifests = check.read_manifests(args.filename, args.namespace)
    existing = check.read_manifests(args.data, args.namespace)
    policy_set = load_policy_set(args.policies, engine_settings(args))
    try:
        check.check(policy_set, manifests, existing)
    finally:
        policy_set.close()
    print(check.render_json(manifests) if args.format == "json" else check.render_pretty(manifests))
    return 1 if any(m.failures for m in manifests) else 0
