"""One log line when something starts failing and one when it recovers, not one per retry.

An API server away for 20 s makes every retry loop fail hundreds of times;
operators need to know that it started, why, and when it ended (with how
many attempts failed meanwhile), which is what `Outage` logs.
"""

from __future__ import annotations

import logging
import time
from typing import Any


class Outage:
    """The state of one retried operation (`what`): failing since when, how many failures."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self.log, self.what = log, what
        self.since: float | None = None
        self.failures = 0

    def failed(self, exc: BaseException, reason: str, **extra: Any) -> bool:
        """Count a failure; logs (and returns True) only for the first of an outage."""
        self.failures += 1
        if self.since is not None:
            return False
        self.since = time.monotonic()
        error = f"{type(exc).__name__}: {exc}"[:500]
        self.log.error(f"{self.what} failing; retrying", extra={"reason": reason, "error": error, **extra})
        return True

    def recovered(self, **extra: Any) -> None:
        """Log the end of an outage (nothing when there was none)."""
        if self.since is None:
            return
        seconds = round(time.monotonic() - self.since, 1)
        self.log.info(f"{self.what} recovered", extra={"failures": self.failures, "seconds": seconds, **extra})
        self.since, self.failures = None, 0
