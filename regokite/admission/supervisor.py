"""The admission server's supervisor: load once to fail fast, bind, fork the workers, watch over them.

regorus holds the GIL while it evaluates, so parallelism is by processes: the
supervisor binds the socket once and forks workers that share it, each with
its own engine (`worker`), and replaces a worker stuck in one evaluation or
over its memory limit. A replacement starts from the newest policy files a
worker loaded (`reload.LastGood`) and with the certificate the supervisor
loaded. With credentials, a replica feeder process holds the one list+watch
per replicated resource that the workers mirror.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import NoReturn

from regokite.admission.policies import PolicySet
from regokite.admission.reload import LastGood, unreplicated
from regokite.admission.settings import AdmissionSettings, Snapshot
from regokite.admission.worker import STOPPING, Tls, run_worker
from regokite.bundle import fingerprint
from regokite.bundles.archive import LoadedBundle, combine
from regokite.bundles.plugin import BundlePlugin
from regokite.errors import RegokiteError
from regokite.gatekeeper.constraints import read_sources
from regokite.kube.client import KubeClient
from regokite.ops import admission_metrics as metrics
from regokite.ops.metrics import forget_process
from regokite.ops.tls import server_context
from regokite.ops.watchdog import Allowances, Watchdog, resident_bytes
from regokite.replication.replica_feed import run_feed
from regokite.replication.replicate import check_access

log = logging.getLogger("regokite.admission")

LOCAL_HINT = "with no cluster, --local serves the other policies and leaves out those that read cluster data"
FEEDER = -1  # the supervisor's slot for the replica feeder among its children
DOWNLOADER = -2  # and for the bundle downloader


def serve(settings: AdmissionSettings) -> int:
    """Load once to fail fast, bind, then fork the workers and watch over them."""
    if not settings.bundles.downloaded:
        return _serve(settings, None)
    store = Path(tempfile.mkdtemp(prefix="regokite-bundles-"))
    try:
        settings, plugin = _activate_bundles(settings, store)
        return _serve(settings, plugin)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def _activate_bundles(settings: AdmissionSettings, store: Path) -> tuple[AdmissionSettings, BundlePlugin]:
    """The downloaded bundles active before anything is served (from disk when persisted, else from their
    service, waiting for it): nothing decides on policies not loaded yet."""
    settings = replace(settings, bundles=replace(settings.bundles, store=str(store)))
    plugin = BundlePlugin(
        settings.bundles.config, store, partial(_check_bundles, settings), v0_compatible=settings.engine.v0_compatible
    )
    plugin.start_from_disk()
    if not plugin.ready():
        log.info("waiting for the bundles to activate", extra={"bundles": sorted(plugin.sources)})
        plugin.activate_all()
    return settings, plugin


def _check_bundles(settings: AdmissionSettings, bundles: list[LoadedBundle]) -> None:
    """What a worker would build from these bundles, built (by the embedded engine: a sidecar OPA would take
    them as its policies) and dropped: a bundle that does not load is refused before it is activated."""
    base = settings.engine.load(settings.policies) if settings.policies else None
    snapshot = Snapshot(time.monotonic(), (), combine(bundles, base), read_sources(settings.policies))
    replace(settings, engine=settings.engine.checking()).build(snapshot).close()


def _serve(settings: AdmissionSettings, plugin: BundlePlugin | None) -> int:
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
    sock = bound_socket(settings.host, settings.port)  # "serving admission reviews" once a worker listens
    snapshots = Path(tempfile.mkdtemp(prefix="regokite-policies-"))
    if feeding:
        settings = replace(settings, replica_feed=(str(snapshots / "replica.sock"), os.urandom(32)))
    try:
        return _supervise(settings, sock, tls, LastGood(snapshots, first), plugin)
    finally:
        shutil.rmtree(snapshots, ignore_errors=True)


def bound_socket(host: str, port: int) -> socket.socket:
    """The socket the workers share, bound (not listening: the first worker ready listens, `start_listening`) with
    SO_REUSEPORT, so that a new server can start on the same address while this one drains (a rolling restart on
    one host) and gets no connection before it can answer one."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


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
        for name, reason in unreplicated(policy_set, exc).items():
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


