"""Events posted off the caller's thread: an admission answer never waits for the API server.

A bounded queue: past `limit` waiting Events, new ones are dropped and
counted in the log (a flood of violations must not grow memory or delay
reviews).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from typing import Any

from regokite.kube.actuator import Actuator

log = logging.getLogger("regokite.events")


class BackgroundEvents:
    def __init__(self, actuator: Actuator, limit: int = 1000) -> None:
        self._actuator = actuator
        self._queue: queue.Queue[Mapping[str, Any] | None] = queue.Queue(maxsize=limit)
        self._dropped = 0
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def __call__(self, body: Mapping[str, Any]) -> None:
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self._dropped += 1
            if self._dropped % 100 == 1:
                log.warning("events dropped: the API server is not keeping up", extra={"dropped": self._dropped})

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until every queued Event was posted (tests, and --once before exiting)."""
        done = threading.Event()
        self._queue.put({"_flush": done})  # type: ignore[dict-item]
        done.wait(timeout)

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            if "_flush" in body:
                body["_flush"].set()
                continue
            self._actuator.record_event(body)
