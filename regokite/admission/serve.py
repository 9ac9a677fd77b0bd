"""Run the admission server: TLS, worker processes, hot reload of policies and certificates.

regorus holds the GIL while it evaluates, so parallelism is by processes:
the supervisor binds the socket once and forks workers that share it, each
with its own engine, and replaces a worker stuck in one evaluation or over
its memory limit. Each worker polls the policy files and the TLS files; a
changed policy set is built off to the side and swapped in whole, and a set
that fails to build leaves the last good one serving. A worker that loads a
set records the files it read (`LastGood`); a replacement starts from the
newest record, never from the policy dir, which may be broken at that
moment; likewise it starts with the certificate the supervisor loaded, then
reloads a newer pair only once it loads. Connections are accepted under the
limits of `connections`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from regokite.admission.app import ServingState, create_app
from regokite.admission.connections import ConnectionLimits, GuardedServer
from regokite.admission.policies import PolicySet, build_policy_set
from regokite.admission.violation_reports import ViolationReporter
from regokite.bundle import Bundle, fingerprint
from regokite.clusterdata.store import ReplicaStore, ResourceRef, TextReplicaStore
from regokite.engine import UNDEFINED, EngineSettings
from regokite.errors import RegokiteError
from regokite.gatekeeper.constraints import GatekeeperSources, read_sources
from regokite.gatekeeper.exempt import Exemptions
from regokite.kube.actuator import Actuator
from regokite.kube.client import KubeClient
from regokite.kube.events import BackgroundEvents
from regokite.kube.replica_feed import ReplicaFeed, run_feed
from regokite.kube.replicate import Replicator, check_access
from regokite.ops import admission_metrics as metrics
from regokite.ops.metrics import forget_process
from regokite.ops.tls import server_context
from regokite.ops.watchdog import Allowances, Watchdog, resident_bytes

log = logging.getLogger("regokite.admission")

LOCAL_HINT = "with no cluster, --local serves the other policies and leaves out those that read cluster data"

# How late a changed or removed replicated object may show in decisions (a new
# one shows at once): the embedded engine reloads its data at most this often.
REPLICA_MAX_LAG = 0.5
FEEDER = -1  # the supervisor's slot for the replica feeder among its children
LOAD_POLL_SECONDS = 0.05  # how often a worker looks for replica changes its engine has not taken
# The watchdog's limit for one step of a replica load (LOAD_STEP_BYTES of JSON text; 0.2-0.6 s here):
# a step this long is stuck, not slow.
LOAD_STEP_LIMIT = 60.0
LOADING = "(loading cluster data)"  # what a worker is doing during a load step, for the watchdog's log
# Memory a worker may hold beyond --worker-memory-limit, per byte of the replicated objects' JSON
# text: its mirror (~1.6x), regorus's copy (~4.9x) and a second copy while a reload builds the next
# (~5.4x), measured with 100,000 ConfigMaps (30 MiB of text: 360 MiB allowed).
REPLICA_MEMORY_FACTOR = 12
ALLOWANCE_SECONDS = 5.0  # how often a worker re-measures its replica for that allowance


@dataclass
class AdmissionSettings:
    policies: list[str]
    engine: EngineSettings = field(default_factory=EngineSettings)  # --engine, --opa-url, --v0-compatible, ...
    host: str = "0.0.0.0"
    port: int = 8443
    tls_cert: str | None = None
    tls_key: str | None = None
    workers: int = 1
    deadline_seconds: float = 3.0
    watchdog_seconds: float = 5.0  # a worker on one review this long is replaced; 0 = never
    worker_memory_bytes: int = 256 * 2**20  # a worker resident past this is replaced; 0 = never
    max_body_bytes: int = 8 * 1024 * 1024
    reload_interval: float = 1.0
    extra: dict[str, str] = field(default_factory=dict)
    replicate: tuple[ResourceRef, ...] = ()  # beside what the policies declare
    replicate_path: str = "kubernetes"
    kubeconfig: str | None = None
    # --local: no cluster; policies that read cluster data are left out (not served) instead of
    # refusing what they match, as they do when replication is declared and unavailable
    local: bool = False
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    exemptions: Exemptions = field(default_factory=Exemptions)  # Gatekeeper's --exempt-namespace*
    log_denies: bool = False  # Gatekeeper's --log-denies
    emit_admission_events: bool = False  # Gatekeeper's --emit-admission-events
    events_namespace: str = "gatekeeper-system"  # where those Events go (Gatekeeper's own namespace)
    events_involved_namespace: bool = False  # --admission-events-involved-namespace: the resource's instead
    mutation_annotations: bool = False  # Gatekeeper's --mutation-annotations
    # set by `serve`: where the feeder process serves the replica (Unix socket, key); None: no credentials
    replica_feed: tuple[str, bytes] | None = None

    def read(self) -> Snapshot:
        """The policy files as they are now (the fingerprint taken first, so a change while reading shows next time)."""
        read_at, files = time.monotonic(), fingerprint(self.policies)
        return Snapshot(read_at, files, self.bundle(), read_sources(self.policies))

    def bundle(self) -> Bundle:
        return self.engine.load(self.policies)

    def build(self, snapshot: Snapshot) -> PolicySet:
        """The policy set of a snapshot; Gatekeeper templates that did not load are logged (their
        constraints then refuse what they match) and the rest serve."""
        policy_set = build_policy_set(
            snapshot.bundle,
            self.engine,
            source=self.policies,
            gatekeeper_sources=snapshot.gatekeeper,
            mutation_annotations=self.mutation_annotations,
        )
        for problem in policy_set.problems:
            log.error("gatekeeper resource not loaded", extra={"error": problem})
        return policy_set.without_cluster_data() if self.local else policy_set

    @property
    def mode(self) -> str:
        return "local" if self.local else "cluster"

    def tls_files(self) -> list[str | None]:
        return [self.tls_cert, self.tls_key]


def _violation_reporter(settings: AdmissionSettings) -> ViolationReporter | None:
    """In the worker (after the fork: the Event thread is its own)."""
    if not (settings.log_denies or settings.emit_admission_events):
        return None
    events = None
    if settings.emit_admission_events:
        events = BackgroundEvents(Actuator(KubeClient(settings.kubeconfig), "regokite-admission"))
    return ViolationReporter(
        log_denies=settings.log_denies,
        events=events,
        home=settings.events_namespace,
        involved_namespace=settings.events_involved_namespace,
    )


def follow_cluster(
    settings: AdmissionSettings, replica: Replicator | ReplicaFeed | None, policy_set: PolicySet
) -> tuple[Replicator | ReplicaFeed | None, PolicySet]:
    """Replicate what the flags and `policy_set` name, starting replication on first need; the set reads it.

    Without Kubernetes credentials, replication the flags ask for is an
    error; policies that declare cluster data come back marked unavailable
    (they fail as their failure_policy says) rather than decide on none.
    """
    refs = {*settings.replicate, *policy_set.replicate}
    if refs and replica is None:
        try:
            client = KubeClient(settings.kubeconfig)
        except RegokiteError as exc:
            if settings.replicate:
                raise
            return None, replace(policy_set, unavailable={**policy_set.unavailable, **_unreplicated(policy_set, exc)})
        if settings.replica_feed is not None:
            mirror = TextReplicaStore(settings.replicate_path, max_lag=REPLICA_MAX_LAG)
            replica = ReplicaFeed(*settings.replica_feed, client, mirror)
        else:
            replica = Replicator(client, ReplicaStore(settings.replicate_path, max_lag=REPLICA_MAX_LAG))
    if replica is not None:
        new = sorted(refs - set(replica.resources))
        if new:
            # refused before a reload takes them on: a resource that cannot be listed would never be ready
            check_access(replica.client, new)
        replica.exclude(policy_set.sync_excluded)
        replica.ensure(new)
        policy_set.follow(replica.store, stepped=True)  # the worker's ReplicaLoader loads it
    elif policy_set.reads_inventory:
        log.warning(
            "Gatekeeper templates read data.inventory but nothing is replicated: they see no objects"
            " (--replicate / --replicate-cluster name what to replicate)"
        )
    return replica, policy_set


@dataclass(frozen=True)
class Snapshot:
    """Policy files read at `read_at` (CLOCK_MONOTONIC, the same in every process)."""

    read_at: float
    fingerprint: tuple
    bundle: Bundle
    gatekeeper: GatekeeperSources = field(default_factory=GatekeeperSources)  # templates, constraints beside it


class LastGood:
    """The newest policy files a worker loaded without error, for the supervisor to start workers from.

    Each worker slot replaces its own file (atomically) after a good load;
    the supervisor reads the newest of them and of its own start-up read.
    """

    def __init__(self, directory: Path, first: Snapshot) -> None:
        self.directory, self.first = directory, first

    def save(self, slot: int, snapshot: Snapshot) -> None:
        partial = self.directory / f".{slot}.partial"
        partial.write_bytes(pickle.dumps(snapshot))
        os.replace(partial, self.directory / f"{slot}.snapshot")

    def newest(self) -> Snapshot:
        found = [self.first]
        for file in self.directory.glob("*.snapshot"):
            with contextlib.suppress(OSError, pickle.UnpicklingError, EOFError):
                found.append(pickle.loads(file.read_bytes()))
        return max(found, key=lambda snapshot: snapshot.read_at)


class Reloader:
    """Polls policy and TLS files and applies changes inside the worker's event loop."""

    def __init__(
        self,
        settings: AdmissionSettings,
        state: ServingState,
        served: Snapshot,
        tls: ssl.SSLContext,
        tls_fingerprint: tuple,
        saved: Callable[[Snapshot], None],
        loader: ReplicaLoader,
    ) -> None:
        self.settings, self.state, self.tls, self.saved, self.loader = settings, state, tls, saved, loader
        self._policies = served.fingerprint
        self._certs = tls_fingerprint

    async def run(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.settings.reload_interval)

    async def check(self) -> None:
        policies = await asyncio.to_thread(fingerprint, self.settings.policies)
        if policies != self._policies:
            await asyncio.sleep(0.2)  # let an editor or a ConfigMap update finish writing
            await self.reload_policies()
        certs = fingerprint(self.settings.tls_files())
        if certs != self._certs:
            self._certs = certs
            self.reload_tls()

    async def reload_policies(self) -> None:
        candidate, snapshot = await asyncio.to_thread(self._build)
        if isinstance(candidate, PolicySet):
            try:
                self.state.replica, candidate = follow_cluster(self.settings, self.state.replica, candidate)
                # engines are pinned to the thread that prepares them: prepare this one now
                candidate.engine.bind(UNDEFINED)
            except RegokiteError as exc:
                candidate = str(exc)
        if isinstance(candidate, str):
            metrics.policy_reloads.labels("failure").inc()
            self.state.reload_failed(candidate)
            log.error("policy reload failed; still serving the last good set", extra={"error": candidate})
            return
        await self.loader.load(candidate)  # the set served meanwhile keeps its data: swapped in loaded
        metrics.policy_reloads.labels("success").inc()
        self.state.swap(candidate)
        log.info("policies reloaded", extra={"policies": [p.name for p in candidate.policies]})
        assert snapshot is not None
        await asyncio.to_thread(self.saved, snapshot)

    def _build(self) -> tuple[PolicySet | str, Snapshot | None]:
        """Read, load and check a policy set on a worker thread; a failure comes back as its message.

        Not as the exception: its traceback's frames hold the regorus engines
        this thread prepared, and they must be dropped on this thread.
        """
        read_at, self._policies = time.monotonic(), fingerprint(self.settings.policies)
        try:
            snapshot = Snapshot(read_at, self._policies, self.settings.bundle(), read_sources(self.settings.policies))
            candidate = self.settings.build(snapshot)
        except RegokiteError as exc:
            # the frames' locals go now, on this thread, cycles through the exception included
            traceback.clear_frames(exc.__traceback__)
            return str(exc), None
        candidate.engine.release_thread()
        return candidate, snapshot

    def reload_tls(self) -> None:
        """Serve a new pair only once both files load and match; until then the previous pair serves."""
        assert self.settings.tls_cert and self.settings.tls_key
        try:
            self.tls = server_context(self.settings.tls_cert, self.settings.tls_key)
        except (OSError, ssl.SSLError) as exc:
            self.state.tls_error = f"reloading {self.settings.tls_cert}: {exc}"
            log.error("TLS reload failed; keeping the previous certificate", extra={"error": str(exc)})
            return
        self.state.tls_error = None
        log.info("TLS certificate reloaded", extra={"cert": self.settings.tls_cert})


