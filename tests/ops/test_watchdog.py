"""The watchdog's shared slots: what a supervisor sees of each worker (admission reviews, controller hook calls)."""

from __future__ import annotations

import os
import time

from regokite.ops.watchdog import Watchdog


def test_a_worker_deciding_longer_than_the_limit_is_overdue_and_names_its_policy() -> None:
    watchdog = Watchdog(2, limit=0.05)
    note = watchdog.tracker(1)
    note("admission.first")
    note("admission.runaway")  # the review's clock keeps running from the first policy
    assert watchdog.overdue() == []
    time.sleep(0.08)
    [stuck] = watchdog.overdue()
    assert (stuck.slot, stuck.policy) == (1, "admission.runaway")
    assert stuck.seconds > 0.05


def test_a_decided_review_clears_the_slot() -> None:
    watchdog = Watchdog(1, limit=0.01)
    note = watchdog.tracker(0)
    note("admission.p")
    note(None)
    time.sleep(0.02)
    assert watchdog.overdue() == []
    note("admission.p")  # the next review starts a fresh clock
    assert watchdog.overdue() == []


def test_the_supervisor_sees_what_a_forked_worker_notes() -> None:
    watchdog = Watchdog(1, limit=0.0)
    pid = os.fork()
    if pid == 0:
        watchdog.tracker(0)("admission.child")
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.001)
    assert [s.policy for s in watchdog.overdue()] == ["admission.child"]
    watchdog.clear(0)
    assert watchdog.overdue() == []


def test_a_call_may_carry_its_own_limit() -> None:
    watchdog = Watchdog(2, limit=60.0)
    watchdog.tracker(0)("hooks.quick", 0.01)
    watchdog.tracker(1)("hooks.default")
    time.sleep(0.02)
    [stuck] = watchdog.overdue()
    assert (stuck.slot, stuck.policy, stuck.limit) == (0, "hooks.quick", 0.01)
