"""One admission worker process: its own engine and event loop on the supervisor's socket, serving `app`
under the limits of `connections` while `reload` keeps its policies, certificate and cluster data current."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from regokite.admission.app import ServingState, cluster_data_missing, create_app
from regokite.admission.connections import GuardedServer, listening
from regokite.admission.reload import LOAD_POLL_SECONDS, Reloader, ReplicaLoader, follow_cluster
from regokite.admission.settings import AdmissionSettings, Snapshot
from regokite.admission.violation_reports import ViolationReporter
from regokite.decisionlogs import config as decisionlog_config
from regokite.decisionlogs.logger import DecisionLogger
from regokite.kube.actuator import Actuator
from regokite.kube.client import KubeClient
from regokite.kube.events import BackgroundEvents

# set in a worker when its supervisor got SIGTERM (SIGUSR1 from it, or forked after): /readyz answers 503
STOPPING = threading.Event()
log = logging.getLogger("regokite.admission")


@dataclass(frozen=True)
class Tls:
    """The pair the supervisor loaded at start, which every worker starts with."""

    context: ssl.SSLContext
    fingerprint: tuple


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


def _decision_logger(settings: AdmissionSettings, state: ServingState) -> DecisionLogger | None:
    """OPA's decision logger when the configuration file has `decision_logs`: one per worker process."""
    config = settings.bundles.config
    if config.decision_logs is None:
        return None
    parsed = decisionlog_config.parse(config.decision_logs, config.services, config.labels)
    status = settings.bundles.status if settings.bundles.downloaded else None
    return DecisionLogger(parsed, lambda: state.policy_set.engine, status)


def run_worker(
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
        source_checks=settings.source_checks,
        stopping=STOPPING.is_set,
        files_read_at=start.read_on_the_wall_clock(),  # a worker started from the last good files: when read
        bundle_status=settings.bundles.status if settings.bundles.downloaded else None,
    )
    state.decision_log = _decision_logger(settings, state)
    loader = ReplicaLoader(state, watch, allowance)
    reloader = Reloader(settings, state, start, tls.context, tls.fingerprint, saved, loader)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(reloader.run()), asyncio.create_task(loader.run())]
        if listening(sock):  # another worker answers meanwhile: this one joins once it can decide
            await until_it_decides(state)
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
    try:
        GuardedServer(config, sock, lambda: reloader.tls, settings.limits).run()
    finally:
        if state.decision_log is not None:
            state.decision_log.close()  # what is buffered is reported once more before the worker goes


async def until_it_decides(state: ServingState) -> None:
    """Until the worker's engine holds the cluster data its policies read (or it is stopping). A worker that
    starts beside others (a replacement, or the second of several) accepts no connection before then: its
    503 "loading cluster data" would reach an API server that another worker could have answered."""
    waited = False
    while not state.stopping() and (missing := cluster_data_missing(state, state.policy_set)) is not None:
        if not waited:
            log.info("worker joins once its cluster data is loaded", extra={"missing": missing})
            waited = True
        await asyncio.sleep(LOAD_POLL_SECONDS)