class ReplicaLoader:
    """Loads the cluster data into the served engine between reviews, never inside one.

    The engine is pinned to the event loop's thread and regorus holds the GIL
    while it takes data, so a load runs there, in steps (`load_replica`) with
    the loop's other work between them: reviews meanwhile are decided on the
    last complete load, or refused as not ready before the first (`_review`).
    Each step is noted to the watchdog on its own, under LOAD_STEP_LIMIT.
    After each load the worker's memory allowance follows the replica's size.
    """

    def __init__(
        self, state: ServingState, watch: Callable[..., None], allowance: Callable[[float], None] = lambda _: None
    ) -> None:
        self.state, self.watch, self.allowance = state, watch, allowance
        self._measured_at, self._measured = -ALLOWANCE_SECONDS, -1  # when, at which generation
        self.allowed = 0  # bytes beyond --worker-memory-limit, as last measured
        self._announced = False

    async def run(self) -> None:
        """Load for good. A load that raises ends the worker (the supervisor replaces it): a worker whose
        loader had stopped would decide on its last load for good while /readyz said ready."""
        while True:
            try:
                await self.load(self.state.policy_set)
            except Exception:
                log.exception("loading the cluster data into the engine failed: the worker exits, to be replaced")
                os._exit(1)
            await asyncio.sleep(LOAD_POLL_SECONDS)

    async def load(self, policy_set: PolicySet) -> None:
        """Catch `policy_set`'s engine up with the replica, a step at a time."""
        replica = self.state.replica
        if replica is None:
            return
        self._measure(replica)  # the allowance before the load, which holds a second copy of the data
        started, steps = time.monotonic(), policy_set.engine.load_replica()
        taken = 0
        try:
            while True:
                self.watch(LOADING, LOAD_STEP_LIMIT)
                try:
                    if next(steps, _END) is _END:
                        break
                finally:
                    self.watch(None)
                taken += 1
                await asyncio.sleep(0)  # the reviews waiting
        finally:
            steps.close()  # on this thread: a step holds an engine
        if taken:
            self._measured_at = -ALLOWANCE_SECONDS  # a load's end: measure now
        self._measure(replica)
        if taken:
            self._loaded(replica, policy_set, taken, time.monotonic() - started)

    def _loaded(self, replica: Replicator | ReplicaFeed, policy_set: PolicySet, steps: int, seconds: float) -> None:
        held, needed = policy_set.engine.loaded_generation(), replica.ready_at()
        if not self._announced and held is not None and needed is not None and held >= needed:
            self._announced = True
            log.info(
                "cluster data loaded into the engine",
                extra={
                    "objects": replica.objects(),
                    "steps": steps,
                    "seconds": round(seconds, 3),
                    "replica_allowance_bytes": self.allowed,  # beyond --worker-memory-limit
                },
            )

    def _measure(self, replica: Replicator | ReplicaFeed) -> None:
        now, generation = time.monotonic(), replica.store.generation
        if generation != self._measured and now - self._measured_at >= ALLOWANCE_SECONDS:
            self._measured_at, self._measured = now, generation
            self.allowed = REPLICA_MEMORY_FACTOR * replica.store.text_bytes()
            self.allowance(self.allowed)


