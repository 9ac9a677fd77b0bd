"""`regokite gatekeeper`: the cluster's ConstraintTemplates and Constraints as files admission serves."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    gk = sub.add_parser(
        "gatekeeper", help="serve the cluster's ConstraintTemplates and Constraints: CRDs, status, files for admission"
    )
    gk.add_argument("--kubeconfig", help="default: in-cluster, then ~/.kube/config")
    gk.add_argument(
        "--out", required=True, help="directory to write templates and constraints into (an admission --policies)"
    )
    gk.add_argument(
        "--interval", type=float, default=60.0, help="seconds between passes besides those on changes (watched)"
    )
    gk.add_argument("--once", action="store_true", help="one pass, print each template's outcome")
    gk.add_argument(
        "--config-namespace", default="gatekeeper-system", help="where Gatekeeper's Config (named config) is read"
    )
    gk.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from regokite.kube.client import KubeClient
    from regokite.sources.gatekeeper_objects import GatekeeperSync

    sync = GatekeeperSync(KubeClient(args.kubeconfig), Path(args.out), args.config_namespace)
    sync.install()
    if args.once:
        for kind, error in sync.sync_once().items():
            print(f"{kind}: {error or 'served'}")
        return 0
    sync.run(args.interval)
    return 0
