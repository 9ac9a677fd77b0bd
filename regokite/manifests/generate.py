"""`regokite manifests admission|controller`: everything a cluster needs to run regokite.

The admission server talks to no API server unless its policies read
cluster data: then its ServiceAccount gets a token and a ClusterRole with
get/list/watch on exactly the replicated resources; otherwise no token and no
role at all. The API server calls it through a
Service, with one webhook per policy generated from the policies' `match`
declarations. Controllers get exactly the RBAC their definitions need
(`regokite.manifests.rbac`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from regokite import __version__, yamldoc
from regokite.admission.webhook_knobs import WebhookSettings
from regokite.clusterdata.store import ResourceRef, guess_resource, parse_resource
from regokite.engine import Capability, EngineSettings, capabilities_of
from regokite.errors import RegokiteError
from regokite.gatekeeper.crds import MUTATOR_PLURALS
from regokite.gatekeeper.resources import CONSTRAINT_GROUP, EXPANSION_GROUP, MUTATION_GROUP
from regokite.manifests import definition_crds, rbac, webhooks
from regokite.manifests import workloads as w
from regokite.manifests.bundles import BundleOptions, bundle_objects

Obj = dict[str, Any]
DEFAULT_IMAGE = f"regokite/regokite:{__version__}"
POLICIES_DIR = "/etc/regokite/policies"
CONTROLLERS_DIR = "/etc/regokite/controllers"
CONFIGMAP_POLICIES_DIR = "/tmp/configmap-policies"  # --policy-namespaces: kept across container restarts
DEFINITION_RESOURCES = (
    ("metacontroller.k8s.io", "compositecontrollers"),
    ("metacontroller.k8s.io", "decoratorcontrollers"),
    ("regokite.dev", "watches"),
)
TLS_DIR = "/etc/regokite/tls"


@dataclass
class Common:
    namespace: str = "regokite-system"
    image: str = DEFAULT_IMAGE
    engine: str = "embedded"
    opa_image: str = w.OPA_IMAGE
    v0_compatible: bool = False
    replicas: int = 2
    include_namespace: bool = True
    baked_policies: bool = False  # policies in the image at /policies, not in a ConfigMap
    log_level: str | None = None  # regokite --log-level (the chart's logLevel); None: regokite's default


@dataclass
class AdmissionOptions(Common):
    policies: list[str] = field(default_factory=list)
    name: str = "regokite-admission"
    workers: int = 2
    cert_manager: bool = False
    ca_bundle: str | None = None  # base64 PEM; a placeholder when neither this nor cert_manager
    timeout_seconds: int = 5
    webhook_settings: WebhookSettings = field(default_factory=WebhookSettings)  # the users' knobs
    opa_wait: float = 30.0
    replicate: list[str] = field(default_factory=list)  # --replicate flags, beside what policies declare
    replicate_cluster: list[str] = field(default_factory=list)
    # checked at apply (/v1/admitsource): kube-mgmt's ConfigMaps the server follows there (* all), and
    # CompositeControllers, DecoratorControllers and Watches against the policies it serves
    policy_namespaces: list[str] = field(default_factory=list)
    check_definitions: bool = False
    bundles: BundleOptions = field(default_factory=BundleOptions)  # OPA's bundles (admission.bundles)
    policies_from_bundles: bool = False  # `policies` only compute the webhooks and RBAC; the bundles serve them


@dataclass
class ControllerOptions(Common):
    policies: list[str] = field(default_factory=list)
    controllers: list[str] = field(default_factory=list)
    name: str = "regokite-controller"
    watch_namespace: str | None = None
    leader_elect: bool = True
    shards: bool = False  # every replica acts on its share (membership Leases) instead of one leader
    workers: int = 8  # regokite controller's default
    metrics_port: int = 9090
    include_crds: bool = True
    related: list[str] = field(default_factory=list)  # "apps/v1/deployments": read by customize hooks
    writes: list[str] = field(default_factory=list)  # "v1/resourcequotas": applied or deleted by watch policies
    replicate: list[str] = field(default_factory=list)  # --replicate: namespaced resources hooks read from data
    replicate_cluster: list[str] = field(default_factory=list)
    watch_definitions: bool = False  # also run the definitions on the API server (read them, write their status)
    policy_namespaces: list[str] = field(default_factory=list)  # kube-mgmt ConfigMaps followed in process; * all


# ------------------------------------------------------------------------------ helpers


def _replicated(opts: AdmissionOptions | ControllerOptions) -> list[ResourceRef]:
    return [
        *(parse_resource(r, namespaced=True) for r in opts.replicate),
        *(parse_resource(r, namespaced=False) for r in opts.replicate_cluster),
    ]


def _replicate_flags(opts: AdmissionOptions | ControllerOptions) -> list[str]:
    return [
        *(a for r in opts.replicate for a in ("--replicate", r)),
        *(a for r in opts.replicate_cluster for a in ("--replicate-cluster", r)),
    ]


def policy_mount(opts: Common, name: str, component: str) -> tuple[list[Obj], list[Obj], list[str], list[Obj]]:
    """(objects, volumes, --policies args, volumeMounts) for the policies of `opts`."""
    if getattr(opts, "policies_from_bundles", False):
        return [], [], [], []
    if opts.baked_policies:
        return [], [], ["--policies", "/policies"], []
    policies: list[str] = getattr(opts, "policies", [])
    files = w.bundle_files(policies)
    mounted = w.mounted_files(f"{name}-policies", opts.namespace, component, "policies", files)
    roots = [POLICIES_DIR] if len(policies) == 1 else [f"{POLICIES_DIR}/{i}" for i in range(len(policies))]
    args = [a for root in roots for a in ("--policies", root)]
    mount = {"name": "policies", "mountPath": POLICIES_DIR, "readOnly": True}
    return [mounted.config_map], [mounted.volume], args, [mount]


def _engine_args(opts: Common) -> list[str]:
    args = ["--v0-compatible"] if opts.v0_compatible else []
    if Capability.SIDECAR in capabilities_of(opts.engine):
        args += ["--engine", opts.engine, "--opa-url", w.OPA_URL]
    return args


def _prelude(opts: Common, name: str, component: str, *, automount: bool) -> list[Obj]:
    objects = [w.namespace(opts.namespace)] if opts.include_namespace else []
    objects.append(w.service_account(name, opts.namespace, component, automount=automount))
    return objects


# ---------------------------------------------------------------------------- admission


def admission_manifests(opts: AdmissionOptions) -> list[Obj]:
    from regokite.admission.policies import load_policy_set

    component = "admission"
    policy_set = load_policy_set(opts.policies, EngineSettings(v0_compatible=opts.v0_compatible))  # embedded, offline
    try:
        policies = list(policy_set.policies)
    finally:
        policy_set.close()
    replicated = sorted({*_replicated(opts), *policy_set.replicate})
    objects = _prelude(opts, opts.name, component, automount=bool(replicated or opts.policy_namespaces))
    if replicated:
        perms = rbac.Permissions()
        for ref in replicated:
            perms.grant(perms.cluster, ref.group, ref.resource, rbac.READ)
        objects += rbac.rbac_objects(
            perms, name=opts.name, namespace=opts.namespace, service_account=opts.name, labels=w.labels(component)
        )
    cm_objects, volumes, policy_args, mounts = policy_mount(opts, opts.name, component)
    objects += cm_objects
    if opts.policy_namespaces:
        objects += rbac.configmap_policy_objects(
            opts.policy_namespaces, name=opts.name, namespace=opts.namespace, service_account=opts.name,
            labels=w.labels(component),
        )  # fmt: skip
        policy_args += [a for ns in opts.policy_namespaces for a in ("--policy-namespaces", ns)]
        policy_args += ["--policy-namespaces-dir", CONFIGMAP_POLICIES_DIR]
    if opts.policies_from_bundles and not opts.bundles.configured:
        raise RegokiteError("policies served from bundles: configure the bundles (a config, a Secret or URLs)")
    bundle_objs, bundle_volumes, bundle_mounts, bundle_args = bundle_objects(
        opts.bundles, opts.name, opts.namespace, component
    )
    objects += bundle_objs
    policy_args += bundle_args
    # as Gatekeeper's --shutdown-delay: a Pod being deleted serves until its endpoint is gone (a rolling update
    # loses no review); terminationGracePeriodSeconds (30) leaves the reviews in flight time to finish after it
    args = ["admission", *policy_args, *_engine_args(opts), "--shutdown-delay=10"]
    args += _replicate_flags(opts)
    if Capability.SIDECAR in capabilities_of(opts.engine):
        args += ["--opa-wait", f"{opts.opa_wait:g}"]
    served, target = _webhook_server(
        opts,
        component,
        args,
        mounts=[*mounts, *bundle_mounts],
        volumes=[*volumes, *bundle_volumes],
        automount=bool(replicated or opts.policy_namespaces),
        webhook_name="regokite",
    )
    objects += served
    objects += webhooks.webhook_configurations(policies, target)
    if opts.policy_namespaces or opts.check_definitions:
        objects.append(webhooks.policy_source_configuration(target, opts.policy_namespaces, opts.check_definitions))
    return objects


def _webhook_server(
    opts: AdmissionOptions,
    component: str,
    args: list[str],
    *,
    mounts: list[Obj],
    volumes: list[Obj],
    automount: bool,
    webhook_name: str,
    first: Obj | None = None,
) -> tuple[list[Obj], webhooks.WebhookTarget]:
    """`regokite admission` over HTTPS (after `first`, a container beside it): its Deployment, Service,
    PodDisruptionBudget and cert-manager objects, and where its webhooks point."""
    args = [*args, "--tls-cert", f"{TLS_DIR}/tls.crt", "--tls-key", f"{TLS_DIR}/tls.key"]
    args += ["--port", "8443", "--workers", str(opts.workers)]
    server = _containers(
        opts,
        args,
        port={"name": "https", "containerPort": 8443, "protocol": "TCP"},
        probes={
            "livenessProbe": w.probe("/healthz", "https", "HTTPS"),
            "readinessProbe": w.probe("/readyz", "https", "HTTPS", period=5),
        },
        cpu_limit="2",
        mounts=[*mounts, {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}],
    )
    volumes = [*volumes, {"name": "tls", "secret": {"secretName": f"{opts.name}-tls"}}, w.tmp_volume()]
    objects = [
        w.deployment(
            opts.name,
            opts.namespace,
            component,
            replicas=opts.replicas,
            service_account=opts.name,
            containers=[first, *server] if first else server,
            volumes=volumes,
            automount_token=automount,
        ),
        w.service(opts.name, opts.namespace, component, port=443, target="https", port_name="https"),
    ]
    if opts.replicas >= 2:
        objects.append(w.pod_disruption_budget(opts.name, opts.namespace, component))
    if opts.cert_manager:
        objects += cert_manager_objects(opts.name, opts.namespace)
    target = webhooks.WebhookTarget(
        name=webhook_name,
        namespace=opts.namespace,
        service=opts.name,
        ca_bundle=None if opts.cert_manager else (opts.ca_bundle or w.placeholder_ca_bundle()),
        cert_manager_certificate=f"{opts.namespace}/{opts.name}" if opts.cert_manager else None,
        timeout_seconds=opts.timeout_seconds,
        settings=opts.webhook_settings,
    )
    return objects, target


def cert_manager_objects(name: str, ns: str) -> list[Obj]:
    """A self-signed Issuer and the serving Certificate; cert-manager's CA injector fills the caBundles."""
    meta = {"namespace": ns, "labels": w.labels("admission")}
    return [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": {"name": f"{name}-selfsigned", **meta},
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": name, **meta},
            "spec": {
                "secretName": f"{name}-tls",
                "dnsNames": [f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"],
                "duration": "2160h",
                "renewBefore": "360h",
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                "issuerRef": {"name": f"{name}-selfsigned", "kind": "Issuer", "group": "cert-manager.io"},
            },
        },
    ]