_END = object()


@dataclass(frozen=True)
class Tls:
    """The pair the supervisor loaded at start, which every worker starts with."""

    context: ssl.SSLContext
    fingerprint: tuple


def _worker(
    settings: AdmissionSettings,
    sock: socket.socket,
    tls: Tls,
    start: Snapshot,
    watch: Callable[..., None],
    saved: Callable[[Snapshot], None],
    allowance: Callable[[float], None] = lambda _: None,
) -> None:
    """One worker process: its own engine, its own event loop, the shared socket, its own replication."""
    replica, policy_set = follow_cluster(settings, None, settings.build(start))
    state = ServingState(
        policy_set,
        deadline_seconds=settings.deadline_seconds,
        max_body_bytes=settings.max_body_bytes,
        watch=watch,
        replica=replica,
        exemptions=settings.exemptions,
        on_decision=_violation_reporter(settings),
    )
    loader = ReplicaLoader(state, watch, allowance)
    reloader = Reloader(settings, state, start, tls.context, tls.fingerprint, saved, loader)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(reloader.run()), asyncio.create_task(loader.run())]
        yield
        for task in tasks:
            task.cancel()

    config = uvicorn.Config(
        create_app(state, lifespan),
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_keep_alive=settings.limits.keep_alive_timeout,  # type: ignore[arg-type]
        timeout_graceful_shutdown=10,
    )
    GuardedServer(config, sock, lambda: reloader.tls, settings.limits).run()


