"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

* A candidate reads the Lease every `retry_period` (jittered). It takes the
  Lease when nobody holds it (no Lease, an empty `holderIdentity` after a
  release) or when the record has not changed for `leaseDurationSeconds` as
  measured on *this* machine's clock since it first saw that record (no clock
  agreement between replicas is assumed). Every write carries the
  resourceVersion that was read, so two candidates never both win: the API
  server's optimistic concurrency is the only arbiter.
* The leader renews every `retry_period`; when no renewal has succeeded for
  `renew_deadline` (shorter than the lease duration), it stops acting at
  once: `may_act()` turns false on the clock, even if the renewing thread is
  stuck in a request, before any other replica can have taken over.
* `release()` on clean shutdown writes an empty holder and a 1 s lease (as
  client-go's ReleaseOnCancel), so a standby takes over on its next retry.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from regokite.errors import RegokiteError
from regokite.kube.client import ApiError, KubeClient

log = logging.getLogger("regokite.leader")
JITTER = 1.2  # client-go's JitterFactor


def default_identity() -> str:
    """The pod name (`POD_NAME`, from the downward API); off-cluster the hostname plus a unique suffix,
    so two processes on one machine never share an identity (as controller-runtime does)."""
    pod = os.environ.get("POD_NAME")
    if pod:
        return pod
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def default_namespace() -> str:
    ns = os.environ.get("POD_NAMESPACE")
    if ns:
        return ns
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def micro_time(now: dt.datetime | None = None) -> str:
    return (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaderSettings:
    """`--leader-elect` and friends; durations in seconds, client-go's defaults."""

    name: str = "regokite-controller"
    namespace: str | None = None
    identity: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def request_timeout(self) -> float:
        """Seconds one Lease request may take: at most the renew deadline, so a hung one cannot outlast it."""
        return max(1.0, min(self.renew_deadline, self.retry_period * 2))

    def resolved(self) -> LeaderSettings:
        """With the namespace and identity filled in from the pod, as client-go's callers do."""
        identity = self.identity or default_identity()
        if not identity:
            raise RegokiteError("leader election: the identity must not be empty")
        return replace(self, namespace=self.namespace or default_namespace(), identity=identity)

    def elector(self, kubeconfig: str | None) -> LeaderElector:
        # its own client (and connection pool): renewals never wait behind busy workers,
        # and the Lease is not subject to the leader-only write guard
        return LeaderElector(KubeClient(kubeconfig, pool_size=4), self)


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        settings: LeaderSettings,
        *,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if settings.lease_duration <= settings.renew_deadline:
            raise RegokiteError("leader election: the lease duration must be greater than the renew deadline")
        if settings.renew_deadline <= JITTER * settings.retry_period:
            raise RegokiteError(f"leader election: the renew deadline must exceed {JITTER} x the retry period")
        self.client = client
        self.settings = settings.resolved()
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.clock = clock
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{self.settings.namespace}/leases/{self.settings.name}"
        self._lock = threading.Lock()  # one Lease request at a time (renewal vs release)
        self._observed: dict[str, Any] | None = None  # the Lease object last read or written
        self._observed_at = 0.0  # our clock when the Lease's spec last changed
        self._renewed_at: float | None = None  # our clock when the last successful write was *sent*
        self._leading = False
        self.transitions = 0  # times this process became leader

    @property
    def lease(self) -> str:
        """namespace/name, for logs."""
        return f"{self.settings.namespace}/{self.settings.name}"

    @property
    def _lease_seconds(self) -> int:
        return max(1, math.ceil(self.settings.lease_duration))

    # -- state

    @property
    def holder(self) -> str:
        spec = (self._observed or {}).get("spec") or {}
        return spec.get("holderIdentity") or ""

    @property
    def knows_holder(self) -> bool:
        """True once the Lease has been read or written: until then `holder` would be a guess."""
        return self._observed is not None

    def is_leader(self) -> bool:
        return self._leading

    def may_act(self) -> bool:
        """True while leading and the last renewal is younger than the renew deadline."""
        renewed = self._renewed_at
        return self._leading and renewed is not None and self.clock() - renewed < self.settings.renew_deadline

    def describe(self) -> dict[str, Any]:
        return {
            "lease": self.lease,
            "identity": self.settings.identity,
            "leading": self.may_act(),
            "holder": self.holder,
        }

    # -- the loop

    def run(self, stop: threading.Event) -> None:
        """Campaign, lead, and campaign again after losing the lease, until `stop` is set."""
        while not stop.is_set():
            if not self._acquire(stop):
                return
            self._renew(stop)

    def _acquire(self, stop: threading.Event) -> bool:
        log.info("campaigning for leadership", extra={"lease": self.lease, "id": self.settings.identity})
        while not stop.is_set():
            if self.try_acquire_or_renew():
                self._set_leading(True)
                return True
            stop.wait(self.settings.retry_period * (1 + random.random() * JITTER))
        return False

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(self.settings.retry_period):
            renewed = False
            while not stop.is_set():
                if self.try_acquire_or_renew():
                    renewed = True
                    break
                if not self._leading or not self.may_act():
                    break
                stop.wait(min(self.settings.retry_period, 0.5))
            if stop.is_set():
                return
            if not renewed:
                self._set_leading(False, "could not renew the lease within the renew deadline")
                return

    def _set_leading(self, leading: bool, why: str = "") -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            self.transitions += 1
            log.info("became leader", extra={"lease": self.lease, "id": self.settings.identity})
            callback = self.on_started_leading
        else:
            log.warning(
                "lost leadership: stopped acting",
                extra={"lease": self.lease, "id": self.settings.identity, "why": why},
            )
            callback = self.on_stopped_leading
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("leader election callback failed")

    # -- one attempt

    def try_acquire_or_renew(self) -> bool:
        with self._lock:
            return self._try()

    def _try(self) -> bool:
        started = self.clock()
        now = micro_time()
        timeout = self.settings.request_timeout
        try:
            lease = self.client.request("GET", self.path, timeout=timeout)
        except ApiError as exc:
            if exc.status != 404:
                log.warning("could not read the lease", extra={"error": str(exc)[:300]})
                return self._check_lost("read failed")
            return self._create(now, started, timeout)
        except Exception as exc:  # connection refused, timeout
            log.warning("could not read the lease", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
            return self._check_lost("read failed")
        spec = lease.get("spec") or {}
        old_spec = (self._observed or {}).get("spec")
        if old_spec != spec or self._observed is None:
            self._observed_at = started
        self._observed = lease
        holder = spec.get("holderIdentity") or ""
        if holder != self.settings.identity:
            if self._leading:
                self._set_leading(False, f"the lease is now held by {holder or 'nobody'}")
            duration = spec.get("leaseDurationSeconds") or self.settings.lease_duration
            if holder and started - self._observed_at < duration:
                return False  # held, and still valid by our clock
        desired = {
            "holderIdentity": self.settings.identity,
            "leaseDurationSeconds": self._lease_seconds,
            "acquireTime": spec.get("acquireTime") if holder == self.settings.identity else now,
            "renewTime": now,
            "leaseTransitions": (spec.get("leaseTransitions") or 0) + (0 if holder == self.settings.identity else 1),
        }
        body = {**lease, "spec": desired}
        try:
            updated = self.client.request("PUT", self.path, body, timeout=timeout)
        except ApiError as exc:
            if exc.status != 409:
                log.warning("could not update the lease", extra={"error": str(exc)[:300]})
            return self._check_lost("update failed")
        except Exception as exc:
            log.warning("could not update the lease", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
            return self._check_lost("update failed")
        self._observe_own(updated, started)
        return True

    def _create(self, now: str, started: float, timeout: float) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.settings.name, "namespace": self.settings.namespace},
            "spec": {
                "holderIdentity": self.settings.identity,
                "leaseDurationSeconds": self._lease_seconds,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        try:
            created = self.client.request(
                "POST",
                f"/apis/coordination.k8s.io/v1/namespaces/{self.settings.namespace}/leases",
                body,
                timeout=timeout,
            )
        except Exception as exc:
            if not (isinstance(exc, ApiError) and exc.status == 409):
                log.warning("could not create the lease", extra={"error": str(exc)[:300]})
            return False
        self._observe_own(created, started)
        return True

    def _observe_own(self, lease: dict[str, Any], started: float) -> None:
        self._observed = lease
        self._observed_at = started
        self._renewed_at = started

    def _check_lost(self, why: str) -> bool:
        if self._leading and not self.may_act():
            self._set_leading(False, why)
        return False

    # -- release

    def release(self) -> bool:
        """Give the lease up now (clean shutdown); only when we hold it."""
        with self._lock:
            was_leading = self._leading
            if was_leading:
                self._set_leading(False, "released on shutdown")
            lease = self._observed
            if (
                not was_leading
                or lease is None
                or (lease.get("spec") or {}).get("holderIdentity") != self.settings.identity
            ):
                return False
            now = micro_time()
            spec = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            try:
                self._observed = self.client.request("PUT", self.path, {**lease, "spec": spec}, timeout=5)
            except Exception as exc:
                log.warning("could not release the lease", extra={"error": str(exc)[:300]})
                return False
            log.info("released the lease", extra={"lease": self.lease, "id": self.settings.identity})
            return True
