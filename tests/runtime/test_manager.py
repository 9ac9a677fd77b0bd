"""The runtime: workers retry a failing sync with backoff, honour a requested resync, and act only while
leading; the client refuses writes otherwise."""

from __future__ import annotations

import logging
import threading

import pytest
import urllib3
from prometheus_client import REGISTRY

from regokite.kube.client import NotLeader
from regokite.runtime.manager import Manager
from regokite.runtime.reconcile import Result
from tests.kube_api.fake import FakeKube
from tests.waiting import wait_until


class Flaky:
    """Fails its first sync, then asks to be synced again once."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.done = threading.Event()

    def reconcile(self, namespace: str, name: str) -> Result:
        self.calls.append((namespace, name))
        if len(self.calls) == 1:
            raise RuntimeError("first try fails")
        if len(self.calls) == 2:
            return Result(requeue_after=0.001)
        self.done.set()
        return Result()


class Elector:
    def __init__(self) -> None:
        self.on_started_leading = self.on_stopped_leading = None
        self.knows_holder = True

    def may_act(self) -> bool:
        return True

    def describe(self) -> dict:
        return {"leading": True}

    def run(self, stop: threading.Event) -> None:
        stop.wait()

    def release(self) -> None:
        pass


def test_a_failed_sync_is_retried_and_a_requested_resync_comes_back() -> None:
    manager = Manager(FakeKube(), workers=1)  # type: ignore[arg-type]
    flaky = Flaky()
    manager.register(flaky)
    manager.start(sync_timeout=0)
    try:
        manager.enqueue("flaky", "ns", "a")
        assert flaky.done.wait(5)
        assert flaky.calls == [("ns", "a")] * 3
        assert manager.queue.failures(("flaky", "ns", "a")) == 0  # forgotten after the success
        assert manager.readiness()["ready"] and manager.liveness()["healthy"]
    finally:
        manager.stop(timeout=2)


def test_writes_are_refused_unless_leading_and_a_new_leader_resyncs_everything() -> None:
    kube = FakeKube()
    manager = Manager(kube)  # type: ignore[arg-type]
    resynced: list[str] = []

    class Reconciler:
        name = "r"

        def reconcile(self, namespace: str, name: str) -> Result:
            return Result()

        def resync_all(self) -> None:
            resynced.append("r")

    manager.register(Reconciler())
    elector = Elector()
    manager.use_leader_election(elector)  # type: ignore[arg-type]
    assert not manager.leading
    with pytest.raises(NotLeader):
        kube.delete("/api/v1/namespaces/ns/configmaps/a")
    elector.on_started_leading()  # type: ignore[misc]
    assert manager.leading and resynced == ["r"]
    elector.on_stopped_leading()  # type: ignore[misc]
    assert not manager.leading


class Gate:
    """Replicated data that is not in until `open` is set."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.asked_by_workers = 0  # how often a worker thread looked before taking a key

    def ready(self) -> bool:
        if threading.current_thread().name.startswith("worker-"):
            self.asked_by_workers += 1
        return self.open.is_set()

    def pending(self) -> list[str]:
        return [] if self.open.is_set() else ["v1/configmaps"]

    def health(self) -> dict[str, dict]:
        return {}


class Recorder:
    """Notes whether the data was in at each sync."""

    name = "recorder"

    def __init__(self, gate: Gate) -> None:
        self.gate, self.seen, self.called = gate, [], threading.Event()

    def reconcile(self, namespace: str, name: str) -> Result:
        self.seen.append(self.gate.ready())
        self.called.set()
        return Result()


def test_no_sync_runs_before_the_replicated_data_is_in() -> None:
    manager = Manager(FakeKube(), workers=2)  # type: ignore[arg-type]
    gate = Gate()
    manager.data = gate
    recorder = Recorder(gate)
    manager.register(recorder)
    manager.start(sync_timeout=0)
    try:
        manager.enqueue("recorder", "ns", "a")
        detail = manager.readiness()
        assert not detail["ready"] and detail["replicated"] == {
            "ready": False,
            "pending": ["v1/configmaps"],
            "watches": {},
            "stale_seconds": 0.0,
        }
        # both workers have looked at the closed gate again and again (they poll it), and left the key queued
        wait_until(lambda: gate.asked_by_workers >= 10, what="workers polling the closed gate")
        assert not recorder.called.is_set() and len(manager.queue) == 1
        gate.open.set()
        assert recorder.called.wait(5)
        assert recorder.seen == [True]
        assert manager.readiness()["ready"]
    finally:
        manager.stop(timeout=2)


