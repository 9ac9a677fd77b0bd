"""Find admission workers stuck in one evaluation or over their memory limit, so the supervisor can replace them.

regorus holds the GIL while it evaluates and has no cancellation, so a policy
that never finishes (a cross product over a large input, say) would wedge its
worker, and every review queued behind it, for good. Each worker notes in
memory shared with the supervisor since when it has been deciding a review
and which policy it is evaluating; the supervisor kills a worker that stays
on one review past the limit and starts a fresh one. The API server sees that
call fail and applies the webhook's failurePolicy, as on its own timeout.

Memory the same way: the supervisor reads each worker's resident size and
kills one past the limit, naming the policy it was evaluating. Not an
rlimit: regorus's allocator (mimalloc) reserves 1 GiB of address space at
import, which RLIMIT_AS and RLIMIT_DATA count though it is never touched,
and an allocation failing under an rlimit aborts the process with no word
of why.
"""

from __future__ import annotations

import mmap
import os
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

    def policy(self, slot: int) -> str | None:
        """The policy a worker is evaluating now, or None when it is between reviews."""
        since, name = _SLOT.unpack_from(self._memory, _SLOT.size * slot)
        return name.rstrip(b"\0").decode(errors="replace") if since else None

    def overdue(self) -> list[Overdue]:
        now = time.monotonic()
        found = []
        for slot in range(self._slots):
            since, name = _SLOT.unpack_from(self._memory, _SLOT.size * slot)
            if since and now - since > self.limit:
                found.append(Overdue(slot, name.rstrip(b"\0").decode(errors="replace"), now - since))
        return found


_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes(pid: int) -> int | None:
    """A process's resident memory, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None
