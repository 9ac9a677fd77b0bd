"""`regokite configmaps`: kube-mgmt's policy and data ConfigMaps as a policy directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from regokite.commands import options


def add_parser(sub: Any) -> None:
    cms = sub.add_parser(
        "configmaps",
        help="kube-mgmt's policy and data ConfigMaps, written as a policy directory other commands serve",
    )
    cms.add_argument("--out", required=True, help="directory to write them into (a --policies of admission etc.)")
    cms.add_argument(
        "--policy-namespaces",
        action="append",
        required=True,
        metavar="NS[,NS...]",
        help="namespaces whose labelled ConfigMaps are loaded (repeatable; * for all), as kube-mgmt's --namespaces",
    )
    cms.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, then ~/.kube/config")
    cms.add_argument("--once", action="store_true", help="one pass, print each ConfigMap's outcome")
    cms.add_argument("--v0-compatible", action="store_true", help="the modules are Rego v0")
    cms.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import threading

    from regokite.kube.client import KubeClient
    from regokite.sources.configmap_policies import ConfigMapSync, split_namespaces

    namespaces = split_namespaces(args.policy_namespaces)
    sync = ConfigMapSync(KubeClient(args.kubeconfig), Path(args.out), namespaces, options.engine_settings(args))
    sync.start()
    try:
        if args.once:
            for ident, error in sync.sync_now().items():
                print(f"{ident}: {error or 'ok'}")
            return 0
        sync.run(threading.Event())
    finally:
        sync.stop()
    return 0