# --------------------------------------------------------------------------- gatekeeper


@dataclass
class GatekeeperOptions(AdmissionOptions):
    name: str = "regokite-gatekeeper"
    timeout_seconds: int = 3  # Gatekeeper's
    config_namespace: str = "gatekeeper-system"
    operations: tuple[str, ...] = ("CREATE", "UPDATE")  # the validating webhook's; DELETE, CONNECT on request
    exempt_namespaces: tuple[str, ...] = ()  # --exempt-namespace, -prefix `p*`, -suffix `*s` (Gatekeeper's flags)


GATEKEEPER_DIR = "/var/run/regokite/gatekeeper"
GATEKEEPER_READS = (
    ("templates.gatekeeper.sh", "constrainttemplates", rbac.READ),
    ("templates.gatekeeper.sh", "constrainttemplates/status", ("get", "update", "patch")),
    ("constraints.gatekeeper.sh", "*", rbac.READ),
    ("constraints.gatekeeper.sh", "*/status", ("get", "update", "patch")),  # a refused edit's error
    ("config.gatekeeper.sh", "configs", rbac.READ),
    ("config.gatekeeper.sh", "configs/status", ("get", "update", "patch")),
    *((MUTATION_GROUP, plural, rbac.READ) for plural in MUTATOR_PLURALS),
    *((MUTATION_GROUP, f"{plural}/status", ("get", "update", "patch")) for plural in MUTATOR_PLURALS),
    (EXPANSION_GROUP, "expansiontemplate", rbac.READ),
    ("externaldata.gatekeeper.sh", "providers", rbac.READ),
    ("syncset.gatekeeper.sh", "syncsets", rbac.READ),
    ("externaldata.gatekeeper.sh", "providers/status", ("get", "update", "patch")),
    ("apiextensions.k8s.io", "customresourcedefinitions", (*rbac.READ, "create", "update", "patch", "delete")),
    ("", "namespaces", rbac.READ),  # as Gatekeeper's: namespaceObject and namespaceSelectors read them
)


