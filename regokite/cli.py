"""The `regokite` command line: parse arguments, call the layer that decides, print."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from regokite import __version__, yamldoc
from regokite.errors import RegokiteError


def _add_bundle_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--v0-compatible",
        action="store_true",
        help="parse modules as Rego v0 (e.g. `deny[msg] { ... }`), as OPA 1.x does",
    )
    p.add_argument(
        "--allow-http-send",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="let http.send reach this host (repeatable); without it a policy calling http.send does not load",
    )


def _add_events_args(parser: argparse.ArgumentParser, process: str) -> None:
    """Gatekeeper's violation Event flags of `process` (admission or audit)."""
    parser.add_argument(
        f"--emit-{process}-events", action="store_true", help="an Event per constraint violation, as Gatekeeper's flag"
    )
    parser.add_argument(
        "--events-namespace",
        default=os.environ.get("POD_NAMESPACE", "gatekeeper-system"),
        metavar="NS",
        help="where violation Events go (default: $POD_NAMESPACE, else gatekeeper-system), as Gatekeeper's own",
    )
    parser.add_argument(
        f"--{process}-events-involved-namespace",
        action="store_true",
        help="put each Event in the resource's namespace, on the resource, as Gatekeeper's flag",
    )


def _add_external_data_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--external-data-provider-response-cache-ttl",
        type=_seconds,
        default=180.0,
        metavar="DURATION",
        help="how long external_data answers are cached (Go duration or seconds; 0 = no cache), as Gatekeeper's",
    )


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"not a whole number of 0 or more: {text!r}")
    return value


def _seconds(text: str) -> float:
    """Seconds, or a Go duration as Gatekeeper's flags take them (`3m`, `90s`, `1h30m`)."""
    import re

    try:
        return float(text)
    except ValueError:
        pass
    parts = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?", text)
    if not text or parts is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 3m, 90s, 0)")
    hours, minutes, secs = (float(g or 0) for g in parts.groups())
    return hours * 3600 + minutes * 60 + secs


def _extension_options(
    args: argparse.Namespace, deadline: float | None = None, client_cert: tuple[str, str] | None = None
) -> Any:
    """The embedded engine's extension builtins for this command; an admission
    request's http.send never outlasts its --deadline. external_data presents
    `client_cert` (the admission server's own, as Gatekeeper presents its webhook's)."""
    from regokite.engine.extensions import ExtensionOptions
    from regokite.engine.extensions.external_data import DEFAULT_CACHE_TTL, ExternalData
    from regokite.engine.extensions.http_send import DEFAULT_TIMEOUT

    hosts = tuple(getattr(args, "allow_http_send", ()))
    ttl = getattr(args, "external_data_provider_response_cache_ttl", DEFAULT_CACHE_TTL)
    if ttl < 0:
        raise RegokiteError("--external-data-provider-response-cache-ttl must be 0 (no cache) or more")
    return ExtensionOptions(
        hosts,
        min(DEFAULT_TIMEOUT, deadline) if deadline else DEFAULT_TIMEOUT,
        ExternalData(cache_ttl=ttl, client_cert=client_cert),
    )


def _cmd_test(args: argparse.Namespace) -> int:
    from regokite import testing
    from regokite.engine import builtin_errors

    if args.log_level.lower() != "debug":  # as opa test, which prints no builtin error it made undefined
        builtin_errors.log.setLevel(logging.ERROR)
    results = testing.run_tests(
        args.paths, run=args.run, engine=_engine_settings(args), strict_builtin_errors=args.strict_builtin_errors
    )
    if args.format == "json":
        print(testing.format_json(results))
    else:
        print(testing.format_pretty(results, verbose=args.verbose))
    return testing.exit_code(results)


