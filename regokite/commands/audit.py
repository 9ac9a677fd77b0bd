"""`regokite audit`: the admission policies on existing objects."""

from __future__ import annotations

import argparse
import os
from typing import Any

from regokite.commands import options


def add_parser(sub: Any) -> None:
    aud = sub.add_parser("audit", help="the admission policies on existing objects: PolicyReports, or once for CI")
    options.add_policies_arg(aud, configmaps=True)
    aud.add_argument("--once", action="store_true", help="one pass, print the findings, exit 1 on any fail")
    aud.add_argument("--format", choices=["pretty", "json"], default="pretty", help="with --once")
    writes = aud.add_mutually_exclusive_group()
    writes.add_argument(
        "--reports",
        action="store_true",
        default=None,
        help="write PolicyReports and constraint status (the default, except with --once)",
    )
    writes.add_argument(
        "--no-reports",
        dest="reports",
        action="store_false",
        help="write no PolicyReports or constraint status (the default with --once)",
    )
    aud.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="with --once: processes deciding (embedded engine)"
    )
    aud.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, then ~/.kube/config")
    aud.add_argument("--replicate-path", default="kubernetes", help="where in data replicated objects go")
    aud.add_argument(
        "--metrics-port", type=int, help="serve /metrics, and /healthz and /readyz when continuous, on this port"
    )
    options.add_external_data_args(aud)
    options.add_events_args(aud, "audit")
    aud.add_argument(
        "--constraint-violations-limit",
        type=int,
        default=20,
        metavar="N",
        help="violations listed in a Gatekeeper constraint's status (all are counted), as Gatekeeper's flag",
    )
    aud.add_argument(
        "--audit-chunk-size",
        type=_non_negative_int,
        default=500,
        metavar="N",
        help="objects per list call (limit/continue pages), as Gatekeeper's flag; 0: unpaged",
    )
    aud.add_argument(
        "--audit-interval",
        type=options.seconds,
        default=60.0,
        metavar="SECONDS",
        help="continuous mode: a full pass (log lines, constraint status) this often, besides re-auditing"
        " each change, as Gatekeeper's flag; 0: only on start and policy changes",
    )
    add_export_args(aud)
    options.add_engine_args(aud)
    aud.set_defaults(func=run)


def add_export_args(aud: argparse.ArgumentParser) -> None:
    """Gatekeeper's violation export flags; the disk Connection's config (`path`, `maxAuditResults`) as flags."""
    from regokite.audit import export

    aud.add_argument(
        "--enable-violation-export",
        action="store_true",
        help="write each audit run's violations as Gatekeeper's export disk driver does (JSON lines,"
        " <export-path>/<audit-channel>/<audit id>.log), as Gatekeeper's flag",
    )
    aud.add_argument(
        "--audit-channel",
        default=export.DEFAULT_CHANNEL,
        help="the export's channel: its directory under --export-path",
    )
    aud.add_argument(
        "--export-path",
        default=export.DEFAULT_PATH,
        metavar="DIR",
        help="the disk Connection's `path` (default: Gatekeeper's chart's)",
    )
    aud.add_argument(
        "--export-max-audit-results",
        type=int,
        default=export.DEFAULT_KEPT,
        metavar="N",
        help=f"the disk Connection's `maxAuditResults`: runs kept, at most {export.MAX_KEPT}",
    )


def run(args: argparse.Namespace) -> int:
    from regokite.audit import health
    from regokite.audit.export import DiskExport
    from regokite.audit.run import Audit, AuditSettings, Continuous, render, run_once
    from regokite.kube.client import KubeClient
    from regokite.runtime.health import serve_health

    with options.with_configmap_policies(args):
        if args.metrics_port is not None and args.once:
            from prometheus_client import start_http_server

            start_http_server(args.metrics_port)
        settings = AuditSettings(
            policies=args.policies,
            kubeconfig=args.kubeconfig,
            engine=options.engine_settings(args),
            write_reports=audit_writes_reports(args),
            replicate_path=args.replicate_path,
            jobs=args.jobs,
            constraint_violations_limit=args.constraint_violations_limit,
            page_size=args.audit_chunk_size,
            interval=args.audit_interval,
            emit_audit_events=args.emit_audit_events,
            events_namespace=args.events_namespace,
            events_involved_namespace=args.audit_events_involved_namespace,
            export=DiskExport(args.export_path, args.audit_channel, args.export_max_audit_results)
            if args.enable_violation_export
            else None,
        )
        audit = Audit(settings, KubeClient(args.kubeconfig))
        if not args.once:
            continuous = Continuous(audit)
            if args.metrics_port is not None:
                serve_health(args.metrics_port, "0.0.0.0", lambda: health.liveness(continuous),
                             lambda: health.readiness(continuous))  # fmt: skip
            return continuous.run()
        run_once(audit)
        print(render(audit, args.format))
        return 1 if any(r.result == "fail" for _, results in audit.findings.values() for r in results) else 0


def audit_writes_reports(args: argparse.Namespace) -> bool:
    """Continuous audit writes PolicyReports unless --no-reports; --once is a CI check that prints,
    and writes (so needs the report CRDs) only with --reports."""
    return not args.once if args.reports is None else args.reports


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a whole number of 0 or more: {text!r}")
    return value
