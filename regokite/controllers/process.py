"""`regokite controller`'s process: load policies and definitions, check them, run the controllers."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from regokite import outline
from regokite.clusterdata.store import ReplicaStore, ResourceRef, check_replica_root
from regokite.controllers import cluster_definitions, customize, definitions
from regokite.controllers.composite.runner import CompositeRunner
from regokite.controllers.decorator import decisions as decorator
from regokite.controllers.decorator.runner import DecoratorRunner
from regokite.controllers.hook_workers import HookWorkers, usable_cpus
from regokite.controllers.hooks import RESPONSE_FIELDS, HookEvaluator, LocalHooks, ResolvedHook, resolve_hook
from regokite.controllers.watch.runner import build_watches
from regokite.engine import Capability, Engine, EngineSettings, builtin_errors, open_engine
from regokite.errors import HookError, RegokiteError
from regokite.kube.actuator import Actuator
from regokite.kube.client import KubeClient
from regokite.kube.discovery import Discovery, DiscoveryError
from regokite.ops import builtin_error_metrics
from regokite.ops.controller_metrics import definitions_reload_errors, definitions_reloads
from regokite.replication.replicate import Replicator, check_access
from regokite.runtime.leader import LeaderSettings
from regokite.runtime.manager import DEFAULT_WORKERS, Manager
from regokite.runtime.shards import SINGLETON, Shards, Verdict

builtin_errors.listen(builtin_error_metrics.count)  # this server's /metrics counts its undefined calls

log = logging.getLogger("regokite.controller")
# definition name -> its sync, finalize and customize hooks
Hooks = dict[str, tuple[ResolvedHook, ResolvedHook | None, ResolvedHook | None]]


@dataclass
class ControllerSettings:
    policies: list[str]
    controllers: list[str]
    kubeconfig: str | None = None
    namespace: str | None = None
    workers: int = DEFAULT_WORKERS
    hook_processes: int = field(default_factory=usable_cpus)  # --hook-processes
    engine: EngineSettings = field(default_factory=EngineSettings)  # --engine, --opa-url, --v0-compatible, ...
    metrics_port: int | None = None
    metrics_host: str = "0.0.0.0"
    discovery_wait: float = 30.0
    extra: dict[str, str] = field(default_factory=dict)
    vars: list[str] = field(default_factory=list)  # --var KEY=VALUE / WATCH/KEY=VALUE: Watch params
    field_manager: str = "regokite"
    leader: LeaderSettings | None = None  # --leader-elect
    shards: LeaderSettings | None = None  # --shards: the membership Leases' name prefix, namespace and timing
    watch_definitions: bool = False  # --watch-definitions: also run the definitions the API server holds
    replicate: tuple[ResourceRef, ...] = ()  # --replicate, --replicate-cluster: data.<replicate_path> for hooks
    replicate_path: str = "kubernetes"
    definitions_poll: float = 2.0  # seconds between reads of the definitions on the API server


def load_hooks(
    policies: list[str],
    controllers: list[str],
    engine: EngineSettings | None = None,
    *,
    cluster: Sequence[Any] = (),
    refused: dict[str, Exception] | None = None,
) -> tuple[definitions.Definitions, Engine, Hooks]:
    """Definitions (each file read once), an engine over the policies, and every hook checked against them.

    `cluster` definitions (read from the API server) join them; one whose hooks do not resolve, or whose
    name a file already uses, is left out and its reason put in `refused` instead of failing the start."""
    loaded = definitions.load(controllers) if controllers else definitions.Definitions()
    engine = engine or EngineSettings()
    bundle = engine.load(policies).without_tests()
    outlines = outline.outline(bundle.modules)
    packages, files = outline.packages(outlines), outline.package_files(outlines)
    hooks = {d.name: resolve_hooks(d, packages, files) for d in loaded.controllers}
    kept = []
    for d in cluster:
        try:
            if d.name in hooks:
                raise HookError(
                    d.hooks.sync.package or str(d.hooks.sync.url),
                    None,
                    f"a --controllers file already defines {d.name}",
                )
            hooks[d.name] = resolve_hooks(d, packages, files)
            kept.append(d)
        except HookError as exc:
            if refused is not None:
                refused[d.name] = exc
    loaded = replace(loaded, controllers=loaded.controllers + tuple(kept))
    return loaded, open_engine(bundle, engine), hooks


def resolve_hooks(
    d: Any, packages: Any, files: dict[str, str]
) -> tuple[ResolvedHook, ResolvedHook | None, ResolvedHook | None]:
    fields = decorator.RESPONSE_FIELDS if isinstance(d, decorator.DecoratorController) else RESPONSE_FIELDS
    sync = resolve_hook(d.hooks.sync, packages, fields, files=files)
    finalize = resolve_hook(d.hooks.finalize, packages, fields, files=files) if d.hooks.finalize else None
    custom = d.hooks.customize
    related = resolve_hook(custom, packages, customize.RESPONSE_FIELDS, files=files) if custom else None
    return sync, finalize, related


def hook_evaluator(settings: ControllerSettings, engine: Engine, replica: Replicator | None = None) -> HookEvaluator:
    """The embedded engine evaluates hooks in worker processes that enforce each hook's timeout
    (`engine` has already checked the bundle loads); a sidecar OPA is asked from here. Both see
    `replica`'s objects, exactly as they are when a call is made."""
    store = replica.store if replica is not None else None
    if store is not None:
        check_replica_root(engine.bundle.data, store)
    if Capability.IN_PROCESS not in engine.capabilities:
        if store is not None:
            engine.follow(store)
        return LocalHooks(engine)
    engine.close()
    return HookWorkers(engine.bundle, processes=settings.hook_processes, engine=settings.engine, store=store)