def _cmd_verify(args: argparse.Namespace) -> int:
    from regokite.gatekeeper import verify

    suites = verify.find_suites(args.paths)
    if not suites:
        raise RegokiteError(f"no gator Suite ({verify.SUITE_API}) found in {', '.join(args.paths)}")
    results = [verify.run_suite(path, run=args.run, engine=_engine_settings(args)) for path in suites]
    print(verify.format_results(results, verbose=args.verbose))
    return 1 if any(r.failed for r in results) else 0


def _cmd_expand(args: argparse.Namespace) -> int:
    import yaml

    from regokite import check
    from regokite.gatekeeper.constraints import read_sources
    from regokite.gatekeeper.expand import expand

    objects = [m.object for m in check.read_manifests(args.filename, args.namespace)]
    try:
        expanded = expand(read_sources(args.filename), objects)
    except RegokiteError as exc:  # gator expand exits 1 when it cannot expand
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(expanded, indent=2))
    else:
        print(yaml.safe_dump_all(expanded, sort_keys=True), end="")
    return 0


def _cmd_gatekeeper(args: argparse.Namespace) -> int:
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


def _cmd_configmaps(args: argparse.Namespace) -> int:
    import threading

    from regokite.kube.client import KubeClient
    from regokite.sources.configmap_policies import ConfigMapSync, split_namespaces

    namespaces = split_namespaces(args.policy_namespaces)
    sync = ConfigMapSync(KubeClient(args.kubeconfig), Path(args.out), namespaces, _engine_settings(args))
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


@contextlib.contextmanager
def _with_configmap_policies(args: argparse.Namespace) -> Iterator[None]:
    """With `--policy-namespaces`: kube-mgmt's labelled ConfigMaps, followed on a thread of this
    process, become one more `--policies` directory (the same checks and status annotations as
    `regokite configmaps`)."""
    namespaces = getattr(args, "policy_namespaces", None)
    if not namespaces:
        if not args.policies:
            raise RegokiteError("give --policies DIR or --policy-namespaces NS (or both)")
        yield
        return
    from regokite.kube.client import KubeClient
    from regokite.sources.configmap_policies import followed_in_process, split_namespaces

    client = KubeClient(getattr(args, "kubeconfig", None))
    kept = Path(args.policy_namespaces_dir) if args.policy_namespaces_dir else None
    namespaces = split_namespaces(namespaces)
    with followed_in_process(client, namespaces, _engine_settings(args), directory=kept) as out:
        args.policies = [*args.policies, str(out)]
        yield


