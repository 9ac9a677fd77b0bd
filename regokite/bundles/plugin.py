"""The bundle plugin, as OPA's (plugins/bundle, plugins/status): download, verify, activate, persist, report.

Each configured bundle is polled on its own thread (`download`). A new
revision is read and verified (`archive`), combined with the other active
bundles (their roots may not overlap) and handed to `check`, which builds
what the server would serve from them and raises when it does not load;
only then is it activated: written whole (one rename) into the store the
serving workers read, which swap it in between reviews. A bundle that fails
anywhere leaves the last good one active and says why in its status.
`persist: true` also keeps the last activated archive under
`<persistence_directory>/bundles/<name>/bundle.tar.gz`; at start it is
verified and activated before the first download, so a restart with the
service down serves it. Status is OPA's status API shape, written beside
the store for /readyz, posted to the `status` service, and in metrics.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from regokite import __version__
from regokite.bundles.archive import LoadedBundle, combine, read_archive
from regokite.bundles.config import BundleSource, OpaConfig
from regokite.bundles.download import DownloadError, Reply, fetch, next_delay, open_url
from regokite.bundles.oci import fetch_oci
from regokite.errors import RegokiteError, release_frames
from regokite.ops import bundle_metrics as metrics

log = logging.getLogger("regokite.bundles")

STATUS_FILE = "status.json"
ARCHIVES = "bundles"  # below the store: one archive per active bundle, all the workers read


def store_archive(store: Path, name: str) -> Path:
    return store / ARCHIVES / f"{urllib.parse.quote(name, safe='')}.tar.gz"


def read_store(store: Path, names: Sequence[str], *, v0_compatible: bool = False) -> list[LoadedBundle]:
    """The active bundles (verified when activated), as the serving workers load them."""
    found = []
    for name in names:
        path = store_archive(store, name)
        if path.is_file():
            found.append(read_archive(name, path.read_bytes(), v0_compatible=v0_compatible, verified=True))
    return found


def read_status(store: Path) -> dict[str, Any] | None:
    try:
        return json.loads((store / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None


def _rfc3339(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


class NotActivated(RegokiteError):
    """A bundle read and verified that the served set refuses (its roots overlap another's, it does not
    load). As OPA, its poller waits the polling delay, not a failed download's backoff: the bundle comes
    again on the next poll (asked with the last good one's ETag), and is checked again."""


@dataclass
class BundleStatus:
    """One bundle's status, with OPA's field names (status API, `bundles.<name>`)."""

    name: str
    active_revision: str = ""
    last_request: float | None = None
    last_successful_request: float | None = None
    last_successful_download: float | None = None
    last_successful_activation: float | None = None
    code: str = ""
    message: str = ""
    errors: list[str] = field(default_factory=list)
    http_code: int | None = None
    size: int = 0

    def failed(self, error: Exception, http_code: int | None = None) -> None:
        self.code, self.message, self.errors, self.http_code = "bundle_error", str(error), [str(error)], http_code

    def succeeded(self) -> None:
        self.code, self.message, self.errors, self.http_code = "", "", [], None

    def as_opa(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"name": self.name, "active_revision": self.active_revision, "type": "snapshot"}
        for key in (
            "last_request",
            "last_successful_request",
            "last_successful_download",
            "last_successful_activation",
        ):
            if getattr(self, key) is not None:
                shown[key] = _rfc3339(getattr(self, key))
        if self.code:
            shown.update(code=self.code, message=self.message, errors=self.errors)
            if self.http_code is not None:
                shown["http_code"] = self.http_code
        if self.size:
            shown["size"] = self.size
        return shown


class BundlePlugin:
    """Keeps the configured bundles active in `store`; `check(bundles)` raises a RegokiteError when the
    set they make would not load."""

    def __init__(
        self,
        config: OpaConfig,
        store: Path,
        check: Callable[[list[LoadedBundle]], None],
        *,
        v0_compatible: bool = False,
        instance_id: str | None = None,
    ) -> None:
        self.config, self.store, self.check, self.v0_compatible = config, store, check, v0_compatible
        self.instance_id = instance_id or str(uuid.uuid4())
        (store / ARCHIVES).mkdir(parents=True, exist_ok=True)
        self.active: dict[str, LoadedBundle] = {}
        self.status = {name: BundleStatus(name) for name in config.bundles}
        self._etags: dict[str, str | None] = {}
        self._long_polling: dict[str, bool] = {}
        self._lock = threading.Lock()  # activations one at a time: each checks the set the others make

    @property
    def sources(self) -> Mapping[str, BundleSource]:
        return self.config.bundles

    def persisted_path(self, name: str) -> Path:
        """OPA's place for a persisted bundle."""
        directory = Path(self.config.persistence_directory) / "bundles" / urllib.parse.quote(name, safe="")
        return directory / "bundle.tar.gz"

    def start_from_disk(self) -> None:
        """Activate what is already in the store (a restarted downloader) or persisted, verified again."""
        for name, source in self.sources.items():
            stored = store_archive(self.store, name)
            for path in (stored, self.persisted_path(name) if source.persist else None):
                if path is None or not path.is_file():
                    continue
                try:
                    self._activate(name, path.read_bytes(), time.time(), etag=None)
                except RegokiteError as exc:
                    release_frames(exc)
                    log.error(
                        "bundle on disk not activated", extra={"bundle": name, "path": str(path), "error": str(exc)}
                    )
                    continue
                log.info("bundle activated from disk", extra={"bundle": name, "path": str(path)})
                break
        self.report()

    def poll(self, name: str, failures: int = 0) -> float:
        """One request for bundle `name` and what follows from it; the delay to the next request."""
        source, status = self.sources[name], self.status[name]
        service = self.config.service(source.service)
        status.last_request = time.time()
        metrics.last_request.labels(name).set(status.last_request)
        try:
            if service.type == "oci":
                reply = fetch_oci(service, source, self._etags.get(name))
            else:
                reply = fetch(service, source, self._etags.get(name), long_poll=self._long_polling.get(name, False))
        except RegokiteError as exc:  # the service's answer, or its credentials (a token file gone)
            self._failed(name, exc, exc.code if isinstance(exc, DownloadError) else None)
            return next_delay(source, failures + 1, False)
        status.last_successful_request = time.time()
        self._long_polling[name] = reply.long_polling
        try:
            self._received(name, reply)
        except RegokiteError as exc:
            release_frames(exc)  # engines `check` built are dropped here, on the thread that built them
            self._failed(name, exc)
            if isinstance(exc, NotActivated):  # OPA: downloaded and verified, then refused: the polling delay
                return next_delay(source, 0, reply.long_polling)
            return next_delay(source, failures + 1, False)
        return next_delay(source, 0, reply.long_polling)

    def _received(self, name: str, reply: Reply) -> None:
        status = self.status[name]
        if reply.blob is None:  # 304: the active revision stays
            if status.code:
                status.succeeded()
                self.report()
            return
        status.last_successful_download = time.time()
        metrics.last_success_download.labels(name).set(status.last_successful_download)
        self._activate(name, reply.blob, status.last_successful_download, etag=reply.etag)
        if self.sources[name].persist:
            _write_atomically(self.persisted_path(name), reply.blob)
        self.report()

    def _activate(self, name: str, blob: bytes, downloaded: float, etag: str | None) -> None:
        source = self.sources[name]
        loaded = read_archive(
            name,
            blob,
            signing=source.signing,
            keys=self.config.keys,
            v0_compatible=self.v0_compatible,
            size_limit=source.size_limit_bytes,
        )
        with self._lock:
            candidate = {**self.active, name: loaded}
            bundles = [candidate[n] for n in self.sources if n in candidate]
            try:
                combine(bundles)  # roots that overlap another bundle's: refused before the check builds anything
                self.check(bundles)
            except RegokiteError as exc:
                raise NotActivated(str(exc)) from exc
            _write_atomically(store_archive(self.store, name), blob)
            previous = self.active[name].manifest.revision if name in self.active else None
            self.active[name] = loaded
        status = self.status[name]
        status.active_revision, status.size = loaded.manifest.revision, len(blob)
        status.last_successful_activation = time.time()
        status.last_successful_download = status.last_successful_download or downloaded
        status.succeeded()
        self._etags[name] = etag
        metrics.loaded.labels(name).inc()
        metrics.last_success_activation.labels(name).set(status.last_successful_activation)
        if previous is not None and previous != loaded.manifest.revision:
            metrics.active_revision.labels(name, previous).set(0)
        metrics.active_revision.labels(name, loaded.manifest.revision).set(1)
        log.info("bundle activated", extra={"bundle": name, "revision": loaded.manifest.revision})

    def publish_metrics(self) -> None:
        """The gauges of this process from the status (a new downloader process: the last one's went with it)."""
        for name, status in self.status.items():
            for gauge, at in (
                (metrics.last_request, status.last_request),
                (metrics.last_success_download, status.last_successful_download),
                (metrics.last_success_activation, status.last_successful_activation),
            ):
                if at is not None:
                    gauge.labels(name).set(at)
            if name in self.active:
                metrics.active_revision.labels(name, status.active_revision).set(1)

    def _failed(self, name: str, error: Exception, http_code: int | None = None) -> None:
        self.status[name].failed(error, http_code)
        metrics.failed_load.labels(name).inc()
        log.error(
            "bundle not activated; the last good one keeps serving",
            extra={"bundle": name, "error": str(error), "active_revision": self.status[name].active_revision},
        )
        self.report()

    def ready(self) -> bool:
        return all(name in self.active for name in self.sources)

    def document(self) -> dict[str, Any]:
        """OPA's status API document."""
        labels = {"id": self.instance_id, "version": f"regokite-{__version__}", **self.config.labels}
        bundles = {name: status.as_opa() for name, status in self.status.items()}
        state = "OK" if self.ready() and not any(s.code for s in self.status.values()) else "NOT_READY"
        return {"labels": labels, "bundles": bundles, "plugins": {"bundle": {"state": state}}}

    def report(self) -> None:
        """The status where it is read: beside the store (/readyz), the console, the status service."""
        document = self.document()
        _write_atomically(self.store / STATUS_FILE, json.dumps(document).encode())
        status = self.config.status
        if status is None:
            return
        if status.console:
            log.info("status update", extra={"status": document})
        if status.service is not None:
            self._post_status(status.service, status.partition_name, document)

    def _post_status(self, service_name: str, partition: str | None, document: dict[str, Any]) -> None:
        service = self.config.service(service_name)
        url = f"{service.url}/status" + (f"/{partition}" if partition else "")
        try:
            with open_url(service, url, {"Content-Type": "application/json"}, data=json.dumps(document).encode()):
                pass
        except (OSError, ValueError, RegokiteError) as exc:
            log.warning("status update not delivered", extra={"url": url, "error": str(exc)})

    def activate_all(self, timeout: float | None = None) -> None:
        """Poll every bundle not yet active until all are (start-up: nothing decides before its bundles)."""
        started, failures = time.monotonic(), dict.fromkeys(self.sources, 0)
        while not self.ready():
            delays, before = [], len(self.active)
            for name in self.sources:
                if name not in self.active:
                    delay = self.poll(name, failures[name])
                    failures[name] = 0 if name in self.active else failures[name] + 1
                    delays.append(delay)
            if self.ready():
                return
            if timeout is not None and time.monotonic() - started > timeout:
                missing = sorted(set(self.sources) - set(self.active))
                raise RegokiteError(f"bundles not activated within {timeout:g} s: {', '.join(missing)}")
            if len(self.active) == before:  # one activated: the others may load beside it now (ordering)
                time.sleep(min(delays, default=0.1))

    def run(self, stop: threading.Event) -> None:
        """Poll each bundle on a thread of its own until `stop` is set."""
        threads = [threading.Thread(target=self._follow, args=(n, stop), daemon=True) for n in self.sources]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _follow(self, name: str, stop: threading.Event) -> None:
        failures = 0
        source = self.sources[name]
        delay = next_delay(source, 0, self._long_polling.get(name, False))
        while not stop.wait(delay):
            try:
                delay = self.poll(name, failures)
            except Exception as exc:  # a bug must not end this bundle's polling for good, silently
                log.exception("polling a bundle failed", extra={"bundle": name})
                self._failed(name, exc)
                delay = next_delay(source, failures + 1, False)
            failures = 0 if not self.status[name].code else failures + 1


def _write_atomically(path: Path, blob: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
    partial.write_bytes(blob)
    os.replace(partial, path)