def start_replication(settings: ControllerSettings) -> Replicator | None:
    """Replicate what `--replicate`/`--replicate-cluster` name, once for every controller set this process
    runs; a resource that cannot be listed stops the start, naming it."""
    if not settings.replicate:
        return None
    client = KubeClient(settings.kubeconfig, pool_size=4)
    check_access(client, settings.replicate)
    replica = Replicator(client, ReplicaStore(settings.replicate_path))
    replica.ensure(settings.replicate)
    return replica


def build(
    settings: ControllerSettings,
    cluster: Sequence[Any] = (),
    refused: dict[str, Exception] | None = None,
    replica: Replicator | None = None,
    cluster_watches: Sequence[Any] = (),
) -> tuple[Manager, list[CompositeRunner]]:
    """The manager with every runner; `cluster` definitions that cannot run go to `refused` (see load_hooks).
    With `replica`, hooks read its objects and no sync starts before its initial lists are in."""
    loaded, engine, hooks = load_hooks(
        settings.policies, settings.controllers, settings.engine, cluster=cluster, refused=refused
    )
    evaluator = hook_evaluator(settings, engine, replica)
    client = KubeClient(settings.kubeconfig, pool_size=max(16, settings.workers * 4 + 16))
    manager = Manager(
        client, namespace=settings.namespace, workers=settings.workers, sharded=settings.shards is not None
    )
    manager.data = replica
    if (close := getattr(evaluator, "close", None)) is not None:
        manager.on_stop.append(close)
    wiring = Wiring(
        settings,
        manager,
        evaluator,
        Actuator(client, settings.field_manager),
        Discovery(client),
        hooks,
        from_cluster={d.name for d in cluster},
        refused=refused,
    )
    runners = [r for d in loaded.composites if (r := wiring.runner(d, CompositeRunner)) is not None]
    for d in loaded.decorators:
        if (deco := wiring.runner(d, DecoratorRunner)) is not None:
            _log_decorator(d.name, deco)
    wiring.watches(loaded.watches, cluster_watches)
    for r in runners:
        _log_composite(r)
    return manager, runners


