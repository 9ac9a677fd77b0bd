"""`regokite admission`: the HTTPS admission server."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from regokite.admission.limits import ConnectionLimits
from regokite.commands import options
from regokite.errors import RegokiteError


def add_parser(sub: Any) -> None:
    adm = sub.add_parser("admission", help="serve validating and mutating admission webhooks over HTTPS")
    options.add_policies_arg(adm, configmaps=True)
    options.add_listen_args(adm, 8443)
    adm.add_argument("--tls-cert", metavar="FILE")
    adm.add_argument("--tls-key", metavar="FILE")
    adm.add_argument("--self-signed", action="store_true", help="make a CA and certificate; print the caBundle")
    adm.add_argument("--tls-dir", default="~/.cache/regokite/tls", help="where --self-signed keeps its files")
    adm.add_argument("--tls-host", action="append", default=[], help="extra DNS name or IP for --self-signed")
    adm.add_argument("--workers", type=int, default=1, help="worker processes (regorus holds the GIL)")
    adm.add_argument("--deadline", type=float, default=3.0, metavar="SECONDS", help="per-request evaluation budget")
    adm.add_argument(
        "--watchdog",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="replace a worker stuck this long in one review (a runaway policy); a step of a replica load"
        " has 60 s; 0 = never",
    )
    adm.add_argument(
        "--worker-memory-limit",
        type=_bytes,
        default="256Mi",
        metavar="BYTES",
        help="replace a worker resident past this (Mi/Gi suffixes) plus an allowance for its replicated cluster"
        " data (12 bytes per byte of the objects' JSON text); 0 = never",
    )
    adm.add_argument("--max-body-bytes", type=int, default=8 * 1024 * 1024, help="larger bodies get a 400")
    _add_connection_limits(adm)
    adm.add_argument(
        "--reload-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often policy and TLS files are checked",
    )
    adm.add_argument("--opa-wait", type=float, default=0.0, metavar="SECONDS", help="wait for OPA's /health")
    adm.add_argument(
        "--local",
        action="store_true",
        help="no cluster (a first run, a laptop): policies that read cluster data are not served, and say so;"
        " without it they refuse what they match when the data cannot be replicated (fail closed)",
    )
    options.add_external_data_args(adm)
    adm.add_argument("--log-denies", action="store_true", help="log each constraint violation, as Gatekeeper's flag")
    adm.add_argument(
        "--shutdown-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep serving this long after SIGTERM before stopping, so the API server stops calling a Pod being"
        " deleted before it goes (Gatekeeper's flag; its default is 10); a second signal stops at once",
    )
    adm.add_argument(
        "--mutation-annotations",
        action="store_true",
        help="a mutated object records its mutators (gatekeeper.sh/mutations) and a mutation-id, as Gatekeeper's flag",
    )
    options.add_events_args(adm, "admission")
    _add_exempt_namespace_args(adm)
    options.add_replicate_args(adm, declared=True)
    options.add_engine_args(adm)
    options.add_bundle_service_args(adm)
    adm.set_defaults(func=run)


# each of ConnectionLimits' fields: its flag, the flag's metavar and help (its default is the field's)
CONNECTION_LIMITS = {
    "handshake_timeout": ("--handshake-timeout", "SECONDS", "to finish TLS"),
    "header_timeout": ("--header-timeout", "SECONDS", "to send the headers"),
    "body_timeout": ("--body-timeout", "SECONDS", "to send the body"),
    "keep_alive_timeout": ("--keep-alive-timeout", "SECONDS", "idle between requests"),
    "max_connections": ("--max-connections", "N", "open at once, per worker"),
    "max_requests": ("--max-requests-per-connection", "N", "then close"),
    "max_header_bytes": ("--max-header-bytes", "N", "request line + headers"),
}


def _add_connection_limits(adm: argparse.ArgumentParser) -> None:
    """What one admission worker allows each client connection (slow or many clients cannot starve it)."""
    limits = adm.add_argument_group("connection limits (per worker)")
    defaults = ConnectionLimits()
    for name, (flag, metavar, what) in CONNECTION_LIMITS.items():
        default = getattr(defaults, name)
        limits.add_argument(flag, dest=name, type=type(default), default=default, metavar=metavar, help=what)


def _add_exempt_namespace_args(adm: argparse.ArgumentParser) -> None:
    """Gatekeeper's --exempt-namespace flags: which namespaces may carry its ignore label."""
    for suffix, what in (
        ("", "this namespace"),
        ("-prefix", "namespaces with this prefix"),
        ("-suffix", "namespaces with this suffix"),
    ):
        adm.add_argument(
            f"--exempt-namespace{suffix}",
            action="append",
            default=[],
            metavar="NS",
            help=f"{what} may carry the admission.gatekeeper.sh/ignore label (POST /v1/admitlabel)",
        )