def gatekeeper_manifests(opts: GatekeeperOptions) -> list[Obj]:
    """Gatekeeper's role in one Deployment: `regokite gatekeeper` (templates -> constraint CRDs, status,
    files) and `regokite admission` serving those files, sharing an emptyDir; one webhook for every
    resource, as Gatekeeper's (constraints are matched in process, so a new template needs no new webhook)."""
    if Capability.SIDECAR in capabilities_of(opts.engine):  # the Deployment has no sidecar to wire
        raise RegokiteError("regokite manifests gatekeeper: templates run on the embedded engine (no --engine opa)")
    component = "gatekeeper"
    perms = rbac.Permissions()
    for group, resource, verbs in GATEKEEPER_READS:
        perms.grant(perms.cluster, group, resource, verbs)
    for ref in _replicated(opts):
        perms.grant(perms.cluster, ref.group, ref.resource, rbac.READ)
    objects = _prelude(opts, opts.name, component, automount=True)
    objects += rbac.rbac_objects(
        perms, name=opts.name, namespace=opts.namespace, service_account=opts.name, labels=w.labels(component)
    )
    shared = {"name": "gatekeeper", "mountPath": str(Path(GATEKEEPER_DIR).parent)}
    sync_args = ["gatekeeper", "--out", GATEKEEPER_DIR, "--config-namespace", opts.config_namespace]
    [syncer] = _containers(opts, sync_args, port=None, probes={}, cpu_limit="1", mounts=[shared])
    syncer["name"] = "gatekeeper-sync"
    volumes = [{"name": "gatekeeper", "emptyDir": {}}]
    # Gatekeeper's --shutdown-delay default: a Pod being deleted serves until its endpoint is gone
    args = ["admission", "--policies", GATEKEEPER_DIR, "--shutdown-delay=10", *_replicate_flags(opts)]
    args += _exempt_flags(opts)
    served, target = _webhook_server(
        opts, component, args, mounts=[shared], volumes=volumes, automount=True, webhook_name=opts.name, first=syncer
    )
    objects += served
    objects.append(webhooks.catch_all_configuration(target, operations=opts.operations))
    objects.append(webhooks.catch_all_configuration(target, "mutate"))
    return objects


