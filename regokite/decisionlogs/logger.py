"""The decision logger of one worker: a bounded buffer a review appends to without waiting, and a thread
that applies the drop and mask decisions, writes the console and uploads gzip'd batches.

`record` never blocks and never fails a review: a full buffer drops its
oldest events and counts them (`regokite_decision_logs_dropped{reason="buffer"}`),
as OPA's buffers: `buffer_type: event` holds at most `buffer_size_limit_events`
events, `size` (OPA's default) at most `buffer_size_limit_bytes` bytes of the
events' JSON (no limit unless set, as OPA; only then is an event encoded in
the review, to measure it). The thread wakes every min..max delay (OPA's
`reporting` delays, picked at random between them), or as soon as a chunk
fills with `trigger: immediate`; a batch is a JSON array of events, gzip'd,
at most `upload_size_limit_bytes` (an event alone over it is dropped and
counted); a failed upload keeps its events at the front of the buffer and is
retried after an exponential backoff (from min_delay, doubling, at most
max_delay). `close` uploads what is left, once.
"""

from __future__ import annotations

import collections
import gzip
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from regokite.bundle import Bundle
from regokite.bundles.download import open_url
from regokite.decisionlogs.config import DecisionLogConfig
from regokite.decisionlogs.events import masked
from regokite.engine import UNDEFINED, Engine, open_engine
from regokite.errors import EvaluationError, PolicyLoadError
from regokite.ops import decision_log_metrics as metrics

log = logging.getLogger("regokite.decisionlogs")
console = logging.getLogger("regokite.decisions")  # one line per decision, as OPA's console logger


