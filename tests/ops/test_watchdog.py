"""The watchdog's shared slots: what a supervisor sees of each worker (admission reviews, controller hook calls).

Each test drives the watchdog's clock itself: no wall time passes between a note and the check, so a
loaded machine cannot make a slot overdue early or late."""

from __future__ import annotations

import os

from regokite.ops.watchdog import Allowances, Watchdog
from tests.clocks import ManualClock


def test_a_worker_deciding_longer_than_the_limit_is_overdue_and_names_its_policy() -> None:
    clock = ManualClock()
    watchdog = Watchdog(2, limit=0.05, clock=clock)
    note = watchdog.tracker(1)
    note("admission.first")
    clock.now += 0.04
    note("admission.runaway")  # the review's clock keeps running from the first policy
    assert watchdog.overdue() == []
    clock.now += 0.02
    [stuck] = watchdog.overdue()
    assert (stuck.slot, stuck.policy) == (1, "admission.runaway")
    assert stuck.seconds > 0.05 and stuck.limit == 0.05


def test_a_decided_review_clears_the_slot() -> None:
    clock = ManualClock()
    watchdog = Watchdog(1, limit=0.01, clock=clock)
    note = watchdog.tracker(0)
    note("admission.p")
    note(None)
    clock.now += 0.02
    assert watchdog.overdue() == [] and watchdog.policy(0) is None
    note("admission.p")  # the next review starts a fresh clock
    assert watchdog.overdue() == []
    clock.now += 0.02
    assert [s.policy for s in watchdog.overdue()] == ["admission.p"]


def test_the_supervisor_sees_what_a_forked_worker_notes() -> None:
    clock = ManualClock()
    watchdog = Watchdog(1, limit=1.0, clock=clock)
    pid = os.fork()
    if pid == 0:
        watchdog.tracker(0)("admission.child")
        os._exit(0)
    os.waitpid(pid, 0)
    assert watchdog.policy(0) == "admission.child" and watchdog.overdue() == []
    clock.now += 2
    assert [s.policy for s in watchdog.overdue()] == ["admission.child"]
    watchdog.clear(0)
    assert watchdog.overdue() == []


def test_a_call_may_carry_its_own_limit() -> None:
    clock = ManualClock()
    watchdog = Watchdog(2, limit=60.0, clock=clock)
    watchdog.tracker(0)("hooks.quick", 0.01)
    watchdog.tracker(1)("hooks.default")
    clock.now += 0.02
    [stuck] = watchdog.overdue()
    assert (stuck.slot, stuck.policy, stuck.limit) == (0, "hooks.quick", 0.01)


def test_a_workers_memory_allowance_set_after_the_fork_is_what_the_supervisor_reads() -> None:
    allowances = Allowances(2)
    pid = os.fork()
    if pid == 0:  # the worker of slot 1: its replica's allowance
        allowances.setter(1)(360 * 2**20)
        os._exit(0)
    os.waitpid(pid, 0)
    assert allowances.get(1) == 360 * 2**20 and allowances.get(0) == 0.0
    allowances.setter(1)(0.0)  # a replacement starts with none
    assert allowances.get(1) == 0.0
