"""What `regokite admission` serves with (`AdmissionSettings`, from its flags), and its policy files as read
at one moment (`Snapshot`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from regokite.admission.limits import ConnectionLimits
from regokite.admission.policies import PolicySet, build_policy_set
from regokite.bundle import Bundle, fingerprint
from regokite.bundles.served import ServedBundles
from regokite.clusterdata.store import ResourceRef
from regokite.engine import EngineSettings
from regokite.gatekeeper.constraints import GatekeeperSources, read_sources
from regokite.gatekeeper.exempt import Exemptions
from regokite.sources.applied import SourceChecks

log = logging.getLogger("regokite.admission")


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
    shutdown_delay: float = 0.0  # Gatekeeper's --shutdown-delay: serve this long after SIGTERM, then stop
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
    mutation_annotations: bool = False  # Gatekeeper's --mutation-annotations
    emit_admission_events: bool = False  # Gatekeeper's --emit-admission-events
    events_namespace: str = "gatekeeper-system"  # where those Events go (Gatekeeper's own namespace)
    events_involved_namespace: bool = False  # --admission-events-involved-namespace: the resource's instead
    # set by `serve`: where the feeder process serves the replica (Unix socket, key); None: no credentials
    replica_feed: tuple[str, bytes] | None = None
    bundles: ServedBundles = field(default_factory=ServedBundles)  # --bundle, --config-file
    source_checks: SourceChecks | None = None  # what /v1/admitsource checks (ConfigMaps, controller definitions)

    def read(self) -> Snapshot:
        """The policy files as they are now (the fingerprint taken first, so a change while reading shows next time)."""
        read_at, files = time.monotonic(), fingerprint(self.watched())
        return Snapshot(read_at, files, self.bundle(), read_sources(self.policies))

    def watched(self) -> list[str]:
        """The files a reload looks at: policy directories, local bundles, the active downloaded bundles."""
        return [*self.policies, *self.bundles.watched()]

    def bundle(self) -> Bundle:
        return self.bundles.served(self.engine.load(self.policies) if self.policies or not self.bundles else None)

    def build(self, snapshot: Snapshot) -> PolicySet:
        """The policy set of a snapshot; Gatekeeper templates that did not load are logged (their
        constraints then refuse what they match) and the rest serve."""
        policy_set = build_policy_set(
            snapshot.bundle,
            self.engine,
            source=self.policies,
            gatekeeper_sources=snapshot.gatekeeper,
            mutation_annotations=self.mutation_annotations,
            replicate_path=self.replicate_path,
        )
        for problem in policy_set.problems:
            log.error("gatekeeper resource not loaded", extra={"error": problem})
        return policy_set.without_cluster_data() if self.local else policy_set

    @property
    def mode(self) -> str:
        return "local" if self.local else "cluster"

    def tls_files(self) -> list[str | None]:
        return [self.tls_cert, self.tls_key]


@dataclass(frozen=True)
class Snapshot:
    """Policy files read at `read_at` (CLOCK_MONOTONIC, the same in every process)."""

    read_at: float
    fingerprint: tuple
    bundle: Bundle
    gatekeeper: GatekeeperSources = field(default_factory=GatekeeperSources)  # templates, constraints beside it

    def read_on_the_wall_clock(self) -> float:
        """When it was read, as time.time() (to compare with files' mtimes: /readyz's reload.files_read_at)."""
        return time.time() - (time.monotonic() - self.read_at)