def serve(settings: AdmissionSettings) -> int:
    """Load once to fail fast, bind, then fork the workers and watch over them."""
    first = settings.read()
    policy_set = settings.build(first)  # a broken policy dir stops startup with a clear error
    log.info(
        "policies loaded",
        extra={
            "engine": settings.engine.kind,
            "mode": settings.mode,
            "policies": [p.name for p in policy_set.policies],
        },
    )
    for name, reads in policy_set.not_served.items():
        log.warning("needs a cluster: not served", extra={"mode": "local", "policy": name, "reads": reads})
    feeding = _check_replication(settings, policy_set)
    policy_set.close()
    assert settings.tls_cert and settings.tls_key
    tls_files = fingerprint(settings.tls_files())
    try:
        tls = Tls(server_context(settings.tls_cert, settings.tls_key), tls_files)
    except (OSError, ssl.SSLError) as exc:
        raise RegokiteError(f"TLS: {settings.tls_cert} with {settings.tls_key}: {exc}") from None
    # Only the workers' live gauges (policies loaded, reload healthy) describe what is served.
    forget_process(os.getpid())
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    log.info("serving admission reviews", extra={"address": f"https://{settings.host}:{sock.getsockname()[1]}"})
    snapshots = Path(tempfile.mkdtemp(prefix="regokite-policies-"))
    if feeding:
        settings = replace(settings, replica_feed=(str(snapshots / "replica.sock"), os.urandom(32)))
    try:
        return _supervise(settings, sock, tls, LastGood(snapshots, first))
    finally:
        shutil.rmtree(snapshots, ignore_errors=True)


