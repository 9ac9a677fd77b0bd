"""The work queue: adds coalesce, a key is never handed to two workers, delays, backoff, shutdown."""

from __future__ import annotations

import threading
import time

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


def test_waiting_workers_each_get_a_key_and_delayed_keys_arrive_while_they_wait(queue: WorkQueue) -> None:
    """An add wakes one waiting worker (not every one): no key may be lost or handed out twice,
    with workers that wait with and without a timeout, and delayed keys due meanwhile."""
    got: list[str] = []
    lock = threading.Lock()
    stopping = threading.Event()

    def worker(timeout: float | None) -> None:
        while True:
            key = queue.get(timeout)
            if key is None:
                if stopping.is_set():
                    return
                continue  # timed out: wait again
            with lock:
                got.append(str(key))
            queue.done(key)

    threads = [threading.Thread(target=worker, args=(t,)) for t in (None, None, 0.001, 0.001, 0.01)]
    for t in threads:
        t.start()
    expected = [f"k{i}" for i in range(200)] + [f"d{i}" for i in range(0, 200, 10)]
    for i in range(200):
        queue.add(f"k{i}")
        if i % 10 == 0:
            queue.add_after(f"d{i}", 0.002)
    deadline = time.monotonic() + 10
    while len(got) < len(expected) and time.monotonic() < deadline:
        time.sleep(0.01)
    stopping.set()
    queue.shutdown()
    for t in threads:
        t.join(timeout=5)
    assert sorted(got) == sorted(expected)
    assert not any(t.is_alive() for t in threads)
