"""`regokite hooks`: Rego packages as Metacontroller webhooks."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands import options


def add_parser(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="serve Rego packages as Metacontroller webhooks over HTTP")
    options.add_policies_arg(hooks, configmaps=True)
    options.add_listen_args(hooks, 8181)
    options.add_engine_args(hooks)
    options.add_replicate_args(hooks)
    hooks.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite.hookserving.process import serve_hooks

    with options.with_configmap_policies(args):
        return serve_hooks(
            args.policies,
            host=args.host,
            port=args.port,
            engine=options.engine_settings(args),
            replicate=options.replicate_args(args),
            replicate_path=args.replicate_path,
            kubeconfig=args.kubeconfig,
        )