class DecisionLogger:
    """Buffer and report the decisions of one process."""

    def __init__(
        self,
        config: DecisionLogConfig,
        engine: Callable[[], Engine | None],
        status: Callable[[], dict[str, Any] | None] | None = None,
    ) -> None:
        """`engine`: the engine serving now (its `system.log.drop` / `system.log.mask`), asked per batch;
        `status`: the bundle plugin's status document, for each event's bundle revisions."""
        self.config = config
        self._engine = engine
        self._status = status
        self._revisions: tuple[float, dict[str, str]] = (0.0, {})
        self._buffer = _Buffer(config)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._failures = 0
        self._small: tuple[Engine, Engine | None] | None = None  # (the engine served, its decisions' engine)
        self._judged_ids: set[str] = set()  # requeued after a failed upload: dropped/masked already
        self.dropped: collections.Counter[str] = collections.Counter()
        self._thread = threading.Thread(target=self._run, name="decision-logs", daemon=True)
        self._thread.start()

    def revisions(self) -> dict[str, str]:
        """The active revision of each bundle (read from the status at most once a second)."""
        read_at, found = self._revisions
        if self._status is None or time.monotonic() - read_at < 1.0:
            return found
        document = self._status() or {}
        found = {n: b.get("active_revision", "") for n, b in (document.get("bundles") or {}).items()}
        self._revisions = (time.monotonic(), found)
        return found

    def record(self, entry: dict[str, Any]) -> None:
        """Buffer one event; the oldest goes (counted) when the buffer is full. Never blocks on I/O."""
        with self._lock:
            dropped = self._buffer.push(entry)
            wake = self.config.immediate and len(self._buffer) >= self._chunk_events()
        if dropped:
            self._drop("buffer", dropped)
        if wake:
            self._wake.set()

    def close(self) -> None:
        """Report what is buffered (once) and stop the thread."""
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _drop(self, reason: str, count: int = 1) -> None:
        self.dropped[reason] += count
        metrics.dropped.labels(reason).inc(count)

    def _chunk_events(self) -> int:
        return max(1, self.config.upload_size_limit_bytes // 512)  # about a chunk's worth of small events

    def _delay(self) -> float:
        low, high = self.config.min_delay_seconds, self.config.max_delay_seconds
        if self._failures:
            return min(high, low * 2 ** (self._failures - 1))
        return random.uniform(low, high)

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self._delay())
            self._wake.clear()
            try:
                self._flush()
            except Exception:  # the logger must go on: a review never waits on it
                log.exception("decision log flush failed")
        self._flush()

    def _flush(self) -> None:
        with self._lock:
            taken = self._buffer.take()
        if not taken:
            return
        ready = self._judged(taken)
        if self.config.console:
            for entry in ready:
                console.info("Decision Log", extra={"decision": entry})
        if self.config.service is None:
            return
        for start, chunk in self._chunks(ready):
            if not self._upload(chunk):
                self._requeue(ready[start:])
                return
        self._failures = 0

    def _judged(self, taken: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The events the drop decision keeps, masked."""
        engine = self._decisions_engine(self._engine())
        if engine is None:
            return taken
        kept = []
        for entry in taken:
            if entry["decision_id"] in self._judged_ids:
                self._judged_ids.discard(entry["decision_id"])
                kept.append(entry)
                continue
            try:
                if self._answer(engine, self.config.drop_decision, entry) is True:
                    self._drop("policy")
                    continue
                rules = self._answer(engine, self.config.mask_decision, entry)
            except EvaluationError as exc:  # OPA logs the error and does not log the decision unmasked
                log.error("decision log drop/mask decision failed", extra={"error": str(exc)})
                self._drop("error")
                continue
            kept.append(masked(entry, rules if isinstance(rules, list) else []))
        return kept

    def _decisions_engine(self, serving: Engine | None) -> Engine | None:
        """An engine of the served modules of the drop and mask decisions' packages alone (None: there are
        none): built once per engine served, in this thread. Compiling and querying the whole policy set
        here held the GIL long enough to show in the reviews' latency (bench.admission_load --mask); where
        those modules need others (an import), the whole set answers."""
        if serving is None:
            return None
        built = self._small
        if built is not None and built[0] is serving:
            return built[1]
        bundle = getattr(serving, "bundle", None)
        small: Engine | None = serving
        if bundle is not None:
            wanted = {path.rpartition("/")[0].replace("/", ".") for path in (self.config.drop_decision,
                                                                              self.config.mask_decision)}  # fmt: skip
            modules = tuple(m for m in bundle.modules if m.package in wanted)
            small = None
            if modules:
                try:
                    small = open_engine(Bundle(modules, bundle.data, bundle.roots))
                except PolicyLoadError:
                    small = serving
        self._small = (serving, small)
        return small

    @staticmethod
    def _answer(engine: Engine, path: str, entry: dict[str, Any]) -> Any:
        value = engine.evaluate("data." + path.replace("/", "."), entry)
        return None if value is UNDEFINED else value

    def _chunks(self, ready: list[dict[str, Any]]) -> list[tuple[int, list[bytes]]]:
        """(index of the first event, the events' JSON) of each batch within the upload size limit, gzip'd."""
        out: list[tuple[int, list[bytes]]] = []
        encoded = [json.dumps(e, separators=(",", ":")).encode() for e in ready]
        self._split(encoded, 0, out)
        return out

    def _split(self, encoded: list[bytes], offset: int, out: list[tuple[int, list[bytes]]]) -> None:
        if not encoded:
            return
        if len(_gzip(encoded)) <= self.config.upload_size_limit_bytes:
            out.append((offset, encoded))
        elif len(encoded) == 1:
            self._drop("too_large")
            log.error("decision log event over the upload size limit dropped")
        else:
            half = len(encoded) // 2
            self._split(encoded[:half], offset, out)
            self._split(encoded[half:], offset + half, out)

    def _upload(self, chunk: list[bytes]) -> bool:
        service = self.config.service
        assert service is not None
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        try:
            with open_url(service, service.url + self.config.resource, headers, data=_gzip(chunk)) as reply:
                reply.read()
        except Exception as exc:  # refused, unreachable, 5xx: retried with backoff
            self._failures += 1
            metrics.upload_failures.inc()
            log.warning("decision log upload failed", extra={"error": str(exc), "events": len(chunk)})
            return False
        metrics.uploaded.inc(len(chunk))
        return True

    def _requeue(self, events: list[dict[str, Any]]) -> None:
        """Put what was not uploaded back in front of what arrived since, within the bound (oldest dropped)."""
        with self._lock:
            keep = self._buffer.requeue(events)
            self._judged_ids.update(e["decision_id"] for e in keep)
        if len(events) > len(keep):
            self._drop("buffer", len(events) - len(keep))


class _Buffer:
    """The events not reported yet, bounded as the configured buffer type bounds them (the caller locks)."""

    def __init__(self, config: DecisionLogConfig) -> None:
        self._events: collections.deque[dict[str, Any]] = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()  # each event's JSON bytes (size buffer, limited)
        self._bytes = 0
        self._most_events = config.buffer_size_limit_events if config.buffer_type == "event" else 0
        self._most_bytes = config.buffer_size_limit_bytes if config.buffer_type == "size" else 0

    def __len__(self) -> int:
        return len(self._events)

    def push(self, entry: dict[str, Any]) -> int:
        """Add one event; how many of the oldest went to make room."""
        size = _size(entry) if self._most_bytes else 0
        dropped = 0
        while self._events and self._full(size):
            self._pop()
            dropped += 1
        self._events.append(entry)
        self._sizes.append(size)
        self._bytes += size
        return dropped

    def take(self) -> list[dict[str, Any]]:
        taken = list(self._events)
        self._events.clear()
        self._sizes.clear()
        self._bytes = 0
        return taken

    def requeue(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Put `events` (older than those buffered) back in front, the newest of them that fit; those kept."""
        keep: list[dict[str, Any]] = []
        for entry in reversed(events):
            size = _size(entry) if self._most_bytes else 0
            if self._full(size):
                break
            self._events.appendleft(entry)
            self._sizes.appendleft(size)
            self._bytes += size
            keep.append(entry)
        return keep[::-1]

    def _full(self, size: int) -> bool:
        """Whether one more event of `size` bytes would pass the bound."""
        if self._most_events:
            return len(self._events) >= self._most_events
        return bool(self._most_bytes) and self._bytes + size > self._most_bytes

    def _pop(self) -> None:
        self._events.popleft()
        self._bytes -= self._sizes.popleft()


def _size(entry: dict[str, Any]) -> int:
    return len(json.dumps(entry, separators=(",", ":")).encode())


def _gzip(encoded: list[bytes]) -> bytes:
    return gzip.compress(b"[" + b",".join(encoded) + b"]", compresslevel=6)