def _exempt_flags(opts: GatekeeperOptions) -> list[str]:
    flags = []
    for pattern in opts.exempt_namespaces:
        if pattern.endswith("*"):
            flags.append(f"--exempt-namespace-prefix={pattern[:-1]}")
        elif pattern.startswith("*"):
            flags.append(f"--exempt-namespace-suffix={pattern[1:]}")
        else:
            flags.append(f"--exempt-namespace={pattern}")
    return flags


# --------------------------------------------------------------------------- controller


def _resource_rule(text: str, flag: str = "--related") -> Any:
    from regokite.controllers.definitions import ResourceRule
    from regokite.errors import RegokiteError

    api_version, _, resource = text.rpartition("/")
    if not api_version or not resource or resource != resource.lower():
        raise RegokiteError(f"{flag} {text!r}: write API_VERSION/RESOURCE, e.g. v1/configmaps or apps/v1/deployments")
    return ResourceRule(api_version, resource)


def customize_hooks(definitions: list[Any]) -> list[str]:
    """Names of definitions whose related resources are only known at run time."""
    return [d.name for d in definitions if getattr(getattr(d, "hooks", None), "customize", None) is not None]


def controller_manifests(opts: ControllerOptions) -> list[Obj]:
    from regokite.controllers.definitions import Definitions, load

    component = "controller"
    loaded = load(opts.controllers) if opts.controllers else Definitions()  # validates; refuses what it cannot run
    definitions, watches = list(loaded.controllers), loaded.watches
    raw_definitions = [d.raw for d in definitions] + [w.raw for w in watches]
    crd_docs = list(loaded.crds)
    perms = _controller_permissions(opts, definitions, watches, crd_docs)
    objects = _prelude(opts, opts.name, component, automount=True)
    objects += rbac.rbac_objects(
        perms,
        name=opts.name,
        namespace=opts.namespace,
        service_account=opts.name,
        watch_namespace=opts.watch_namespace,
        labels=w.labels(component),
    )
    if opts.include_crds:
        kept = {d.get("metadata", {}).get("name") for d in crd_docs}
        objects += crd_docs + [c for c in definition_crds.crds() if c["metadata"]["name"] not in kept]
    if opts.policy_namespaces:
        objects += rbac.configmap_policy_objects(
            opts.policy_namespaces,
            name=opts.name,
            namespace=opts.namespace,
            service_account=opts.name,
            labels=w.labels(component),
        )
    cm_objects, volumes, policy_args, mounts = [], [], [], []
    if opts.policies or opts.baked_policies:  # else every policy comes from the ConfigMaps
        cm_objects, volumes, policy_args, mounts = policy_mount(opts, opts.name, component)
    policy_args += [a for ns in opts.policy_namespaces for a in ("--policy-namespaces", ns)]
    if opts.policy_namespaces:  # in the /tmp emptyDir: a container restart serves a refused ConfigMap's last good
        policy_args += ["--policy-namespaces-dir", CONFIGMAP_POLICIES_DIR]
    objects += cm_objects
    if opts.controllers:  # else the definitions are read from the API server
        definitions_text = yaml.safe_dump_all(raw_definitions, sort_keys=False)
        files = [("controllers.yaml", definitions_text)]
        defs = w.mounted_files(f"{opts.name}-definitions", opts.namespace, component, "definitions", files)
        objects.append(defs.config_map)
        volumes = [*volumes, defs.volume]
        mounts = [*mounts, {"name": "definitions", "mountPath": CONTROLLERS_DIR, "readOnly": True}]
    args = _controller_args(opts, policy_args)
    containers = _containers(
        opts,
        args,
        port={"name": "metrics", "containerPort": opts.metrics_port, "protocol": "TCP"},
        probes={
            "livenessProbe": w.probe("/healthz", "metrics"),
            "readinessProbe": w.probe("/readyz", "metrics", period=5),
        },
        cpu_limit="1",
        mounts=mounts,
        env=w.pod_env(),
    )
    replicas = opts.replicas if opts.leader_elect or opts.shards else 1
    objects += _metrics_workload(opts, component, containers, volumes, replicas)
    if replicas >= 2:
        objects.append(w.pod_disruption_budget(opts.name, opts.namespace, component))
    return objects


