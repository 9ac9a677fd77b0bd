"""`regokite manifests admission|audit|controller`: parse, generate, print multi-document YAML."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from regokite.admission.webhook_knobs import WebhookSettings, settings_from_values
from regokite.engine import KINDS
from regokite.manifests import bundles, chart, generate
from regokite.manifests.bundles import BundleOptions


def _common(p: argparse.ArgumentParser, default_name: str, *, scaled: bool = True) -> None:
    p.add_argument("--policies", action="append", metavar="DIR", help="policy dir (repeatable), put in a ConfigMap")
    p.add_argument("--baked-policies", action="store_true", help="policies are in the image at /policies")
    _placement(p, default_name, scaled=scaled)
    p.add_argument("--engine", choices=list(KINDS), default="embedded", help="opa: an OPA sidecar container")
    p.add_argument("--opa-image", default=generate.w.OPA_IMAGE)
    p.add_argument("--v0-compatible", action="store_true", help="Rego v0 policies (OPA runs with --v0-compatible)")


def _placement(p: argparse.ArgumentParser, default_name: str, *, scaled: bool = True) -> None:
    """Where and as what the workload runs; `scaled`: how many replicas and workers (the audit runs one
    replica, one writer per report, and takes neither flag rather than ignore it)."""
    p.add_argument("--namespace", default="regokite-system", help="where regokite runs (default regokite-system)")
    p.add_argument("--no-namespace", action="store_true", help="do not emit the Namespace object")
    p.add_argument(
        "--name", default=default_name, help=f"name of the Deployment, Service, ... (default {default_name})"
    )
    p.add_argument("--image", default=generate.DEFAULT_IMAGE)
    p.add_argument(
        "--values",
        metavar="FILE",
        help="the Helm chart's values file: logLevel, the audit's and the webhooks' knobs (validatingWebhook*, "
        "mutatingWebhook*, exemptNamespaces, webhookPolicies) apply as they do in charts/regokite",
    )
    p.add_argument(
        "--helm-values",
        action="store_true",
        help="print, instead of the manifests, the values charts/regokite needs to render the same objects "
        "(what is computed from the policies: webhooks, RBAC, policy files)",
    )
    if scaled:
        p.add_argument("--replicas", type=int, default=2)
        p.add_argument("--workers", type=int, default=2)


def _replicate_options(p: argparse.ArgumentParser, note: str = "") -> None:
    """What the command replicates into data: the container's flags, and read access to each resource."""
    p.add_argument(
        "--replicate", action="append", default=[], metavar="[GROUP/]VERSION/RESOURCE", help="namespaced, repeatable"
    )
    p.add_argument(
        "--replicate-cluster",
        action="append",
        default=[],
        metavar="[GROUP/]VERSION/RESOURCE",
        help="cluster-scoped, repeatable" + (f" ({note})" if note else ""),
    )


def _serving_options(p: argparse.ArgumentParser, *, timeout: int) -> None:
    tls = p.add_mutually_exclusive_group()
    tls.add_argument("--cert-manager", action="store_true", help="a cert-manager Certificate; CA injected")
    tls.add_argument("--ca-bundle-file", metavar="PEM", help="the CA that signed the serving certificate")
    p.add_argument("--timeout-seconds", type=int, default=timeout, help=f"webhook timeoutSeconds (default {timeout})")
    p.add_argument(
        "--failure-policy",
        choices=["Fail", "Ignore"],
        help="the validating webhooks' failurePolicy, unless a policy declares its own (default: the policy's, "
        + ("Fail" if timeout == 5 else "Ignore")
        + ")",
    )