def _read_input(source: str | None) -> Any:
    from regokite.engine import UNDEFINED

    if source is None:
        return UNDEFINED
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        if source.endswith((".yaml", ".yml")):  # as opa eval -i reads them
            return yamldoc.load(text)
        return json.loads(text)
    except OSError as exc:
        raise RegokiteError(f"{source}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        where = f"{source}:{exc.lineno}:{exc.colno}"
        raise RegokiteError(f"{where}: invalid JSON input: {exc.msg}") from None
    except yamldoc.YAMLError as exc:
        raise RegokiteError(f"{source}: invalid YAML input: {exc}") from None


def _cmd_eval(args: argparse.Namespace) -> int:
    from regokite.engine import open_engine

    settings = _engine_settings(args)
    engine = open_engine(settings.load(args.data).without_tests(), settings)
    try:
        results = engine.query(args.query, _read_input(args.input))
    finally:
        engine.close()
    if args.format == "json":
        print(json.dumps({"result": results} if results else {}, indent=2))
    elif not results:
        print("undefined")
    else:
        for result in results:
            for expression in result["expressions"]:
                print(json.dumps(expression["value"], indent=2))
    return 1 if args.fail and not results else 0


def _cmd_admission(args: argparse.Namespace) -> int:
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
    from regokite.admission.connections import ConnectionLimits
    from regokite.admission.serve import AdmissionSettings, print_ca_bundle, serve
    from regokite.engine import Capability
    from regokite.gatekeeper.exempt import Exemptions
    from regokite.ops.tls import self_signed

    cert, key = args.tls_cert, args.tls_key
    if args.self_signed:
        files = self_signed(Path(args.tls_dir).expanduser(), ["localhost", "127.0.0.1", "::1", *args.tls_host])
        cert, key = str(files.cert), str(files.key)
        print_ca_bundle(files.ca_pem())
    settings = AdmissionSettings(
        policies=args.policies,
        engine=_engine_settings(args, args.deadline, (cert, key)),
        host=args.host,
        port=args.port,
        tls_cert=cert,
        tls_key=key,
        workers=args.workers,
        deadline_seconds=args.deadline,
        watchdog_seconds=args.watchdog,
        worker_memory_bytes=args.worker_memory_limit,
        max_body_bytes=args.max_body_bytes,
        reload_interval=args.reload_interval,
        replicate=_replicate_args(args),
        replicate_path=args.replicate_path,
        kubeconfig=args.kubeconfig,
        local=args.local,
        log_denies=args.log_denies,
        emit_admission_events=args.emit_admission_events,
        events_namespace=args.events_namespace,
        events_involved_namespace=args.admission_events_involved_namespace,
        exemptions=Exemptions(
            tuple(args.exempt_namespace), tuple(args.exempt_namespace_prefix), tuple(args.exempt_namespace_suffix)
        ),
        limits=ConnectionLimits(
            handshake_timeout=args.handshake_timeout,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            keep_alive_timeout=args.keep_alive_timeout,
            max_connections=args.max_connections,
            max_requests=args.max_requests_per_connection,
            max_header_bytes=args.max_header_bytes,
        ),
    )
    if Capability.SIDECAR in settings.engine.capabilities and args.opa_wait > 0:
        _wait_for_opa(settings.engine.opa_url, args.opa_wait)
    try:
        with _with_configmap_policies(args):
            settings.policies = args.policies
            return serve(settings)
    finally:
        if metrics_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _cmd_check(args: argparse.Namespace) -> int:
    from regokite import check
    from regokite.admission.policies import load_policy_set

    manifests = check.read_manifests(args.filename, args.namespace)
    existing = check.read_manifests(args.data, args.namespace)
    policy_set = load_policy_set(args.policies, _engine_settings(args))
    try:
        check.check(policy_set, manifests, existing)
    finally:
        policy_set.close()
    print(check.render_json(manifests) if args.format == "json" else check.render_pretty(manifests))
    return 1 if any(m.failures for m in manifests) else 0


def _replicate_args(args: argparse.Namespace) -> tuple[Any, ...]:
    from regokite.clusterdata.store import parse_resource

    return (
        *(parse_resource(r, namespaced=True) for r in args.replicate),
        *(parse_resource(r, namespaced=False) for r in args.replicate_cluster),
    )


def _add_replicate_args(p: argparse.ArgumentParser, *, declared: bool = False, kubeconfig: bool = True) -> None:
    """`declared`: admission policies' `replicate` declarations add to the flags; `kubeconfig`: the
    command has no --kubeconfig of its own."""
    group = p.add_argument_group("cluster data (kube-mgmt's layout: data.<path>.<resource>[.<namespace>].<name>)")
    group.add_argument(
        "--replicate",
        action="append",
        default=[],
        metavar="[GROUP/]VERSION/RESOURCE",
        help="replicate a namespaced resource (repeatable)"
        + ("; admission policies' `replicate` declarations add theirs" if declared else ""),
    )
    group.add_argument(
        "--replicate-cluster",
        action="append",
        default=[],
        metavar="[GROUP/]VERSION/RESOURCE",
        help="replicate a cluster-scoped resource (repeatable)",
    )
    group.add_argument("--replicate-path", default="kubernetes", help="where in data replicated objects go")
    if kubeconfig:
        group.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, then ~/.kube/config")


def _cmd_audit(args: argparse.Namespace) -> int:
    with _with_configmap_policies(args):
        return _audit(args)


def _audit(args: argparse.Namespace) -> int:
    from regokite.audit import health
    from regokite.audit.run import Audit, AuditSettings, Continuous, render, run_once
    from regokite.kube.client import KubeClient
    from regokite.kube.health import serve_health

    if args.metrics_port is not None and args.once:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
    settings = AuditSettings(
        policies=args.policies,
        kubeconfig=args.kubeconfig,
        engine=_engine_settings(args),
        write_reports=audit_writes_reports(args),
        replicate_path=args.replicate_path,
        jobs=args.jobs,
        constraint_violations_limit=args.constraint_violations_limit,
        page_size=args.audit_chunk_size,
        interval=args.audit_interval,
        emit_audit_events=args.emit_audit_events,
        events_namespace=args.events_namespace,
        events_involved_namespace=args.audit_events_involved_namespace,
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


def _cmd_capabilities(args: argparse.Namespace) -> int:
    from regokite.engine import catalog
    from regokite.engine.extensions import provided

    options = _extension_options(args)
    lists = {
        "regorus": sorted(catalog.regorus_builtins()),
        "added": sorted(provided(options)),
        "refused": sorted(catalog.refused(options)),
    }
    if args.format == "json":
        print(json.dumps(lists, indent=2))
        return 0
    titles = {
        "regorus": "Evaluated by regorus",
        "added": "Added by regokite (Python extensions)",
        "refused": "Refused at load time (use --engine opa; http.send: --allow-http-send)",
    }
    for key, names in lists.items():
        print(f"{titles[key]} ({len(names)}):")
        print("\n".join(f"  {n}" for n in names) or "  (none)")
    return 0


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


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's --help shows the defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if "help" not in kwargs and args and str(args[0]).startswith("-") and kwargs.get("default") is not None:
            kwargs["help"] = "default: %(default)s"  # the formatter shows defaults only beside some help
        return super().add_argument(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="regokite",
        description="Kubernetes automation whose every decision is made by Rego policies.",
    )
    parser.add_argument("--version", action="version", version=f"regokite {__version__}")
    parser.add_argument("--log-level", default="info", help="debug, info, warning, error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_test_command(sub)
    _add_verify_command(sub)
    _add_expand_command(sub)
    _add_gatekeeper_command(sub)
    _add_configmaps_command(sub)
    _add_eval_command(sub)
    _add_admission_command(sub)
    _add_check_command(sub)
    _add_audit_command(sub)
    _add_controller_command(sub)
    _add_hooks_command(sub)
    _add_plan_command(sub)
    _add_capabilities_command(sub)
    from regokite.manifests.command import add_manifests_commands

    add_manifests_commands(sub)
    return parser


def _add_test_command(sub: Any) -> None:
    """`regokite test`: the *_test.rego tests of a bundle, as `opa test`."""
    test = sub.add_parser("test", help="run *_test.rego tests like `opa test`")
    test.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    test.add_argument("-v", "--verbose", action="store_true", help="list every test")
    test.add_argument("--run", "-r", metavar="REGEX", help="only tests whose name matches")
    test.add_argument("--format", choices=["pretty", "json"], default="pretty")
    test.add_argument(
        "--strict-builtin-errors",
        action="store_true",
        help="a builtin's error is the test's error (default, as opa test: the call is undefined)",
    )
    _add_bundle_args(test)
    test.set_defaults(func=_cmd_test)


def _add_verify_command(sub: Any) -> None:
    """`regokite verify`: gator Suite files, as `gator verify`."""
    ver = sub.add_parser("verify", help="run gator Suite files (Gatekeeper ConstraintTemplates) like `gator verify`")
    ver.add_argument("paths", nargs="+", help="suite files or directories holding them")
    ver.add_argument("--run", help="only tests or cases whose name matches this regex")
    ver.add_argument("-v", "--verbose", action="store_true", help="list every test and case")
    ver.add_argument("--allow-http-send", action="append", default=[], metavar="HOST[:PORT]", help=argparse.SUPPRESS)
    ver.set_defaults(func=_cmd_verify)


def _add_expand_command(sub: Any) -> None:
    """`regokite expand`: the resources ExpansionTemplates make, as `gator expand`."""
    exp = sub.add_parser(
        "expand", help="print the resources ExpansionTemplates make of workloads, mutated (gator expand)"
    )
    exp.add_argument(
        "-f", "--filename", action="append", required=True, metavar="FILE|DIR|-",
        help="workloads, ExpansionTemplates, mutators and Namespaces (repeatable)",
    )  # fmt: skip
    exp.add_argument("--namespace", default="default", help="for namespaced objects that name none")
    exp.add_argument("--format", choices=["yaml", "json"], default="yaml")
    exp.set_defaults(func=_cmd_expand)


def _add_gatekeeper_command(sub: Any) -> None:
    """`regokite gatekeeper`: the cluster's ConstraintTemplates and Constraints as files admission serves."""
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
    gk.set_defaults(func=_cmd_gatekeeper)


def _add_configmaps_command(sub: Any) -> None:
    """`regokite configmaps`: kube-mgmt's policy and data ConfigMaps as a policy directory."""
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
    cms.set_defaults(func=_cmd_configmaps)


def _add_eval_command(sub: Any) -> None:
    """`regokite eval`: one query, as `opa eval`."""
    ev = sub.add_parser("eval", help="evaluate a query like `opa eval`")
    ev.add_argument("query", metavar="QUERY")
    ev.add_argument("-d", "--data", action="append", default=[], metavar="PATH", required=True)
    ev.add_argument("-i", "--input", metavar="FILE", help="input JSON (or .yaml) file, or - for stdin (JSON)")
    ev.add_argument("--format", choices=["json", "pretty"], default="json")
    ev.add_argument("--fail", action="store_true", help="exit 1 when the result is undefined")
    _add_engine_args(ev)
    ev.set_defaults(func=_cmd_eval)


def _add_admission_command(sub: Any) -> None:
    """`regokite admission`: the HTTPS admission server."""
    adm = sub.add_parser("admission", help="serve validating and mutating admission webhooks over HTTPS")
    _add_policies_arg(adm, configmaps=True)
    _add_listen_args(adm, 8443)
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
    _add_external_data_args(adm)
    adm.add_argument("--log-denies", action="store_true", help="log each constraint violation, as Gatekeeper's flag")
    _add_events_args(adm, "admission")
    _add_exempt_namespace_args(adm)
    _add_replicate_args(adm, declared=True)
    _add_engine_args(adm)
    adm.set_defaults(func=_cmd_admission)


def _add_connection_limits(adm: argparse.ArgumentParser) -> None:
    """What one admission worker allows each client connection (slow or many clients cannot starve it)."""
    limits = adm.add_argument_group("connection limits (per worker)")
    limits.add_argument("--handshake-timeout", type=float, default=5.0, metavar="SECONDS", help="to finish TLS")
    limits.add_argument("--header-timeout", type=float, default=10.0, metavar="SECONDS", help="to send the headers")
    limits.add_argument("--body-timeout", type=float, default=10.0, metavar="SECONDS", help="to send the body")
    limits.add_argument(
        "--keep-alive-timeout", type=float, default=5.0, metavar="SECONDS", help="idle between requests"
    )
    limits.add_argument("--max-connections", type=int, default=1000, metavar="N", help="open at once, per worker")
    limits.add_argument("--max-requests-per-connection", type=int, default=1000, metavar="N", help="then close")
    limits.add_argument("--max-header-bytes", type=int, default=64 * 1024, metavar="N", help="request line + headers")


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


def _add_check_command(sub: Any) -> None:
    """`regokite check`: manifests through the admission policies, offline."""
    chk = sub.add_parser("check", help="offline: the admission policies on manifests, as CREATE reviews")
    _add_policies_arg(chk)
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
    _add_bundle_args(chk)
    chk.set_defaults(func=_cmd_check)


def _add_audit_command(sub: Any) -> None:
    """`regokite audit`: the admission policies on existing objects."""
    aud = sub.add_parser("audit", help="the admission policies on existing objects: PolicyReports, or once for CI")
    _add_policies_arg(aud, configmaps=True)
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
    _add_external_data_args(aud)
    _add_events_args(aud, "audit")
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
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="continuous mode: a full pass (log lines, constraint status) this often, besides re-auditing"
        " each change, as Gatekeeper's flag; 0: only on start and policy changes",
    )
    _add_engine_args(aud)
    aud.set_defaults(func=_cmd_audit)


def _add_capabilities_command(sub: Any) -> None:
    """`regokite capabilities`: the builtins the embedded engine evaluates, adds and refuses."""
    caps = sub.add_parser("capabilities", help="list the builtins the embedded engine evaluates, adds and refuses")
    caps.add_argument("--format", choices=["pretty", "json"], default="pretty")
    caps.add_argument("--allow-http-send", action="append", default=[], metavar="HOST[:PORT]")
    caps.set_defaults(func=_cmd_capabilities)


def _cmd_controller(args: argparse.Namespace) -> int:
    with _with_configmap_policies(args):
        return _controller(args)


def _controller(args: argparse.Namespace) -> int:
    from regokite.commands.controller import ControllerSettings, serve

    return serve(
        ControllerSettings(
            policies=args.policies,
            controllers=args.controllers,
            kubeconfig=args.kubeconfig,
            namespace=args.namespace,
            workers=args.workers,
            **({"hook_processes": args.hook_processes} if args.hook_processes else {}),
            engine=_engine_settings(args),
            metrics_port=args.metrics_port,
            vars=args.var,
            field_manager=args.field_manager,
            leader=_leader_settings(args) if args.leader_elect else None,
            shards=_leader_settings(args) if args.shards else None,
            watch_definitions=args.watch_definitions or not args.controllers,  # no files: the cluster's
            replicate=_replicate_args(args),
            replicate_path=args.replicate_path,
        )
    )


def _leader_settings(args: argparse.Namespace) -> Any:
    """The Lease options, for the leader Lease or (--shards) each replica's membership Lease."""
    from regokite.kube.leader import LeaderSettings

    return LeaderSettings(
        name=args.leader_election_name,
        namespace=args.leader_election_namespace,
        identity=args.leader_election_id,
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
    )


def _cmd_hooks(args: argparse.Namespace) -> int:
    with _with_configmap_policies(args):
        return _hooks(args)


def _hooks(args: argparse.Namespace) -> int:
    from regokite.hookserving.process import serve_hooks

    return serve_hooks(
        args.policies,
        host=args.host,
        port=args.port,
        engine=_engine_settings(args),
        replicate=_replicate_args(args),
        replicate_path=args.replicate_path,
        kubeconfig=args.kubeconfig,
    )


def _cmd_plan(args: argparse.Namespace) -> int:
    from regokite.controllers.plan import plan_from_files

    report = plan_from_files(
        args.controllers,
        args.policies,
        args.parent,
        args.observed,
        controller=args.controller,
        engine=_engine_settings(args),
        event=args.event,
    )
    print(json.dumps(report.as_dict(), indent=2) if args.format == "json" else report.render())
    return 0


def _add_controller_command(sub: Any) -> None:
    """`regokite controller`: Composite/DecoratorControllers and Watches run on the cluster."""
    ctl = sub.add_parser(
        "controller", help="run Metacontroller Composite/DecoratorControllers and regokite Watches whose hooks are Rego"
    )
    _add_policies_arg(ctl, configmaps=True)
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
    _add_replicate_args(ctl, kubeconfig=False)
    _add_engine_args(ctl)
    ctl.set_defaults(func=_cmd_controller)


def _add_leader_election_args(ctl: argparse.ArgumentParser) -> None:
    """One leader, or shards, over Leases (kube.leader, kube.shards)."""
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


def _add_hooks_command(sub: Any) -> None:
    """`regokite hooks`: Rego packages as Metacontroller webhooks."""
    hooks = sub.add_parser("hooks", help="serve Rego packages as Metacontroller webhooks over HTTP")
    _add_policies_arg(hooks, configmaps=True)
    _add_listen_args(hooks, 8181)
    _add_engine_args(hooks)
    _add_replicate_args(hooks)
    hooks.set_defaults(func=_cmd_hooks)


def _add_plan_command(sub: Any) -> None:
    """`regokite plan`: what a controller would write for one object, offline."""
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
    _add_bundle_args(plan)
    plan.set_defaults(func=_cmd_plan)


def _add_policies_arg(p: argparse.ArgumentParser, *, configmaps: bool = False) -> None:
    """`configmaps`: the server may take its policies from ConfigMaps instead (`--policy-namespaces`)."""
    if not configmaps:
        p.add_argument("--policies", action="append", required=True, metavar="DIR", help="policy dir (repeatable)")
        return
    p.add_argument("--policies", action="append", default=[], metavar="DIR", help="policy dir (repeatable)")
    p.add_argument(
        "--policy-namespaces",
        action="append",
        default=[],
        metavar="NS[,NS...]",
        help="also serve kube-mgmt's labelled policy/data ConfigMaps of these namespaces (repeatable; * for all), "
        "followed in process as `regokite configmaps` does (needs get/list/watch/patch on configmaps)",
    )
    p.add_argument(
        "--policy-namespaces-dir",
        metavar="DIR",
        help="where --policy-namespaces writes the ConfigMaps (default: a temporary directory, removed at exit); "
        "one that outlives the process (an emptyDir) keeps the last good content of a refused ConfigMap across "
        "restarts",
    )


def _add_listen_args(p: argparse.ArgumentParser, port: int) -> None:
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=port)


def _engine_settings(
    args: argparse.Namespace, deadline: float | None = None, client_cert: tuple[str, str] | None = None
) -> Any:
    """What every engine of this command is built from, read from its flags in this one place: --engine
    and --opa-url (_add_engine_args), --v0-compatible and the extension builtins' flags, each where the
    command has it (the embedded engine, Rego v1 and the extensions' defaults where not)."""
    from regokite.engine import OPA_URL, EngineSettings

    return EngineSettings(
        kind=getattr(args, "engine", "embedded"),
        opa_url=getattr(args, "opa_url", OPA_URL),
        v0_compatible=getattr(args, "v0_compatible", False),
        extensions=_extension_options(args, deadline, client_cert),
        strict_builtin_errors=getattr(args, "strict_builtin_errors", False),
    )


def _add_engine_args(p: argparse.ArgumentParser) -> None:
    """Which engine evaluates the policies, then how their bundle is read (_add_bundle_args)."""
    from regokite.engine import KINDS, OPA_URL

    p.add_argument("--engine", choices=list(KINDS), default="embedded")
    p.add_argument("--opa-url", default=OPA_URL, help="sidecar OPA address")
    p.add_argument(
        "--strict-builtin-errors",
        action="store_true",
        help="a builtin's error is the evaluation's error (default, as OPA and Gatekeeper: the call is undefined, "
        "and logged)",
    )
    _add_bundle_args(p)


def main(argv: Sequence[str] | None = None) -> int:
    from regokite.ops import logging as ops_logging

    args = build_parser().parse_args(argv)
    ops_logging.configure(args.log_level)
    try:
        return args.func(args)
    except RegokiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
