"""The work queue: adds coalesce, a key is never handed to two workers, delays, backoff, shutdown."""

from __future__ import annotations

import pytest

from regokite.kube.workqueue import WorkQueue


@pytest.fixture
def queue():
    q = WorkQueue(base_delay=0.001, max_delay=0.004)
    yield q
    q.shutdown()


def test_adds_of_a_waiting_key_coalesce_and_order_is_kept(queue: WorkQueue) -> None:
    for key in ("a", "b", "a", "c", "b"):
        queue.add(key)
    assert len(queue) == 3
    assert [queue.get(0) for _ in range(3)] == ["a", "b", "c"]
    assert queue.get(0) is None


def test_a_key_being_processed_is_queued_again_only_when_done(queue: WorkQueue) -> None:
    queue.add("a")
    assert queue.get(0) == "a"
    queue.add("a")  # changed while a worker holds it
    assert queue.get(0) is None  # not handed to a second worker
    queue.done("a")
    assert queue.get(0) == "a"
    queue.done("a")
    assert queue.get(0) is None


def test_add_after_wakes_the_key_once_at_the_earliest_time(queue: WorkQueue) -> None:
    queue.add_after("slow", 60)
    queue.add_after("soon", 0.001)
    queue.add_after("soon", 30)  # a later wake-up is covered by the earlier one
    assert queue.get(1) == "soon"
    assert queue.get(0.01) is None
    assert queue.delayed == 1


def test_failures_back_off_exponentially_up_to_the_cap_until_forgotten(queue: WorkQueue) -> None:
    assert [queue.add_rate_limited("k") for _ in range(4)] == [0.001, 0.002, 0.004, 0.004]
    assert queue.failures("k") == 4
    queue.forget("k")
    assert queue.failures("k") == 0 and queue.add_rate_limited("k") == 0.001


def test_shutdown_releases_waiting_workers_and_refuses_adds(queue: WorkQueue) -> None:
    queue.add("a")
    queue.shutdown()
    assert queue.get() is None
    queue.add("b")
    assert len(queue) == 0