@dataclass
class Wiring:
    """What every runner of one controller set is built with; a definition that cannot run goes to `refused`
    (when given) and the others run."""

    settings: ControllerSettings
    manager: Manager
    evaluator: HookEvaluator
    actuator: Actuator
    discovery: Discovery
    hooks: Hooks
    from_cluster: set[str]  # names of the definitions read from the API server
    refused: dict[str, Exception] | None

    def runner(self, d: Any, kind: Any) -> Any:
        """A definition naming a type not served (after --discovery-wait for a file's) is refused, not the
        process: the others run, and it starts once the type is served (`_now_served`)."""
        sync, finalize, customize = self.hooks[d.name]
        try:
            return kind(
                d,
                manager=self.manager,
                evaluator=self.evaluator,
                actuator=self.actuator,
                sync_hook=sync,
                finalize_hook=finalize,
                customize_hook=customize,
                discovery=self.discovery,
                # a definition from the API server whose types are not served yet is refused now, not waited for
                discovery_wait=0.0 if d.name in self.from_cluster else self.settings.discovery_wait,
            )
        except DiscoveryError as exc:
            if self.refused is None:
                raise
            self.refused[d.name] = Unserved(exc, cluster_definitions.rules(d))
            if d.name not in self.from_cluster:  # the server's get it in their status
                log.error("controller refused: a type it names is not served; the others run",
                          extra={"controller": d.name, "error": str(exc)})  # fmt: skip
            return None

    def watches(self, files: Sequence[Any], cluster: Sequence[Any]) -> None:
        """The Watches of --controllers files (one that cannot run stops the set), then the API server's
        (one that cannot run is refused alone, as a cluster definition is)."""
        self._build_watches(files, self.settings.discovery_wait)
        taken = {w.name for w in files}
        for w in cluster:
            try:
                if w.name in taken:
                    raise RegokiteError(f"a --controllers file already defines Watch {w.name}")
                self._build_watches([w], 0.0)
            except (RegokiteError, DiscoveryError) as exc:
                if self.refused is not None:
                    self.refused[w.name] = exc

    def _build_watches(self, watches: Sequence[Any], discovery_wait: float) -> None:
        build_watches(
            watches,
            self.settings.vars,
            manager=self.manager,
            evaluator=self.evaluator,
            actuator=self.actuator,
            discovery=self.discovery,
            discovery_wait=discovery_wait,
        )


def _log_decorator(name: str, deco: DecoratorRunner) -> None:
    log.info(
        "decorator loaded",
        extra={
            "controller": name,
            "resources": [t.type.key for t in deco.targets],
            "attachments": [t.key for t in deco.attachment_types],
            "sync": deco.sync_hook.package,
        },
    )


def _log_composite(r: CompositeRunner) -> None:
    log.info(
        "controller loaded",
        extra={
            "controller": r.name,
            "parent": r.parent_type.key,
            "children": [t.key for t in r.child_types],
            "sync": r.sync_hook.package,
            "finalize": r.finalize_hook.package if r.finalize_hook else None,
        },
    )


def serve(settings: ControllerSettings) -> int:
    replica = start_replication(settings)
    try:
        return serve_live(settings, replica)
    finally:
        if replica is not None:
            replica.stop()