def add_parser(sub: Any) -> None:
    man = sub.add_parser("manifests", help="print the Kubernetes manifests that run regokite (multi-document YAML)")
    kinds = man.add_subparsers(dest="manifests_kind", metavar="KIND", required=True)

    adm = kinds.add_parser("admission", help="admission server, Service, webhook configurations from the policies")
    _common(adm, "regokite-admission")
    _serving_options(adm, timeout=5)
    adm.add_argument("--opa-wait", type=float, default=30.0, metavar="SECONDS", help="wait this long for the sidecar")
    _replicate_options(adm, "policies' `replicate` declarations need no flag")
    adm.add_argument(
        "--policy-namespaces",
        action="append",
        default=[],
        metavar="NS[,NS...]",
        help="the server follows kube-mgmt's labelled policy and data ConfigMaps there (* for all), and a webhook"
        " refuses at apply one that would not load (repeatable)",
    )
    adm.add_argument(
        "--check-definitions",
        action="store_true",
        help="a webhook refuses at apply a CompositeController, DecoratorController or Watch whose hooks are not in"
        " the served policies (serve the controller's --policies and --policy-namespaces)",
    )
    _bundle_options(adm)
    adm.set_defaults(func=_cmd_admission)

    gk = kinds.add_parser(
        "gatekeeper",
        help="Gatekeeper's role: the template syncer and the admission server in one Deployment, one webhook",
    )
    _placement(gk, "regokite-gatekeeper")
    _serving_options(gk, timeout=3)
    gk.add_argument("--config-namespace", default="gatekeeper-system", help="where Gatekeeper's Config is read")
    gk.add_argument(
        "--operation",
        action="append",
        choices=["DELETE", "CONNECT"],
        default=[],
        help="also validate DELETE or CONNECT (e.g. kubectl exec), as Gatekeeper's webhook operations",
    )
    for suffix in ("", "-prefix", "-suffix"):
        gk.add_argument(
            f"--exempt-namespace{suffix}",
            action="append",
            default=[],
            metavar="NS",
            help="may carry the admission.gatekeeper.sh/ignore label, as Gatekeeper's flag",
        )
    _replicate_options(gk, "what the Config syncs: the server replicates it and needs to read it")
    gk.set_defaults(func=_cmd_gatekeeper)

    aud = kinds.add_parser(
        "audit",
        help="the audit (always one replica: one writer per report), RBAC from the policies, the report CRDs",
    )
    _common(aud, "regokite-audit", scaled=False)
    aud.add_argument("--metrics-port", type=int, default=9090)
    aud.add_argument("--no-crds", dest="include_crds", action="store_false", help="leave out the PolicyReport CRDs")
    aud.set_defaults(func=_cmd_audit)

    ctl = kinds.add_parser("controller", help="controllers, with RBAC computed from their definitions")
    _controller_options(ctl)
    _replicate_options(ctl)
    ctl.set_defaults(func=_cmd_controller)


def _bundle_options(adm: argparse.ArgumentParser) -> None:
    """OPA's bundles (the chart's admission.bundles; --values' admission.bundles under these flags)."""
    group = adm.add_argument_group("OPA bundles (docs/switching/opa-bundles.md)")
    group.add_argument(
        "--bundle", action="append", default=[], metavar="PATH_OR_URL", help="the server's --bundle (repeatable)"
    )
    one = group.add_mutually_exclusive_group()
    one.add_argument(
        "--bundle-config",
        metavar="FILE",
        help="OPA's configuration file, checked as the server reads it, put in a Secret and given as --config-file",
    )
    one.add_argument("--bundle-secret", metavar="NAME", help="an existing Secret holding it under config.yaml")
    group.add_argument(
        "--policies-from-bundles",
        action="store_true",
        help="--policies only compute the webhooks and RBAC: the server serves the bundles' policies alone",
    )


def _controller_options(ctl: argparse.ArgumentParser) -> None:
    """`regokite manifests controller`'s own flags (the replication ones are added beside them)."""
    _common(ctl, "regokite-controller")
    ctl.set_defaults(workers=generate.ControllerOptions.workers)  # threads here, processes for admission
    ctl.add_argument("--controllers", action="append", default=[], metavar="PATH", help="definitions file or dir")
    ctl.add_argument(
        "--watch-definitions",
        action="store_true",
        help="also run the definitions on the API server: read them, write their status (grant what they act on "
        "with --related and --writes)",
    )
    ctl.add_argument("--watch-namespace", help="run the controller with --namespace: a Role there, not a ClusterRole")
    ctl.add_argument(
        "--policy-namespaces",
        action="append",
        default=[],
        metavar="NS[,NS...]",
        help="the controller follows kube-mgmt's labelled policy ConfigMaps there (regokite controller "
        "--policy-namespaces; * for all): a Role per namespace (a ClusterRole for *) to read them and write their "
        "status; --policies may then be left out (repeatable)",
    )
    one = ctl.add_mutually_exclusive_group()
    one.add_argument(
        "--no-leader-elect", dest="leader_elect", action="store_false", help="one replica, no leader election"
    )
    one.add_argument(
        "--shards",
        action="store_true",
        help="every one of the --replicas acts on its share of the objects (regokite controller --shards)",
    )
    ctl.add_argument("--metrics-port", type=int, default=9090)
    ctl.add_argument(
        "--no-crds",
        dest="include_crds",
        action="store_false",
        help="leave out the definition CRDs and those found beside the definitions",
    )
    ctl.add_argument(
        "--related",
        action="append",
        default=[],
        metavar="API_VERSION/RESOURCE",
        help="a resource customize hooks relate to (read-only), e.g. v1/configmaps (repeatable)",
    )
    ctl.add_argument(
        "--writes",
        action="append",
        default=[],
        metavar="API_VERSION/RESOURCE",
        help="a resource watch policies `apply` or `delete`, e.g. v1/resourcequotas (repeatable)",
    )