def _unreplicated(policy_set: PolicySet, why: Exception) -> dict[str, str]:
    """Each policy that declares cluster data, and why it cannot have it."""
    return {
        p.name: f"reads cluster data ({', '.join(map(str, p.replicate))}) but regokite cannot replicate it: {why}"
        for p in policy_set.policies
        if p.replicate
    }


def _check_replication(settings: AdmissionSettings, policy_set: PolicySet) -> bool:
    """Fail fast on refused lists; say loudly which policies cannot decide without credentials.
    True when there are credentials to replicate with (a reload may declare replication later).

    Only checks: the informers run in the feeder process, after the fork.
    """
    if settings.local:
        return False
    refs = sorted({*settings.replicate, *policy_set.replicate})
    try:
        client = KubeClient(settings.kubeconfig)
    except RegokiteError as exc:
        if settings.replicate:
            raise
        for name, reason in _unreplicated(policy_set, exc).items():
            log.error(
                "policy refuses every request it matches",
                extra={"mode": "cluster", "policy": name, "error": reason, "hint": LOCAL_HINT},
            )
        return False
    if not refs:
        client.close()
        return True
    try:
        check_access(client, refs)
    finally:
        client.close()
    log.info("replicating cluster data", extra={"resources": [str(r) for r in refs]})
    return True