class Shutdown:
    """SIGTERM or SIGINT: the workers are stopped after --shutdown-delay, serving meanwhile (a Pod being deleted is
    called until its endpoint goes), or on a second signal at once, as Gatekeeper's."""

    def __init__(self, delay: float, children: dict[int, int]) -> None:
        self.delay, self.children = delay, children  # children: the supervisor's, pid -> slot
        self.at: float | None = None
        self.stopping = self.announced = False

    def signalled(self, _signum: int, _frame: object) -> None:
        if self.at is None and self.delay > 0:
            self.at = time.monotonic() + self.delay  # no logging here: the handler may interrupt a log call
            for pid, slot in list(self.children.items()):  # not ready from now on (/readyz 503), still deciding
                if slot >= 0:  # workers only: the feeder and downloader die of SIGUSR1
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGUSR1)
        else:
            self.stop()

    def when_due(self) -> None:
        if self.at is None or self.stopping:
            return
        if not self.announced:
            self.announced = True
            log.info("shutting down once the delay ends; serving meanwhile", extra={"seconds": self.delay})
        if time.monotonic() >= self.at:
            self.stop()

    def stop(self) -> None:
        self.stopping = True
        for pid in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def _supervise(
    settings: AdmissionSettings, sock: socket.socket, tls: Tls, last_good: LastGood, plugin: BundlePlugin | None = None
) -> int:
    """Fork the workers and replace any that die, stay stuck on one review or outgrow their memory; pass SIGTERM on.

    Always at least one forked worker, even with --workers 1: only a process
    outside the worker can stop an evaluation that never ends.
    """
    workers = max(1, settings.workers)
    watchdog = Watchdog(workers, settings.watchdog_seconds)
    allowances = Allowances(workers)  # memory each worker may hold beyond the limit for its replica
    children: dict[int, int] = {}
    killed: dict[int, str] = {}  # pid -> why the supervisor killed it
    shutdown = Shutdown(settings.shutdown_delay, children)

    def spawn(slot: int, restarted: bool = False) -> None:
        if slot == FEEDER:
            children[_fork_feeder(settings)] = slot
            return
        if slot == DOWNLOADER:
            assert plugin is not None
            children[_fork_downloader(plugin, restarted)] = slot
            return
        watchdog.clear(slot)
        allowances.setter(slot)(0.0)
        start = last_good.newest()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGUSR1, lambda *_: STOPPING.set())
            if shutdown.at is not None:  # a replacement forked during --shutdown-delay
                STOPPING.set()
            tracker, saved, allowance = watchdog.tracker(slot), partial(last_good.save, slot), allowances.setter(slot)
            _exit_after("admission worker", partial(run_worker, settings, sock, tls, start, tracker, saved, allowance))
        children[pid] = slot

    signal.signal(signal.SIGTERM, shutdown.signalled)
    signal.signal(signal.SIGINT, shutdown.signalled)
    if settings.replica_feed is not None:
        spawn(FEEDER)
    if plugin is not None:
        spawn(DOWNLOADER)
    for slot in range(workers):
        spawn(slot)
    while children:
        shutdown.when_due()
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
        if slot is None or shutdown.stopping:
            continue
        if slot < 0:
            what = "replica feeder" if slot == FEEDER else "bundle downloader"
            log.error(f"{what} exited; restarting it", extra={"pid": pid, "status": _describe(status)})
            time.sleep(0.5)
            spawn(slot, restarted=True)
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


def _exit_after(what: str, run_child: Callable[[], object]) -> NoReturn:
    """A forked child's end: exit 0 when it returns, 1 when it raises (logged); never back into the supervisor."""
    try:
        run_child()
    except BaseException:
        log.exception(f"{what} crashed")
        os._exit(1)
    os._exit(0)


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
        _exit_after("replica feeder", lambda: run_feed(address, key, settings.kubeconfig, settings.replicate_path))
    return pid


def _fork_downloader(plugin: BundlePlugin, restarted: bool) -> int:
    """The bundle downloader process: polls the bundle services and activates into the store the workers read."""
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _exit_after("bundle downloader", partial(_download, plugin, restarted))
    return pid


def _download(plugin: BundlePlugin, restarted: bool) -> None:
    """The downloader's life: from the store as the last downloader left it (verified again) when restarted."""
    if restarted:
        plugin.start_from_disk()
    plugin.publish_metrics()
    plugin.run(threading.Event())


def _kill_overdue(
    settings: AdmissionSettings,
    watchdog: Watchdog,
    allowances: Allowances,
    children: dict[int, int],
    killed: dict[int, str],
) -> None:
    """Kill workers stuck in one review (or one step of a replica load) past the watchdog limit or
    resident past the memory limit plus their replica's allowance."""
    slots = {slot: pid for pid, slot in children.items() if pid not in killed and slot >= 0}  # workers only
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
