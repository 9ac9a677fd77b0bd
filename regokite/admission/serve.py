"""Run the admission server: TLS, worker processes, hot reload of policies and certificates.

regorus holds the GIL while it evaluates, so parallelism is by processes:
the supervisor binds the socket once and forks workers that share it, each
with its own engine, and replaces a worker stuck in one evaluation. Each
worker polls the policy files and the TLS files; a changed policy set is
built off to the side and swapped in whole, and a set that fails to build
leaves the last good one serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from regokite.admission.app import ServingState, create_app
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.watchdog import Watchdog
from regokite.clusterdata.replicate import Replicator, check_access
from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.engine import UNDEFINED
from regokite.engine.extensions import ExtensionOptions
from regokite.errors import RegokiteError
from regokite.kube.client import KubeClient
from regokite.ops import admission_metrics as metrics
from regokite.ops.metrics import forget_process

log = logging.getLogger("regokite.admission")

# How late a changed or removed replicated object may show in decisions (a new
# one shows at once): the embedded engine reloads its data at most this often.
REPLICA_MAX_LAG = 0.5


@dataclass
class AdmissionSettings:
    policies: list[str]
    engine: str = "embedded"
    opa_url: str | None = None
    v0_compatible: bool = False
    host: str = "0.0.0.0"
    port: int = 8443
    tls_cert: str | None = None
    tls_key: str | None = None
    workers: int = 1
    deadline_seconds: float = 3.0
    watchdog_seconds: float = 5.0  # a worker on one review this long is replaced; 0 = never
    max_body_bytes: int = 8 * 1024 * 1024
    reload_interval: float = 1.0
    extra: dict[str, str] = field(default_factory=dict)
    replicate: tuple[ResourceRef, ...] = ()  # beside what the policies declare
    replicate_path: str = "kubernetes"
    kubeconfig: str | None = None
    extensions: ExtensionOptions = field(default_factory=ExtensionOptions)  # --allow-http-send

    def load(self) -> PolicySet:
        """Load the policies; Gatekeeper templates that did not load are logged (their
        constraints then refuse what they match) and the rest serve."""
        policy_set = load_policy_set(
            self.policies,
            engine=self.engine,
            opa_url=self.opa_url,
            v0_compatible=self.v0_compatible,
            options=self.extensions,
        )
        for problem in policy_set.problems:
            log.error("gatekeeper resource not loaded", extra={"error": problem})
        return policy_set


def follow_cluster(
    settings: AdmissionSettings, replica: Replicator | None, policy_set: PolicySet
) -> tuple[Replicator | None, PolicySet]:
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
        replica = Replicator(client, ReplicaStore(settings.replicate_path, max_lag=REPLICA_MAX_LAG))
    if replica is not None:
        new = sorted(refs - set(replica.resources))
        if new:
            # refused before a reload takes them on: a resource that cannot be listed would never be ready
            check_access(replica.client, new)
        replica.ensure(new)
        policy_set.follow(replica.store)
    elif policy_set.reads_inventory:
        log.warning(
            "Gatekeeper templates read data.inventory but nothing is replicated: they see no objects"
            " (--replicate / --replicate-cluster name what to replicate)"
        )
    return replica, policy_set


def fingerprint(paths: Iterable[str | None]) -> tuple:
    """Cheap change detection: names, sizes and mtimes of every file below `paths`."""
    entries = []
    for root in paths:
        if not root:
            continue
        base = Path(root)
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for f in files:
            with contextlib.suppress(OSError):
                st = f.stat()
                entries.append((str(f), st.st_size, st.st_mtime_ns))
    return tuple(entries)


class Reloader:
    """Polls policy and TLS files and applies changes inside the worker's event loop."""

    def __init__(self, settings: AdmissionSettings, state: ServingState, tls: ssl.SSLContext | None) -> None:
        self.settings, self.state, self.tls = settings, state, tls
        self._policies = fingerprint(settings.policies)
        self._certs = fingerprint([settings.tls_cert, settings.tls_key])

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.reload_interval)
            await self.check()

    async def check(self) -> None:
        policies = await asyncio.to_thread(fingerprint, self.settings.policies)
        if policies != self._policies:
            await asyncio.sleep(0.2)  # let an editor or a ConfigMap update finish writing
            self._policies = await asyncio.to_thread(fingerprint, self.settings.policies)
            await self.reload_policies()
        certs = fingerprint([self.settings.tls_cert, self.settings.tls_key])
        if certs != self._certs and self.tls is not None:
            self._certs = certs
            self.reload_tls()

    async def reload_policies(self) -> None:
        candidate = await asyncio.to_thread(self._build)
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
        metrics.policy_reloads.labels("success").inc()
        self.state.swap(candidate)
        log.info("policies reloaded", extra={"policies": [p.name for p in candidate.policies]})

    def _build(self) -> PolicySet | str:
        """Load and check a policy set on a worker thread; a failure comes back as its message.

        Not as the exception: its traceback's frames hold the regorus engines
        this thread prepared, and they must be dropped on this thread.
        """
        try:
            candidate = self.settings.load()
        except RegokiteError as exc:
            return str(exc)
        candidate.engine.release_thread()
        return candidate

    def reload_tls(self) -> None:
        assert self.tls is not None and self.settings.tls_cert and self.settings.tls_key
        try:
            self.tls.load_cert_chain(self.settings.tls_cert, self.settings.tls_key)
        except (OSError, ssl.SSLError) as exc:
            self.state.tls_error = f"reloading {self.settings.tls_cert}: {exc}"
            log.error("TLS reload failed; keeping the previous certificate", extra={"error": str(exc)})
            return
        self.state.tls_error = None
        log.info("TLS certificate reloaded", extra={"cert": self.settings.tls_cert})