def _supervise(settings: AdmissionSettings, sock: socket.socket, tls: Tls, last_good: LastGood) -> int:
    """Fork the workers and replace any that die, stay stuck on one review or outgrow their memory; pass SIGTERM on.

    Always at least one forked worker, even with --workers 1: only a process
    outside the worker can stop an evaluation that never ends.
    """
    workers = max(1, settings.workers)
    watchdog = Watchdog(workers, settings.watchdog_seconds)
    allowances = Allowances(workers)  # memory each worker may hold beyond the limit for its replica
    children: dict[int, int] = {}
    killed: dict[int, str] = {}  # pid -> why the supervisor killed it
    stopping = False

    def spawn(slot: int) -> None:
        if slot == FEEDER:
            children[_fork_feeder(settings)] = slot
            return
        watchdog.clear(slot)
        allowances.setter(slot)(0.0)
        start = last_good.newest()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                saved, allowance = partial(last_good.save, slot), allowances.setter(slot)
                _worker(settings, sock, tls, start, watchdog.tracker(slot), saved, allowance)
            except BaseException:
                log.exception("admission worker crashed")
                os._exit(1)
            os._exit(0)
        children[pid] = slot

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if settings.replica_feed is not None:
        spawn(FEEDER)
    for slot in range(workers):
        spawn(slot)
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            # stopping too: a stuck worker would never see SIGTERM
            _kill_overdue(settings, watchdog, allowances, children, killed)
            time.sleep(0.05)
            continue
        slot = children.pop(pid, None)
        forget_process(pid)
        reason = killed.pop(pid, None)
        if slot is None or stopping:
            continue
        if slot == FEEDER:
            log.error("replica feeder exited; restarting it", extra={"pid": pid, "status": _describe(status)})
            time.sleep(0.5)
            spawn(FEEDER)
            continue
        if reason is None:
            reason = "exited"
            log.error(
                "admission worker exited; restarting it",
                extra={"pid": pid, "status": _describe(status), "policy": watchdog.policy(slot)},
            )
            time.sleep(0.5)  # no tight loop if workers die at once
        metrics.worker_restarts.labels(reason).inc()
        spawn(slot)
    return 0


def _fork_feeder(settings: AdmissionSettings) -> int:
    """The replica feeder process (`replica_feed`): the one list+watch per resource the workers mirror."""
    assert settings.replica_feed is not None
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        address, key = settings.replica_feed
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)  # a feeder's before this one
        try:
            run_feed(address, key, settings.kubeconfig, settings.replicate_path)
        except BaseException:
            log.exception("replica feeder crashed")
            os._exit(1)
        os._exit(0)
    return pid


def _kill_overdue(
    settings: AdmissionSettings,
    watchdog: Watchdog,
    allowances: Allowances,
    children: dict[int, int],
    killed: dict[int, str],
) -> None:
    """Kill workers stuck in one review (or one step of a replica load) past the watchdog limit or
    resident past the memory limit plus their replica's allowance."""
    slots = {slot: pid for pid, slot in children.items() if pid not in killed and slot != FEEDER}
    if settings.watchdog_seconds > 0:
        message = "admission worker stuck in one review past the watchdog limit; killing and replacing it"
        watchdog.kill_overdue(slots, killed, message, log, lambda pid, _: killed.__setitem__(pid, "stuck"))
    if settings.worker_memory_bytes > 0:
        for slot, pid in slots.items():
            if pid in killed:
                continue
            resident, allowed = resident_bytes(pid), int(allowances.get(slot))
            if resident is not None and resident > settings.worker_memory_bytes + allowed:
                _kill(
                    pid,
                    "memory",
                    killed,
                    "admission worker over its memory limit (--worker-memory-limit, plus the allowance"
                    " for its replicated data); killing and replacing it",
                    policy=watchdog.policy(slot),
                    resident_bytes=resident,
                    limit_bytes=settings.worker_memory_bytes,
                    replica_allowance_bytes=allowed,
                )


def _kill(pid: int, reason: str, killed: dict[int, str], message: str, **details: object) -> None:
    log.error(message, extra={"pid": pid, **details})
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    killed[pid] = reason


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def print_ca_bundle(ca_pem: bytes) -> None:
    import base64

    print(f"caBundle: {base64.b64encode(ca_pem).decode()}", flush=True)
    sys.stdout.flush()
