"""A worker's mirror of the replica feeder (kube.replica_feed) over a real Unix socket: it keeps following
the data it holds while a resource asked later is listed, and counts a silent feeder as lost."""

from __future__ import annotations

import pickle
import threading
from multiprocessing.connection import Listener
from pathlib import Path

import pytest

from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.kube import replica_feed
from regokite.kube.replica_feed import ReplicaFeed
from tests.waiting import wait_until

CONFIGMAPS = ResourceRef("", "v1", "configmaps")
SECRETS = ResourceRef("", "v1", "secrets")
KEY = b"test"


class Replicator:
    """The feeder's view of its informers: what is listed, what is pending, their health."""

    def __init__(self, store: ReplicaStore) -> None:
        self.store = store
        self.resources: list[ResourceRef] = []
        self.unlisted: set[str] = set()

    def pending(self) -> list[str]:
        return sorted(self.unlisted)

    def health(self) -> dict[str, dict]:
        return {str(r): {"connected": True} for r in self.resources}

    def exclude(self, patterns: object) -> None:
        pass

    def ensure(self, refs: list[ResourceRef]) -> None:
        """As the real one: a resource asked for is declared in the store (a change the feed sends)."""
        for ref in refs:
            if ref not in self.resources:
                self.resources.append(ref)
                self.store.declare(ref.resource)


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


@pytest.fixture
def address(tmp_path: Path) -> str:
    return str(tmp_path / "feed.sock")


@pytest.fixture
def feeder(address: str) -> Replicator:
    replicator = Replicator(ReplicaStore())
    replicator.store.put("configmaps", configmap("first"), namespaced=True)
    listener = Listener(address, family="AF_UNIX", authkey=KEY)
    threading.Thread(target=replica_feed._accept, args=(listener, replicator), daemon=True).start()
    return replicator  # the listener stays open: the feeder's accept loop serves until the process ends


def test_a_worker_follows_what_it_holds_while_a_resource_asked_later_is_listed(
    address: str, feeder: Replicator
) -> None:
    feed = ReplicaFeed(address, KEY, None, ReplicaStore())  # type: ignore[arg-type]
    try:
        feed.ensure([CONFIGMAPS])
        assert feed.wait_ready(10)
        feeder.unlisted.add(str(SECRETS))  # a reload asks for secrets: still listing
        feed.ensure([SECRETS])
        # the feeder's status names secrets: it has taken the request (the change below comes after it)
        wait_until(lambda: str(SECRETS) in feed.health(), what="the feeder taking the request for secrets")
        feeder.store.put("configmaps", configmap("second"), namespaced=True)
        held = lambda: feed.store.document.get("configmaps", {}).get("default", {})  # noqa: E731
        wait_until(lambda: "second" in held(), what="a change of a held resource reaching the worker")
        assert feed.pending() == [str(SECRETS)]
    finally:
        feed.stop()


def test_a_worker_is_ready_when_its_resource_is_listed_after_the_data_went_out(
    address: str, feeder: Replicator
) -> None:
    """The real Replicator puts a list's objects, then marks it listed: the feeder may send those objects
    while it is still pending; nothing changes after, yet the worker must learn that it is listed."""
    feeder.unlisted.add(str(SECRETS))
    feed = ReplicaFeed(address, KEY, None, ReplicaStore())  # type: ignore[arg-type]
    try:
        feed.ensure([CONFIGMAPS])
        assert feed.wait_ready(10)
        feed.ensure([SECRETS])
        wait_until(lambda: str(SECRETS) in feed.health(), what="the feeder taking the request for secrets")
        feeder.store.put("secrets", {"metadata": {"name": "token", "namespace": "default"}}, namespaced=True)
        held = lambda: feed.store.document.get("secrets", {}).get("default", {})  # noqa: E731
        wait_until(lambda: "token" in held(), what="the listed objects reaching the worker")
        feeder.unlisted.clear()  # the list is in; no change follows
        assert feed.wait_ready(10), feed.pending()
    finally:
        feed.stop()


def test_a_feeder_that_says_nothing_counts_as_lost(address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replica_feed, "SILENCE_SECONDS", 0.5)
    status = {"seeded": [str(CONFIGMAPS)], "health": {str(CONFIGMAPS): {"connected": True}}, "objects": 0}
    listener = Listener(address, family="AF_UNIX", authkey=KEY)
    held: list = []

    def hung_feeder() -> None:  # sends the document, then hangs with the connection open
        conn = listener.accept()
        held.append(conn)
        conn.recv()
        conn.send(("document", status, pickle.dumps({})))

    threading.Thread(target=hung_feeder, daemon=True).start()
    feed = ReplicaFeed(address, KEY, None, ReplicaStore())  # type: ignore[arg-type]
    try:
        feed.ensure([CONFIGMAPS])
        assert feed.wait_ready(10)
        wait_until(
            lambda: not feed.health()[str(CONFIGMAPS)]["connected"], what="the silent feed reported disconnected"
        )
    finally:
        feed.stop()
        listener.close()