def _worker(settings: AdmissionSettings, sock: socket.socket, watch: Callable[[str | None], None]) -> None:
    """One worker process: its own engine, its own event loop, the shared socket, its own replication."""
    replica, policy_set = follow_cluster(settings, None, settings.load())
    state = ServingState(
        policy_set,
        deadline_seconds=settings.deadline_seconds,
        max_body_bytes=settings.max_body_bytes,
        watch=watch,
        replica=replica,
    )
    config_box: dict[str, uvicorn.Config] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reloader = Reloader(settings, state, config_box["config"].ssl)
        task = asyncio.create_task(reloader.run())
        yield
        task.cancel()

    app = create_app(state, lifespan)
    config = uvicorn.Config(
        app,
        ssl_certfile=settings.tls_cert,
        ssl_keyfile=settings.tls_key,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
    config_box["config"] = config
    uvicorn.Server(config).run(sockets=[sock])


def serve(settings: AdmissionSettings) -> int:
    """Load once to fail fast, bind, then fork the workers and watch over them."""
    policy_set = settings.load()  # a broken policy dir stops startup with a clear error
    # this process's gauges count too when workers share metrics: it serves a good set
    metrics.policy_reload_healthy.set(1)
    metrics.policies_loaded.set(len(policy_set.policies))
    log.info(
        "policies loaded",
        extra={"engine": settings.engine, "policies": [p.name for p in policy_set.policies]},
    )
    _check_replication(settings, policy_set)
    policy_set.close()
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    log.info("serving admission reviews", extra={"address": f"https://{settings.host}:{sock.getsockname()[1]}"})
    return _supervise(settings, sock)


def _unreplicated(policy_set: PolicySet, why: Exception) -> dict[str, str]:
    """Each policy that declares cluster data, and why it cannot have it."""
    return {
        p.name: f"reads cluster data ({', '.join(map(str, p.replicate))}) but regokite cannot replicate it: {why}"
        for p in policy_set.policies
        if p.replicate
    }


def _check_replication(settings: AdmissionSettings, policy_set: PolicySet) -> None:
    """Fail fast on refused lists; say loudly which policies cannot decide without credentials.

    Only checks: the informers run in the workers, after the fork.
    """
    refs = sorted({*settings.replicate, *policy_set.replicate})
    if not refs:
        return
    try:
        client = KubeClient(settings.kubeconfig)
    except RegokiteError as exc:
        if settings.replicate:
            raise
        for name, reason in _unreplicated(policy_set, exc).items():
            log.error("policy refuses every request it matches", extra={"policy": name, "error": reason})
        return
    try:
        check_access(client, refs)
    finally:
        client.close()
    log.info("replicating cluster data", extra={"resources": [str(r) for r in refs]})


def _supervise(settings: AdmissionSettings, sock: socket.socket) -> int:
    """Fork the workers; replace any that die or stay stuck on one review; pass SIGTERM/SIGINT on and wait.

    Always at least one forked worker, even with --workers 1: only a process
    outside the worker can stop an evaluation that never ends.
    """
    workers = max(1, settings.workers)
    watchdog = Watchdog(workers, settings.watchdog_seconds)
    children: dict[int, int] = {}
    stopping = False

    def spawn(slot: int) -> None:
        watchdog.clear(slot)
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                _worker(settings, sock, watchdog.tracker(slot))
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
    for slot in range(workers):
        spawn(slot)
    killed: set[int] = set()
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if settings.watchdog_seconds > 0:  # stopping too: a stuck worker would never see SIGTERM
                killed |= _kill_overdue(watchdog, children, killed)
            time.sleep(0.05)
            continue
        slot = children.pop(pid, None)
        forget_process(pid)
        if slot is None or stopping:
            continue
        if pid in killed:
            killed.discard(pid)
            metrics.worker_restarts.labels("stuck").inc()
        else:
            metrics.worker_restarts.labels("exited").inc()
            log.error("admission worker exited; restarting it", extra={"pid": pid, "status": status})
            time.sleep(0.5)  # no tight loop if workers die at once
        spawn(slot)
    return 0


def _kill_overdue(watchdog: Watchdog, children: dict[int, int], killed: set[int]) -> set[int]:
    slots = {slot: pid for pid, slot in children.items() if pid not in killed}
    now_killed = set()
    for stuck in watchdog.overdue():
        pid = slots.get(stuck.slot)
        if pid is None:
            continue
        log.error(
            "admission worker stuck in one review past the watchdog limit; killing and replacing it",
            extra={
                "pid": pid,
                "policy": stuck.policy,
                "seconds": round(stuck.seconds, 3),
                "limit": watchdog.limit,
            },
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        now_killed.add(pid)
    return now_killed


def print_ca_bundle(ca_pem: bytes) -> None:
    import base64

    print(f"caBundle: {base64.b64encode(ca_pem).decode()}", flush=True)
    sys.stdout.flush()
