"""The runtime: workers retry a failing sync with backoff, honour a requested resync, and act only while
leading; the client refuses writes otherwise."""

from __future__ import annotations

import threading

import pytest

from regokite.kube.manager import Manager, NotLeader
from tests.kube_runtime.fake import FakeKube


class Flaky:
    """Fails its first sync, then asks to be synced again once."""

    name = "flaky"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.done = threading.Event()

    def reconcile(self, namespace: str, name: str) -> float | None:
        self.calls.append((namespace, name))
        if len(self.calls) == 1:
            raise RuntimeError("first try fails")
        if len(self.calls) == 2:
            return 0.001
        self.done.set()
        return None


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

        def reconcile(self, namespace: str, name: str) -> None:
            return None

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

    def ready(self) -> bool:
        return self.open.is_set()

    def pending(self) -> list[str]:
        return [] if self.open.is_set() else ["v1/configmaps"]


class Recorder:
    """Notes whether the data was in at each sync."""

    name = "recorder"

    def __init__(self, gate: Gate) -> None:
        self.gate, self.seen, self.called = gate, [], threading.Event()

    def reconcile(self, namespace: str, name: str) -> None:
        self.seen.append(self.gate.ready())
        self.called.set()


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
        assert not detail["ready"] and detail["replicated"] == {"ready": False, "pending": ["v1/configmaps"]}
        recorder.called.wait(0.3)  # a worker that did not wait would have synced by now
        gate.open.set()
        assert recorder.called.wait(5)
        assert recorder.seen == [True]
        assert manager.readiness()["ready"]
    finally:
        manager.stop(timeout=2)
