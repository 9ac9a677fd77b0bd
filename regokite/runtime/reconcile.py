"""What the controller runtime asks of a reconciler, and what a sync asks back (controller-runtime's
`reconcile` package): `reconcile(namespace, name) -> Result`.

A failing sync raises; the worker backs the key off (runtime.sync_workers). A sync that succeeds returns a
`Result`: nothing more to do (`Result()`), or to be synced again after a delay (a hook's
`resyncAfterSeconds`), which the worker turns into a delayed add to its work queue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Result:
    """A successful sync's request to its work queue; `Result()` asks for nothing."""

    requeue_after: float | None = None  # seconds until this object is synced again; None or 0: not

    def __post_init__(self) -> None:
        after = self.requeue_after
        if after is not None and not (isinstance(after, int | float) and math.isfinite(after) and after >= 0):
            raise ValueError(f"requeue_after must be a finite number of seconds >= 0 or None, got {after!r}")


class Reconciler(Protocol):
    name: str

    def reconcile(self, namespace: str, name: str) -> Result: ...
