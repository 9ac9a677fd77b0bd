"""`regokite controller`: Composite/DecoratorControllers and Watches run on the cluster."""

from __future__ import annotations

import argparse
from typing import Any

from regokite.commands import options


def add_parser(sub: Any) -> None:
    ctl = sub.add_parser(
        "controller", help="run Metacontroller Composite/DecoratorControllers and regokite Watches whose hooks are Rego"
    )
    options.add_policies_arg(ctl, configmaps=True)
    ctl.add_argument("--controllers", action="append", default=[], metavar="PATH", help="definitions file or dir")
    ctl.add_argument(
        "--watch-definitions",
        action="store_true",
        help="also run the CompositeControllers, DecoratorControllers and Watches on the API server: applied, edited "
        "and deleted definitions start, reconfigure and stop their controllers; each gets an Accepted status "
        "(the default when no --controllers is given)",
    )
    ctl.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, then ~/.kube/config")
    ctl.add_argument("--namespace", help="only watch namespaced resources in this namespace")
    ctl.add_argument("--workers", type=int, default=8, help="worker threads (default 8: bench.controller_converge)")
    ctl.add_argument(
        "--hook-processes",
        type=int,
        metavar="N",
        help="processes evaluating hooks, each call bounded by its hook's timeout "
        "(default: one per usable core, a container's CPU limit counted)",
    )
    ctl.add_argument("--metrics-port", type=int, help="serve /metrics, /healthz and /readyz on this port")
    ctl.add_argument(
        "--var", action="append", default=[], metavar="[WATCH/]KEY=VALUE", help="set a Watch param (VALUE is YAML)"
    )
    ctl.add_argument("--field-manager", default="regokite", help="field manager of every write (default regokite)")
    _add_leader_election_args(ctl)
    options.add_replicate_args(ctl, kubeconfig=False)
    options.add_engine_args(ctl)
    ctl.set_defaults(func=run)


def _add_leader_election_args(ctl: argparse.ArgumentParser) -> None:
    """One leader, or shards, over Leases (runtime.leader, runtime.shards)."""
    le = ctl.add_argument_group(
        "leader election or sharding (coordination.k8s.io/v1 Leases)",
        "--shards splits the objects between every replica started with --shards and the same Lease name, "
        "each holding a Lease <name>-<identity>; an object moves only after its owner has stopped acting on it",
    )
    one = le.add_mutually_exclusive_group()
    one.add_argument("--leader-elect", action="store_true", help="act only while holding the Lease; standbys stay warm")
    one.add_argument("--shards", action="store_true", help="act on this replica's share of the objects (see above)")
    le.add_argument("--leader-election-name", default="regokite-controller", help="the Lease's name (--shards: prefix)")
    le.add_argument("--leader-election-namespace", help="the Lease's namespace (default: $POD_NAMESPACE, in-cluster)")
    le.add_argument("--leader-election-id", help="this replica's identity (default: $POD_NAME, else hostname_<id>)")
    le.add_argument("--leader-election-lease-duration", type=float, default=15.0, metavar="SECONDS")
    le.add_argument("--leader-election-renew-deadline", type=float, default=10.0, metavar="SECONDS")
    le.add_argument("--leader-election-retry-period", type=float, default=2.0, metavar="SECONDS")


def run(args: argparse.Namespace) -> int:
    from regokite.controllers.process import ControllerSettings, serve

    with options.with_configmap_policies(args):
        return serve(
            ControllerSettings(
                policies=args.policies,
                controllers=args.controllers,
                kubeconfig=args.kubeconfig,
                namespace=args.namespace,
                workers=args.workers,
                **({"hook_processes": args.hook_processes} if args.hook_processes else {}),
                engine=options.engine_settings(args),
                metrics_port=args.metrics_port,
                vars=args.var,
                field_manager=args.field_manager,
                leader=_leader_settings(args) if args.leader_elect else None,
                shards=_leader_settings(args) if args.shards else None,
                watch_definitions=args.watch_definitions or not args.controllers,  # no files: the cluster's
                replicate=options.replicate_args(args),
                replicate_path=args.replicate_path,
            )
        )


def _leader_settings(args: argparse.Namespace) -> Any:
    """The Lease options, for the leader Lease or (--shards) each replica's membership Lease."""
    from regokite.runtime.leader import LeaderSettings

    return LeaderSettings(
        name=args.leader_election_name,
        namespace=args.leader_election_namespace,
        identity=args.leader_election_id,
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
    )
