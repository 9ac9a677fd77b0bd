"""Waiting on a condition in tests: poll until it holds, within a bound generous enough for a loaded
2-core CI machine. A test waits on what it means (an event, a count, a state), never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable

GENEROUS = 10.0  # seconds: far beyond what any condition here needs on an idle machine


def wait_until(
    condition: Callable[[], object], timeout: float = GENEROUS, what: str = "condition", every: float = 0.05
) -> None:
    """Return as soon as `condition()` is true (asked `every` seconds); fail the test naming `what` if it is
    not within `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(every)