def serve_live(settings: ControllerSettings, replica: Replicator | None = None) -> int:
    """Run the definitions of `--controllers` files and (`--watch-definitions`) of the API server,
    rebuilding when the server's definitions change (one applied, edited or deleted; a refused one's
    types now served) or a file under `--policies` or `--controllers` does. The new set is built beside
    the running one; only when it loads is the old manager stopped (in-flight syncs finish, children
    are left alone) and the new one started, its informers re-syncing every parent. A set that does
    not load is logged and the last good one keeps running. Blocks until SIGTERM/SIGINT."""
    client = KubeClient(settings.kubeconfig, pool_size=8)
    actuator = Actuator(client, settings.field_manager)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    current = read_definitions(settings, client)
    policies = _files_fingerprint([*settings.policies, *settings.controllers])
    shards = None
    if settings.shards is not None:  # one membership for every controller set this process runs in turn
        shards = Shards(KubeClient(settings.kubeconfig, pool_size=4), settings.shards)
    joined = False
    manager: Manager | None = None
    refused: dict[str, Exception] = {}
    reason = ""
    generation = 0  # of the running definition set, for /readyz
    while not stopping.is_set():
        attempt: dict[str, Exception] = {}
        try:
            new, _ = build(settings, current.controllers, attempt, replica, current.watches)
        except RegokiteError as exc:
            if manager is None:
                raise
            definitions_reload_errors.inc()
            log.error("new policies or definitions refused: the last good set keeps running", extra={"error": str(exc)})
            manager.detail["definitions"] = {**manager.detail["definitions"], "reload_error": str(exc)[:2000]}
        else:
            if manager is not None:
                manager.stop()
            manager, refused = new, attempt
            generation += 1
            manager.detail["definitions"] = {
                "generation": generation,
                "running": current.names(),
                "refused": {name: str(exc)[:500] for name, exc in refused.items()},
                "reload_error": None,
            }
            if settings.leader is not None:
                manager.use_leader_election(settings.leader.elector(settings.kubeconfig))
            if shards is not None:
                manager.use_shards(shards)
            if settings.metrics_port is not None:
                manager.serve_health(settings.metrics_port, settings.metrics_host)
            manager.start()
            if shards is not None and not joined:  # join once the caches are in: take a share only when able
                threading.Thread(target=shards.run, args=(stopping,), name="shards", daemon=True).start()
                joined = True
            if reason:  # counted once the old set has stopped: from here on only the new one acts
                log.info(f"{reason}: controllers restarted", extra={"controllers": current.names()})
                definitions_reloads.inc()
        if manager is not None:  # one writer of the definitions' status
            _report(manager, current, actuator, refused)
        while not stopping.wait(settings.definitions_poll):
            try:
                found = read_definitions(settings, client, current)
            except Exception as exc:  # the API server away for a moment (any error type): keep running what runs
                log.warning("could not read definitions", extra={"error": str(exc)[:500]})
                continue
            if manager is not None:
                _report(manager, found, actuator, refused)
            files = _files_fingerprint([*settings.policies, *settings.controllers])
            if found.fingerprint() != current.fingerprint() or files != policies:
                reason = "definitions changed" if files == policies else "policies changed"
            elif _now_served(refused, found, Discovery(client)):
                reason = "definition types now served"
            else:
                continue
            current, policies = found, files
            break
    if manager is not None:
        manager.stop()
    if shards is not None:
        shards.release()  # after the last sync: the others take our share on their next round
    return 0


def _report(
    manager: Manager,
    found: cluster_definitions.ClusterDefinitions,
    actuator: Actuator,
    refused: dict[str, Exception],
) -> None:
    """Write the definitions' status from one replica: the leader, or with shards the owner of SINGLETON."""
    if manager.shards is None:
        if manager.leading:
            cluster_definitions.report(found, actuator, refused)
        return
    if manager.shards.begin(*SINGLETON) is not Verdict.MINE:
        return
    try:
        cluster_definitions.report(found, actuator, refused)
    finally:
        manager.shards.end()


def read_definitions(
    settings: ControllerSettings,
    client: KubeClient,
    previous: cluster_definitions.ClusterDefinitions | None = None,
) -> cluster_definitions.ClusterDefinitions:
    """The definitions on the API server with --watch-definitions; none without it. A refused edit of
    one of `previous` keeps its previous version."""
    if not settings.watch_definitions:
        return cluster_definitions.ClusterDefinitions()
    return cluster_definitions.read(client, Discovery(client), previous)


def _files_fingerprint(paths: Sequence[str]) -> list[tuple[str, int, int]]:
    """Every file under `paths` with its size and modification time: changes when any is edited, added or removed."""
    found = []
    for root in map(Path, paths):
        for f in sorted(root.rglob("*")) if root.is_dir() else [root]:
            try:
                st = f.stat()
            except OSError:
                continue
            if f.is_file():
                found.append((str(f), st.st_size, st.st_mtime_ns))
    return found


def _now_served(
    refused: dict[str, Exception], found: cluster_definitions.ClusterDefinitions, discovery: Discovery
) -> bool:
    """Has a definition refused because its types were not served (a CRD not installed yet) become runnable?"""
    for name, exc in refused.items():
        if not isinstance(exc, Unserved):
            continue
        rules = exc.rules or next((cluster_definitions.rules(d) for d in found.controllers if d.name == name), [])
        try:
            for rule in rules:
                discovery.resolve(rule.api_version, rule.resource)
        except DiscoveryError:
            continue
        return True
    return False


class Unserved(DiscoveryError):
    """A definition refused because a type it names is not served; `rules`: what to resolve again."""

    def __init__(self, exc: DiscoveryError, rules: Sequence[Any]) -> None:
        super().__init__(str(exc))
        self.rules = list(rules)
