"""Find worker processes stuck in one evaluation, so their supervisor can replace them.

regorus holds the GIL while it evaluates and has no cancellation, so a policy
that never finishes (a cross product over a large input, say) would wedge its
process for good. Every evaluation therefore runs in a worker process, and
each worker's slot in this table says since when it has been busy, for how
long it may be, and on what (a policy or hook package); a supervisor scans
`overdue()` and kills the worker of a slot past its limit, then starts a
fresh one.

The table lives in an anonymous shared mapping, so it can be written on
either side of a fork: the admission server's workers note each review
themselves (the supervisor never sees the requests), while the controller's
hook workers are noted by the thread that hands them a call.

Memory the same way (admission): the supervisor reads each worker's
resident size and kills one past the limit, naming the policy it was
evaluating. Not an rlimit: regorus's allocator (mimalloc) reserves 1 GiB of
address space at import, which RLIMIT_AS and RLIMIT_DATA count though it is
never touched, and an allocation failing under an rlimit aborts the process
with no word of why.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import signal
import struct
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass

# busy since (CLOCK_MONOTONIC, shared by all processes; 0 = idle), this call's limit (0: the default), name
_SLOT = struct.Struct("dd96s")


@dataclass(frozen=True)
class Overdue:
    slot: int
    policy: str
    seconds: float
    limit: float


class Watchdog:
    """One slot per worker, in an anonymous shared mapping made before any worker is forked."""

    def __init__(self, slots: int, limit: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        """`clock` must be CLOCK_MONOTONIC (shared by every process) but in tests, which pass their own."""
        self.limit = limit
        self.slots = max(1, slots)
        self.clock = clock
        self._memory = mmap.mmap(-1, _SLOT.size * self.slots)

    def tracker(self, slot: int) -> Callable[..., None]:
        """`note(policy, limit=None)` before evaluating a policy, `note(None)` when the call is done.
        The clock starts at the first note of a call (a review spans several policies); `limit`
        overrides the watchdog's own for this call (a hook's timeout)."""
        offset = _SLOT.size * slot
        memory = self._memory
        clock = self.clock
        busy_since = 0.0

        def note(policy: str | None, limit: float | None = None) -> None:
            nonlocal busy_since
            if policy is None:
                busy_since = 0.0
            elif busy_since == 0.0:
                busy_since = clock()
            _SLOT.pack_into(memory, offset, busy_since, limit or 0.0, (policy or "").encode())  # "s" truncates

        return note

    def clear(self, slot: int) -> None:
        _SLOT.pack_into(self._memory, _SLOT.size * slot, 0.0, 0.0, b"")

    def policy(self, slot: int) -> str | None:
        """The policy a worker is evaluating now, or None when it is between calls."""
        since, _, name = _SLOT.unpack_from(self._memory, _SLOT.size * slot)
        return name.rstrip(b"\0").decode(errors="replace") if since else None

    def overdue(self) -> list[Overdue]:
        now = self.clock()
        found = []
        for slot in range(self.slots):
            since, limit, name = _SLOT.unpack_from(self._memory, _SLOT.size * slot)
            limit = limit or self.limit
            if since and now - since > limit:
                found.append(Overdue(slot, name.rstrip(b"\0").decode(errors="replace"), now - since, limit))
        return found

    def kill_overdue(
        self,
        pids: Mapping[int, int],
        spared: Container[int],
        message: str,
        log: logging.Logger,
        before: Callable[[int, Overdue], None] | None = None,
    ) -> list[tuple[int, Overdue]]:
        """SIGKILL the worker (`pids`: slot -> pid) of every overdue slot, but those in `spared` (killed
        already), each with an error line (`message`, with what it was evaluating); the supervisor starts another.
        `before(pid, overdue)` runs before the signal, so whoever sees the worker die knows why."""
        killed = []
        for stuck in self.overdue():
            pid = pids.get(stuck.slot)
            if pid is None or pid in spared:
                continue
            log.error(
                message,
                extra={"pid": pid, "policy": stuck.policy, "seconds": round(stuck.seconds, 3), "limit": stuck.limit},
            )
            if before is not None:
                before(pid, stuck)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed.append((pid, stuck))
        return killed


class Allowances:
    """Memory each worker may hold beyond the limit, which the worker itself sets (the admission
    server's: for its replicated data) and the supervisor reads: a double per slot, shared like the table."""

    def __init__(self, slots: int) -> None:
        self._memory = mmap.mmap(-1, _ALLOWANCE.size * max(1, slots))

    def setter(self, slot: int) -> Callable[[float], None]:
        return lambda value: _ALLOWANCE.pack_into(self._memory, _ALLOWANCE.size * slot, value)

    def get(self, slot: int) -> float:
        return _ALLOWANCE.unpack_from(self._memory, _ALLOWANCE.size * slot)[0]


_ALLOWANCE = struct.Struct("d")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes(pid: int) -> int | None:
    """A process's resident memory, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None
