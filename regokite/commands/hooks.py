"""`regokite hooks`: Rego packages as Metacontroller webhooks."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands.options import (
    add_engine_args,
    add_listen_args,
    add_policies_arg,
    add_replicate_args,
    engine_settings,
    replicate_args,
    with_configmap_policies,
)


def add_parser(sub: Any) -> None:
    hooks = sub.add_parser("hooks", help="serve Rego packages as Metacontroller webhooks over HTTP")
    add_policies_arg(hooks, configmaps=True)
    add_listen_args(hooks, 8181)
    add_engine_args(hooks)
    add_replicate_args(hooks)
    hooks.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with with_configmap_policies(args):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from regokite.hookserving.process import serve_hooks

    return serve_hooks(
        args.policies,
        host=args.host,
        port=args.port,
        engine=engine_settings(args),
        replicate=replicate_args(args),
        replicate_path=args.replicate_path,
        kubeconfig=args.kubeconfig,
    )