def _cmd_gatekeeper(args: argparse.Namespace) -> int:
    values = _values(args)
    opts = generate.GatekeeperOptions(
        **_placed(args),
        **_serving(args),
        config_namespace=args.config_namespace,
        operations=("CREATE", "UPDATE", *dict.fromkeys([*args.operation, *chart.gatekeeper_operations(values)])),
        exempt_namespaces=(
            *args.exempt_namespace,
            *(values.get("exemptNamespaces") or []),
            *(f"{p}*" for p in [*args.exempt_namespace_prefix, *(values.get("exemptNamespacePrefixes") or [])]),
            *(f"*{s}" for s in args.exempt_namespace_suffix),
        ),
    )
    if args.helm_values:
        return _print_values(chart.gatekeeper_values(opts))
    header = (
        "regokite in Gatekeeper's role (`regokite manifests gatekeeper`): apply ConstraintTemplates, Constraints"
        "\nand the Config with kubectl. Grant reads of what the Config syncs with --replicate/--replicate-cluster."
    )
    print(generate.to_yaml(generate.gatekeeper_manifests(opts), header), end="")
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    values = _values(args)
    opts = generate.AuditOptions(
        **_shared(args, _check_policies(args)),
        metrics_port=args.metrics_port,
        include_crds=args.include_crds,
        audit_interval=values.get("auditInterval"),
        constraint_violations_limit=values.get("constraintViolationsLimit"),
        audit_chunk_size=values.get("auditChunkSize"),
    )
    if args.helm_values:
        return _print_values(chart.audit_values(opts))
    header = "regokite audit manifests (`regokite manifests audit`): PolicyReports of what already violates."
    print(generate.to_yaml(generate.audit_manifests(opts), header), end="")
    return 0


def _shared(args: argparse.Namespace, policies: list[str]) -> dict[str, Any]:
    """The options of the roles that evaluate `policies` (`_common`'s flags but --replicas and --workers,
    which the audit, one replica, does not take)."""
    return {
        "policies": policies,
        "baked_policies": args.baked_policies,
        **_placed(args),
        "engine": args.engine,
        "opa_image": args.opa_image,
        "v0_compatible": args.v0_compatible,
    }


def _placed(args: argparse.Namespace) -> dict[str, Any]:
    """Where and as what the workload runs (`_placement`'s flags but --replicas and --workers)."""
    return {
        "namespace": args.namespace,
        "include_namespace": not args.no_namespace,
        "name": args.name,
        "image": args.image,
        "log_level": _values(args).get("logLevel"),
    }


def _serving(args: argparse.Namespace) -> dict[str, Any]:
    """The options of an admission server's manifests (`_serving_options`, `_replicate_options`)."""
    return {
        "replicas": args.replicas,
        "workers": args.workers,
        "cert_manager": args.cert_manager,
        "ca_bundle": generate.ca_bundle_from_file(args.ca_bundle_file) if args.ca_bundle_file else None,
        "timeout_seconds": args.timeout_seconds,
        "webhook_settings": _webhook_settings(args),
        "replicate": args.replicate,
        "replicate_cluster": args.replicate_cluster,
    }


def _print_values(values: dict[str, Any]) -> int:
    header = "Values for charts/regokite computed from the policies (`regokite manifests ... --helm-values`)."
    print(generate.to_yaml([values], header), end="")
    return 0


