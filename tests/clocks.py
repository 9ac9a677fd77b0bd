"""A clock a test moves by hand, for code that takes `clock=` (leader election, shards, the watchdog)."""

from __future__ import annotations


class ManualClock:
    """Reads `now`; a test adds to it. No wall time passes between two readings unless the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