def test_with_shards_each_manager_syncs_only_its_own_objects_and_a_view_change_resyncs() -> None:
    from regokite.runtime.leader import LeaderSettings
    from regokite.runtime.shards import Shards, object_key, owner

    kube = FakeKube()
    keys = [("ns", f"p{i}") for i in range(40)]

    class Keyed:
        name = "keyed"

        def __init__(self) -> None:
            self.synced: set[tuple[str, str]] = set()
            self.disowned: list[tuple[str, str]] = []

        def reconcile(self, namespace: str, name: str) -> Result:
            self.synced.add((namespace, name))
            return Result()

        def keys(self) -> list[tuple[str, str]]:
            return keys

        def resync_all(self, only=None) -> None:
            for k in keys:
                if only is None or only(*k):
                    manager_of[self].enqueue(self.name, *k)

        def disown(self, namespace: str, name: str) -> None:
            self.disowned.append((namespace, name))

    manager_of: dict[Keyed, Manager] = {}
    members, runs = [], []
    for identity in "ab":
        shards = Shards(kube, LeaderSettings(name="ctl", namespace="ns", identity=identity))  # type: ignore[arg-type]
        manager = Manager(FakeKube(), workers=1)  # type: ignore[arg-type]
        r = Keyed()
        manager_of[r] = manager
        manager.register(r)
        manager.use_shards(shards)
        manager.start(sync_timeout=0)
        members.append(shards)
        runs.append((manager, r))
    try:
        a, b = members
        a.tick()  # a alone: everything is a's, and the view change resyncs every key
        (ma, ra), (mb, rb) = runs
        wait_until(lambda: ra.synced == set(keys), what="a syncs every key")
        theirs = next(k for k in keys if owner(object_key(*k), ["a", "b"]) == "a")
        mb.queue.add(("keyed", *theirs))  # b is not a member yet: the key waits
        for _ in range(2):
            b.tick(), a.tick()
        b.tick()
        mine_b = {k for k in keys if owner(object_key(*k), ["a", "b"]) == "b"}
        wait_until(lambda: rb.synced == mine_b, what="b syncs its share")
        # the key b held before it was a member is a's under [a, b]: b drops it, telling its reconciler
        wait_until(lambda: rb.disowned == [theirs], what="b disowns a's object")
        assert theirs not in rb.synced
        ma.enqueue("keyed", *next(iter(mine_b)))  # another's object: dropped at once
        assert len(ma.queue) == 0 and ma.readiness()["shards"]["view"] == ["a", "b"]
        a.release()
        with pytest.raises(NotLeader):  # a left: its client writes nothing more
            ma.client.delete("/api/v1/namespaces/ns/configmaps/x")
    finally:
        for manager, _ in runs:
            manager.stop(timeout=2)


@pytest.mark.parametrize("after", [-1.0, float("inf"), float("nan"), "5"])
def test_a_result_refuses_a_delay_that_is_no_number_of_seconds(after: object) -> None:
    with pytest.raises(ValueError, match="requeue_after"):
        Result(requeue_after=after)  # type: ignore[arg-type]


class Unreachable:
    """Every sync meets an API server that refuses the connection."""

    name = "unreachable"

    def __init__(self) -> None:
        self.calls = 0
        self.failed_twice = threading.Event()

    def reconcile(self, namespace: str, name: str) -> Result:
        self.calls += 1
        if self.calls >= 2:
            self.failed_twice.set()
        cause = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: refused")  # type: ignore[arg-type]
        raise urllib3.exceptions.MaxRetryError(None, "/api/v1/namespaces/ns/configmaps/a", cause)  # type: ignore[arg-type]


def test_a_sync_the_api_server_did_not_answer_is_counted_logged_and_retried_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager = Manager(FakeKube(), workers=1)  # type: ignore[arg-type]
    unreachable = Unreachable()
    manager.register(unreachable)
    before = REGISTRY.get_sample_value(
        "regokite_controller_reconcile_errors_total", {"controller": "unreachable", "reason": "connection"}
    )
    manager.start(sync_timeout=0)
    try:
        with caplog.at_level(logging.WARNING, logger="regokite.controller"):
            manager.enqueue("unreachable", "ns", "a")
            assert unreachable.failed_twice.wait(5)  # retried
        assert manager.queue.failures(("unreachable", "ns", "a")) >= 2  # each retry backed off further
    finally:
        manager.stop(timeout=2)
    after = REGISTRY.get_sample_value(
        "regokite_controller_reconcile_errors_total", {"controller": "unreachable", "reason": "connection"}
    )
    assert (after or 0) - (before or 0) >= 2
    failed = [r for r in caplog.records if r.getMessage() == "sync failed"]
    assert failed and all(r.reason == "connection" and "refused" in r.error for r in failed)  # type: ignore[attr-defined]
    assert not any(r.exc_info for r in failed)  # an outage, not a bug: no traceback per sync