def _controller_permissions(
    opts: ControllerOptions, definitions: list[Any], watches: list[Any], crd_docs: list[Obj]
) -> rbac.Permissions:
    """What the controller may do: its definitions' resources, watched, related and written ones, replicated data,
    its Lease(s), and the definitions themselves when it watches them."""
    crds = rbac.crds_from_documents(crd_docs)
    perms = rbac.controller_permissions(
        definitions,
        crds=crds,
        namespace_scoped=opts.watch_namespace is not None,
        leader_election=opts.leader_elect and not opts.shards,
        lease_name=opts.name,
        related=[_resource_rule(r) for r in opts.related],
        watched=[rbac.watched_rule(w) for w in watches],
        written=[_resource_rule(r, "--writes") for r in opts.writes],
    )
    for ref in _replicated(opts):
        perms.grant(perms.cluster, ref.group, ref.resource, rbac.READ)
    if opts.shards:  # its own Lease (named after the pod), the others' read, long-expired ones deleted
        perms.grant(perms.own_namespace, "coordination.k8s.io", "leases", rbac.SHARD_LEASES)
    if opts.watch_definitions:  # the definitions and their Accepted status; what they act on: --related, --writes
        for group, plural in DEFINITION_RESOURCES:
            perms.grant(perms.cluster, group, plural, rbac.READ)
            perms.grant(perms.cluster, group, f"{plural}/status", ("update", "patch"))
    return perms


