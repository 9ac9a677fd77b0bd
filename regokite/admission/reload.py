"""What changes under a serving worker: policy files, TLS files, cluster data.

Each worker polls the policy files and the TLS files (`Reloader`); a changed
policy set is built off to the side and swapped in whole, and a set that fails
to build leaves the last good one serving. A worker that loads a set records
the files it read (`LastGood`); a replacement starts from the newest record,
never from the policy dir, which may be broken at that moment; a newer
certificate pair serves only once it loads. The cluster data the policies read
is replicated (`follow_cluster`) and loaded into the engine between reviews
(`ReplicaLoader`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import ssl
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from regokite.admission.app import ServingState
from regokite.admission.policies import PolicySet
from regokite.admission.settings import AdmissionSettings, Snapshot
from regokite.bundle import fingerprint
from regokite.clusterdata.store import ReplicaStore, TextReplicaStore
from regokite.engine import UNDEFINED
from regokite.errors import RegokiteError
from regokite.gatekeeper.constraints import read_sources
from regokite.kube.client import KubeClient
from regokite.ops import admission_metrics as metrics
from regokite.ops.tls import server_context
from regokite.replication.replica_feed import ReplicaFeed
from regokite.replication.replicate import Replicator, check_access

log = logging.getLogger("regokite.admission")

# How late a changed or removed replicated object may show in decisions (a new
# one shows at once): the embedded engine reloads its data at most this often.
REPLICA_MAX_LAG = 0.5
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
            return None, replace(policy_set, unavailable={**policy_set.unavailable, **unreplicated(policy_set, exc)})
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


def unreplicated(policy_set: PolicySet, why: Exception) -> dict[str, str]:
    """Each policy that declares cluster data, and why it cannot have it."""
    return {
        p.name: f"reads cluster data ({', '.join(map(str, p.replicate))}) but regokite cannot replicate it: {why}"
        for p in policy_set.policies
        if p.replicate
    }


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
        self._policies: tuple | None = served.fingerprint  # None: read them again
        self._certs = tls_fingerprint

    async def run(self) -> None:
        """Check for good. A check that raises ends the worker (the supervisor replaces it), as the
        ReplicaLoader's: a worker whose reloader had stopped would serve its last set for good."""
        while True:
            try:
                await self.check()
            except Exception:
                log.exception("reloading the policy files failed: the worker exits, to be replaced")
                os._exit(1)
            await asyncio.sleep(self.settings.reload_interval)

    async def check(self) -> None:
        policies = await asyncio.to_thread(fingerprint, self.settings.watched())
        if policies != self._policies:
            await asyncio.sleep(0.2)  # let an editor or a ConfigMap update finish writing
            await self.reload_policies()
        certs = fingerprint(self.settings.tls_files())
        if certs != self._certs:
            self._certs = certs
            self.reload_tls()

    async def reload_policies(self) -> None:
        candidate, snapshot = await asyncio.to_thread(self._build)
        if candidate is None:  # a file went while read: read them all again at the next check
            return
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
        assert snapshot is not None
        self.state.swap(candidate, files_read_at=snapshot.read_on_the_wall_clock())
        log.info("policies reloaded", extra={"policies": [p.name for p in candidate.policies]})
        await asyncio.to_thread(self.saved, snapshot)

    def _build(self) -> tuple[PolicySet | str | None, Snapshot | None]:
        """Read, load and check a policy set on a worker thread; a failure comes back as its message.

        Not as the exception: its traceback's frames hold the regorus engines
        this thread prepared, and they must be dropped on this thread.
        """
        read_at, files = time.monotonic(), fingerprint(self.settings.watched())
        self._policies = files
        try:
            snapshot = Snapshot(read_at, files, self.settings.bundle(), read_sources(self.settings.policies))
            candidate = self.settings.build(snapshot)
        except RegokiteError as exc:
            # the frames' locals go now, on this thread, cycles through the exception included
            traceback.clear_frames(exc.__traceback__)
            return str(exc), None
        except OSError as exc:  # a writer replacing files (`regokite gatekeeper` removes one per object)
            traceback.clear_frames(exc.__traceback__)
            log.info("a policy file went while read; reading them again", extra={"error": str(exc)})
            self._policies = None
            return None, None
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
