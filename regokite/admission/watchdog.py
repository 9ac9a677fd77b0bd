"""Find admission workers stuck in one evaluation, so the supervisor can replace them.

regorus holds the GIL while it evaluates and has no cancellation, so a policy
that never finishes (a cross product over a large input, say) would wedge its
worker, and every review queued behind it, for good. Each worker notes in
memory shared with the supervisor since when it has been deciding a review
and which policy it is evaluating; the supervisor kills a worker that stays
on one review past the limit and starts a fresh one. The API server sees that
call fail and applies the webhook's failurePolicy, as on its own timeout.
"""

from __future__ import annotations

import mmap
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

_SLOT = struct.Struct("d96s")  # busy since (CLOCK_MONOTONIC, shared by all processes; 0 = idle), policy name


@dataclass(frozen=True)
class Overdue:
    slot: int
    policy: str
    seconds: float


class Watchdog:
    """One slot per worker, in an anonymous shared mapping made before the workers are forked."""

    def __init__(self, slots: int, limit: float) -> None:
        self.limit = limit
        self._slots = slots
        self._memory = mmap.mmap(-1, _SLOT.size * max(1, slots))

    def tracker(self, slot: int) -> Callable[[str | None], None]:
        """What a worker calls with a policy's name before evaluating it, and with None when the review is decided."""
        offset = _SLOT.size * slot
        memory = self._memory
        busy_since = 0.0

        def note(policy: str | None) -> None:
            nonlocal busy_since
            if policy is None:
                busy_since = 0.0
            elif busy_since == 0.0:
                busy_since = time.monotonic()
            _SLOT.pack_into(memory, offset, busy_since, (policy or "").encode())  # "s" truncates

        return note

    def clear(self, slot: int) -> None:
        _SLOT.pack_into(self._memory, _SLOT.size * slot, 0.0, b"")

    def overdue(self) -> list[Overdue]:
        now = time.monotonic()
        found = []
        for slot in range(self._slots):
            since, name = _SLOT.unpack_from(self._memory, _SLOT.size * slot)
            if since and now - since > self.limit:
                found.append(Overdue(slot, name.rstrip(b"\0").decode(errors="replace"), now - since))
        return found