def _controller_args(opts: ControllerOptions, policy_args: list[str]) -> list[str]:
    """The controller container's command line."""
    args = [
        "controller",
        *policy_args,
        *(["--controllers", f"{CONTROLLERS_DIR}/controllers.yaml"] if opts.controllers else []),
        *(["--watch-definitions"] if opts.watch_definitions else []),
        *_engine_args(opts),
        "--workers",
        str(opts.workers),
        "--metrics-port",
        str(opts.metrics_port),
    ]
    args += _replicate_flags(opts)
    if opts.watch_namespace:
        args += ["--namespace", opts.watch_namespace]
    if opts.leader_elect or opts.shards:
        args.append("--shards" if opts.shards else "--leader-elect")
        if opts.name != "regokite-controller":  # the Lease(s) named like the Deployment; RBAC names it
            args += ["--leader-election-name", opts.name]
    return args


# -------------------------------------------------------------------------------- audit


@dataclass
class AuditOptions(Common):
    policies: list[str] = field(default_factory=list)
    name: str = "regokite-audit"
    replicas: int = 1  # two auditors would both write every report
    metrics_port: int = 9090
    include_crds: bool = True
    audit_interval: int | None = None  # None: regokite audit's defaults (Gatekeeper's)
    constraint_violations_limit: int | None = None
    audit_chunk_size: int | None = None


def audit_flags(opts: AuditOptions) -> list[str]:
    """--audit-interval, --constraint-violations-limit, --audit-chunk-size where set."""
    flags = []
    for flag, value in (
        ("--audit-interval", opts.audit_interval),
        ("--constraint-violations-limit", opts.constraint_violations_limit),
        ("--audit-chunk-size", opts.audit_chunk_size),
    ):
        if value is not None:
            flags += [flag, str(value)]
    return flags


def audit_manifests(opts: AuditOptions) -> list[Obj]:
    """The audit Deployment, least-privilege RBAC computed from the policies, and the report CRDs."""
    from regokite.admission.policies import load_policy_set
    from regokite.audit.crds import GROUP, report_crds
    from regokite.audit.scan import audited_resources

    component = "audit"
    policy_set = load_policy_set(opts.policies, EngineSettings(v0_compatible=opts.v0_compatible))
    try:
        # RBAC names groups and resources only: versions need no discovery here
        guess = lambda group, kind: ResourceRef(group, "*", guess_resource(kind), True)  # noqa: E731
        audited, _ = audited_resources(policy_set, lambda _group: "*", guess)
        replicated = policy_set.replicate
        constraints = any(p.constraint_kind for p in policy_set.policies)
    finally:
        policy_set.close()
    perms = rbac.Permissions()
    for ref in (*audited, *replicated):
        perms.grant(perms.cluster, ref.group, ref.resource, rbac.READ)
    if constraints:  # Gatekeeper's audit status on each Constraint
        perms.grant(perms.cluster, CONSTRAINT_GROUP, "*", ("get", "patch"))
    for plural in ("policyreports", "clusterpolicyreports"):
        perms.grant(perms.cluster, GROUP, plural, ("get", "list", "create", "patch"))
    objects = _prelude(opts, opts.name, component, automount=True)
    objects += rbac.rbac_objects(
        perms, name=opts.name, namespace=opts.namespace, service_account=opts.name, labels=w.labels(component)
    )
    if opts.include_crds:
        objects += report_crds()
    cm_objects, volumes, policy_args, mounts = policy_mount(opts, opts.name, component)
    objects += cm_objects
    containers = _containers(
        opts,
        ["audit", *policy_args, *_engine_args(opts), "--metrics-port", str(opts.metrics_port), *audit_flags(opts)],
        port={"name": "metrics", "containerPort": opts.metrics_port, "protocol": "TCP"},
        probes={"livenessProbe": w.probe("/healthz", "metrics"), "readinessProbe": w.probe("/readyz", "metrics")},
        cpu_limit="1",
        mounts=mounts,
    )
    objects += _metrics_workload(opts, component, containers, volumes, replicas=1)
    return objects