def _values(args: argparse.Namespace) -> dict[str, Any]:
    """The --values file (the chart's values), {} without one."""
    from regokite import yamldoc

    if not args.values:
        return {}
    from regokite.errors import RegokiteError

    loaded = [doc for doc in yamldoc.load_all(Path(args.values).read_text(encoding="utf-8")) if doc is not None]
    if len(loaded) > 1 or (loaded and not isinstance(loaded[0], dict)):
        raise RegokiteError(f"--values {args.values}: a values file is one YAML mapping, as Helm's")
    return dict(loaded[0]) if loaded else {}


def _webhook_settings(args: argparse.Namespace) -> WebhookSettings:
    """--values' webhook knobs, --failure-policy over them."""
    values = _values(args)
    if args.failure_policy:
        values["validatingWebhookFailurePolicy"] = args.failure_policy
    return settings_from_values(values, args.values or "--failure-policy")


def _check_policies(args: argparse.Namespace) -> list[str]:
    from regokite.errors import RegokiteError

    if not args.policies:
        raise RegokiteError(
            "--policies DIR is required (also with --baked-policies: the manifests are computed from it)"
        )
    return args.policies


def _cmd_admission(args: argparse.Namespace) -> int:
    opts = generate.AdmissionOptions(
        **_shared(args, _check_policies(args)),
        **_serving(args),
        opa_wait=args.opa_wait,
        policy_namespaces=[n.strip() for value in args.policy_namespaces for n in value.split(",") if n.strip()],
        check_definitions=args.check_definitions,
        bundles=_bundles(args),
        policies_from_bundles=args.policies_from_bundles,
    )
    if args.helm_values:
        return _print_values(chart.admission_values(opts))
    header = "regokite admission manifests (`regokite manifests admission`)."
    if not (opts.cert_manager or opts.ca_bundle):
        header += (
            f"\nThe webhooks' caBundle is a placeholder: create the Secret {opts.name}-tls (kubernetes.io/tls) for"
            f"\nDNS name {opts.name}.{opts.namespace}.svc and regenerate with --ca-bundle-file, or use --cert-manager."
        )
    print(generate.to_yaml(generate.admission_manifests(opts), header), end="")
    return 0


def _bundles(args: argparse.Namespace) -> BundleOptions:
    """--values' admission.bundles, the flags over them (checked as the server reads them)."""
    import dataclasses

    from regokite import yamldoc
    from regokite.errors import RegokiteError

    given = bundles.from_values(_values(args))
    urls = [*given.urls, *args.bundle]
    if args.bundle_secret:
        return dataclasses.replace(given, config=None, existing_secret=args.bundle_secret, urls=urls)
    if not args.bundle_config:
        return dataclasses.replace(given, urls=urls)
    try:
        config = yamldoc.load(Path(args.bundle_config).read_text(encoding="utf-8")) or {}
        return dataclasses.replace(given, config=config, existing_secret="", urls=urls)
    except (OSError, yamldoc.YAMLError, RegokiteError) as exc:
        raise RegokiteError(f"--bundle-config {args.bundle_config}: {exc}") from None


def _cmd_controller(args: argparse.Namespace) -> int:
    policy_namespaces = [n.strip() for value in args.policy_namespaces for n in value.split(",") if n.strip()]
    opts = generate.ControllerOptions(
        **_shared(args, (args.policies or []) if policy_namespaces else _check_policies(args)),
        policy_namespaces=policy_namespaces,
        controllers=args.controllers,
        replicas=args.replicas,
        workers=args.workers,
        watch_namespace=args.watch_namespace,
        leader_elect=args.leader_elect and not args.shards,
        shards=args.shards,
        metrics_port=args.metrics_port,
        include_crds=args.include_crds,
        related=args.related,
        writes=args.writes,
        replicate=args.replicate,
        replicate_cluster=args.replicate_cluster,
        watch_definitions=args.watch_definitions or not args.controllers,
    )
    if args.helm_values:
        return _print_values(chart.controller_values(opts))
    header = "regokite controller manifests (`regokite manifests controller`); RBAC computed from the definitions."
    print(generate.to_yaml(generate.controller_manifests(opts), header), end="")
    return 0
