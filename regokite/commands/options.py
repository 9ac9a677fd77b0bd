"""Flags and settings several commands share: policies, engine, bundle, cluster data, listening, durations."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from regokite.errors import RegokiteError


def add_policies_arg(p: argparse.ArgumentParser, *, configmaps: bool = False) -> None:
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


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """Which engine evaluates the policies, then how their bundle is read (add_bundle_args)."""
    from regokite.engine import KINDS, OPA_URL

    p.add_argument("--engine", choices=list(KINDS), default="embedded")
    p.add_argument("--opa-url", default=OPA_URL, help="sidecar OPA address")
    p.add_argument(
        "--strict-builtin-errors",
        action="store_true",
        help="a builtin's error is the evaluation's error (default, as OPA and Gatekeeper: the call is undefined, "
        "and logged)",
    )
    add_bundle_args(p)


def add_bundle_args(p: argparse.ArgumentParser) -> None:
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


def engine_settings(
    args: argparse.Namespace, deadline: float | None = None, client_cert: tuple[str, str] | None = None
) -> Any:
    """What every engine of this command is built from, read from its flags in this one place: --engine
    and --opa-url (add_engine_args), --v0-compatible and the extension builtins' flags, each where the
    command has it (the embedded engine, Rego v1 and the extensions' defaults where not)."""
    from regokite.engine import OPA_URL, EngineSettings

    return EngineSettings(
        kind=getattr(args, "engine", "embedded"),
        opa_url=getattr(args, "opa_url", OPA_URL),
        v0_compatible=getattr(args, "v0_compatible", False),
        extensions=extension_options(args, deadline, client_cert),
        strict_builtin_errors=getattr(args, "strict_builtin_errors", False),
    )


def extension_options(
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


@contextlib.contextmanager
def with_configmap_policies(args: argparse.Namespace) -> Iterator[tuple[Path, list[str]] | None]:
    """With `--policy-namespaces`: kube-mgmt's labelled ConfigMaps, followed on a thread of this
    process, become one more `--policies` directory (the same checks and status annotations as
    `regokite configmaps`). Yields the ConfigMaps' directory and namespaces (None without)."""
    namespaces = getattr(args, "policy_namespaces", None)
    if not namespaces:
        if not args.policies and not (getattr(args, "bundle", None) or getattr(args, "config_file", None)):
            raise RegokiteError("give --policies DIR, --policy-namespaces NS, --bundle or --config-file")
        yield None
        return
    from regokite.kube.client import KubeClient
    from regokite.sources.configmap_policies import followed_in_process, split_namespaces

    client = KubeClient(getattr(args, "kubeconfig", None))
    kept = Path(args.policy_namespaces_dir) if args.policy_namespaces_dir else None
    namespaces = split_namespaces(namespaces)
    with followed_in_process(client, namespaces, engine_settings(args), directory=kept) as out:
        args.policies = [*args.policies, str(out)]
        yield out, namespaces


def add_bundle_service_args(p: argparse.ArgumentParser) -> None:
    """OPA's bundles: `--bundle` files, directories and URLs, and OPA's configuration file."""
    group = p.add_argument_group("OPA bundles (docs/switching/opa-bundles.md)")
    group.add_argument(
        "--bundle",
        action="append",
        default=[],
        metavar="PATH_OR_URL",
        help="serve a bundle (repeatable): a .tar.gz or bundle directory, reloaded when it changes, or an"
        " http(s) URL polled as a bundle service with OPA's defaults",
    )
    group.add_argument(
        "--config-file",
        metavar="FILE",
        help="OPA's configuration file: services, bundles (polled, verified, persisted), keys, status,"
        " decision_logs, labels, persistence_directory; keys regokite does not serve are refused by name",
    )


def served_bundles(args: argparse.Namespace) -> Any:
    """`--bundle` and `--config-file` read (the configuration file once, here)."""
    from regokite.bundles.served import ServedBundles
    from regokite.decisionlogs import config as decisionlog_config

    served = ServedBundles.given(
        getattr(args, "bundle", []) or [], getattr(args, "config_file", None), v0_compatible=args.v0_compatible
    )
    config = served.config
    if config.decision_logs is not None:  # refused here, at start, rather than in each worker
        decisionlog_config.parse(config.decision_logs, config.services, config.labels)
    return served


def add_replicate_args(p: argparse.ArgumentParser, *, declared: bool = False, kubeconfig: bool = True) -> None:
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


def replicate_args(args: argparse.Namespace) -> tuple[Any, ...]:
    from regokite.clusterdata.store import parse_resource

    return (
        *(parse_resource(r, namespaced=True) for r in args.replicate),
        *(parse_resource(r, namespaced=False) for r in args.replicate_cluster),
    )


def add_listen_args(p: argparse.ArgumentParser, port: int) -> None:
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=port)


def add_external_data_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--external-data-provider-response-cache-ttl",
        type=seconds,
        default=180.0,
        metavar="DURATION",
        help="how long external_data answers are cached (Go duration or seconds; 0 = no cache), as Gatekeeper's",
    )


def add_events_args(parser: argparse.ArgumentParser, process: str) -> None:
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


def seconds(text: str) -> float:
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