def run(args: argparse.Namespace) -> int:
    if 0 < args.watchdog <= args.deadline:
        raise RegokiteError(f"--watchdog ({args.watchdog}s) must exceed --deadline ({args.deadline}s), or be 0")
    if args.self_signed == bool(args.tls_cert and args.tls_key):
        raise RegokiteError("choose TLS: either --tls-cert and --tls-key, or --self-signed")
    if args.local and (args.replicate or args.replicate_cluster or args.kubeconfig or args.policy_namespaces):
        raise RegokiteError(
            "--local talks to no cluster: drop --replicate, --replicate-cluster, --kubeconfig and --policy-namespaces"
        )
    metrics_dir = None
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # must be set before prometheus_client is imported, for workers (always forked) to share metrics
        metrics_dir = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="regokite-metrics-")
    from regokite.admission.settings import AdmissionSettings
    from regokite.admission.supervisor import serve
    from regokite.engine import Capability
    from regokite.gatekeeper.exempt import Exemptions
    from regokite.ops.tls import self_signed
    from regokite.sources.applied import SourceChecks

    cert, key = args.tls_cert, args.tls_key
    if args.self_signed:
        files = self_signed(Path(args.tls_dir).expanduser(), ["localhost", "127.0.0.1", "::1", *args.tls_host])
        cert, key = str(files.cert), str(files.key)
        _print_ca_bundle(files.ca_pem())
    settings = AdmissionSettings(
        policies=args.policies,
        engine=options.engine_settings(args, args.deadline, (cert, key)),
        host=args.host,
        port=args.port,
        tls_cert=cert,
        tls_key=key,
        workers=args.workers,
        deadline_seconds=args.deadline,
        watchdog_seconds=args.watchdog,
        shutdown_delay=args.shutdown_delay,
        worker_memory_bytes=args.worker_memory_limit,
        max_body_bytes=args.max_body_bytes,
        reload_interval=args.reload_interval,
        replicate=options.replicate_args(args),
        replicate_path=args.replicate_path,
        kubeconfig=args.kubeconfig,
        local=args.local,
        log_denies=args.log_denies,
        mutation_annotations=args.mutation_annotations,
        emit_admission_events=args.emit_admission_events,
        events_namespace=args.events_namespace,
        events_involved_namespace=args.admission_events_involved_namespace,
        exemptions=Exemptions(
            tuple(args.exempt_namespace), tuple(args.exempt_namespace_prefix), tuple(args.exempt_namespace_suffix)
        ),
        limits=ConnectionLimits(**{name: getattr(args, name) for name in CONNECTION_LIMITS}),
        bundles=options.served_bundles(args),
    )
    if Capability.SIDECAR in settings.engine.capabilities and args.opa_wait > 0:
        _wait_for_opa(settings.engine.opa_url, args.opa_wait)
    try:
        with options.with_configmap_policies(args) as configmaps:
            settings.policies = args.policies
            directory, namespaces = configmaps or (None, [])
            settings.source_checks = SourceChecks(settings.engine, directory, tuple(namespaces))
            return serve(settings)
    finally:
        if metrics_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _wait_for_opa(url: str, seconds: float) -> None:
    """A sidecar starts beside regokite, not before it: wait for its /health before pushing policies."""
    import time
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() >= deadline:
            raise RegokiteError(f"OPA at {url} did not answer /health within {seconds:g}s")
        time.sleep(0.25)


def _bytes(text: str) -> int:
    """A size in bytes, with an optional Ki/Mi/Gi suffix as in Kubernetes quantities."""
    for suffix, factor in (("Ki", 2**10), ("Mi", 2**20), ("Gi", 2**30)):
        if text.endswith(suffix):
            return int(text.removesuffix(suffix)) * factor
    return int(text)


def _print_ca_bundle(ca_pem: bytes) -> None:
    import base64

    print(f"caBundle: {base64.b64encode(ca_pem).decode()}", flush=True)
    sys.stdout.flush()