def _metrics_workload(
    opts: ControllerOptions | AuditOptions, component: str, containers: list[Obj], volumes: list[Obj], replicas: int
) -> list[Obj]:
    """The Deployment of a role that serves only metrics and probes (controller, audit), and its metrics Service."""
    deployment = w.deployment(
        opts.name,
        opts.namespace,
        component,
        replicas=replicas,
        service_account=opts.name,
        containers=containers,
        volumes=[*volumes, w.tmp_volume()],
        automount_token=True,
    )
    service = w.service(
        opts.name, opts.namespace, component, port=opts.metrics_port, target="metrics", port_name="metrics"
    )
    return [deployment, service]


def _containers(
    opts: Common,
    args: list[str],
    *,
    port: Obj | None,
    probes: Obj,
    cpu_limit: str,
    mounts: list[Obj],
    env: list[Obj] | None = None,
) -> list[Obj]:
    """The regokite container (read-only root, a writable /tmp), and the OPA sidecar with --engine opa."""
    if opts.log_level:
        args = ["--log-level", opts.log_level.lower(), *args]
    container: Obj = {"name": "regokite", "image": opts.image, "imagePullPolicy": "IfNotPresent", "args": args}
    if env is not None:
        container["env"] = env
    container |= {
        **({"ports": [port]} if port else {}),
        **probes,
        "resources": w.resources("100m", "128Mi", cpu_limit, "512Mi"),
        "securityContext": w.container_security_context(),
        "volumeMounts": [*mounts, {"name": "tmp", "mountPath": "/tmp"}],
    }
    if Capability.SIDECAR not in capabilities_of(opts.engine):
        return [container]
    return [container, w.opa_container(image=opts.opa_image, v0_compatible=opts.v0_compatible)]


# ------------------------------------------------------------------------------- output


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (policies, definitions) as literal blocks, readable in the ConfigMap.

    PyYAML refuses block style for any text with a tab, which YAML allows in a
    block scalar's content (and `opa fmt` indents Rego with tabs): judge the
    style on the text with tabs as spaces, then write the text as it is.
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True  # no &anchors: every object reads on its own

    def analyze_scalar(self, scalar: str) -> Any:
        analysis = super().analyze_scalar(scalar.replace("\t", " "))
        if "\t" in scalar:
            analysis.scalar = scalar
            analysis.allow_flow_plain = analysis.allow_block_plain = False
            analysis.allow_single_quoted = False
        return analysis


def _represent_str(dumper: yaml.SafeDumper, value: str) -> Any:
    style = "|" if "\n" in value.rstrip("\n") or (value.endswith("\n") and len(value) > 1) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def to_yaml(objects: list[Obj], header: str = "") -> str:
    """Multi-document YAML; checked to load back to exactly `objects`."""
    body = yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
    if list(yamldoc.load_all(body)) != objects:
        body = yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=120)
    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comment + body


def ca_bundle_from_file(path: str) -> str:
    data = Path(path).read_bytes()
    if b"-----BEGIN CERTIFICATE-----" not in data:
        from regokite.errors import RegokiteError

        raise RegokiteError(f"{path}: not a PEM certificate")
    return base64.b64encode(data).decode()
