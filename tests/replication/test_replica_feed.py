"""A worker's mirror of the replica feeder (replication.replica_feed) over a real Unix socket: it keeps following
the data it holds while a resource asked later is listed, counts a silent feeder as lost, holds each
object as its JSON text, and its engine sees the same data as one following the objects themselves."""

from __future__ import annotations

import gc
import pickle
import threading
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any

import pytest

from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import ReplicaStore, ResourceRef, TextReplicaStore
from regokite.engine import open_engine
from regokite.gatekeeper.inventory import InventoryView, from_replica
from regokite.replication import replica_feed
from regokite.replication.replica_feed import ReplicaFeed
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
    replicator = Replicator(TextReplicaStore())  # as the feeder's
    replicator.store.put("configmaps", configmap("first"), namespaced=True)
    listener = Listener(address, family="AF_UNIX", authkey=KEY)
    threading.Thread(target=replica_feed._accept, args=(listener, replicator), daemon=True).start()
    return replicator  # the listener stays open: the feeder's accept loop serves until the process ends


def test_a_worker_follows_what_it_holds_while_a_resource_asked_later_is_listed(
    address: str, feeder: Replicator
) -> None:
    feed = ReplicaFeed(address, KEY, None, TextReplicaStore())  # type: ignore[arg-type]
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
    feed = ReplicaFeed(address, KEY, None, TextReplicaStore())  # type: ignore[arg-type]
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
    feed = ReplicaFeed(address, KEY, None, TextReplicaStore())  # type: ignore[arg-type]
    try:
        feed.ensure([CONFIGMAPS])
        assert feed.wait_ready(10)
        wait_until(
            lambda: not feed.health()[str(CONFIGMAPS)]["connected"], what="the silent feed reported disconnected"
        )
    finally:
        feed.stop()
        listener.close()


NAMESPACES = ResourceRef("", "v1", "namespaces", namespaced=False)
CLUSTERROLES = ResourceRef("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False)


def objects() -> list[tuple[ResourceRef, dict[str, Any]]]:
    """Namespaced and cluster-scoped objects, with values of every JSON kind."""
    values = {"n": [1, -3, 1.5, 0.1, 10**15, 1e22, 1e-300, True, False, None], "text": 'é ü 日本 \n\t"', "empty": {}}
    return [
        (CONFIGMAPS, {**configmap("first"), "data": {"a/b~c": "x"}}),
        (CONFIGMAPS, {**configmap("second"), "spec": values}),
        (CONFIGMAPS, {**configmap("third"), "metadata": {"name": "third", "namespace": "kube-system"}}),
        (NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"a": "b"}}}),
        (
            CLUSTERROLES,
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "view"}},
        ),
    ]


def test_policies_see_the_same_data_from_a_workers_text_mirror_as_from_the_objects(address: str) -> None:
    """data.kubernetes and Gatekeeper's data.inventory, after the first copy, new objects (merged) and a
    change and removals (a reload), from a worker's mirror and from a store of the objects themselves."""
    feeder = Replicator(TextReplicaStore())
    listener = Listener(address, family="AF_UNIX", authkey=KEY)
    threading.Thread(target=replica_feed._accept, args=(listener, feeder), daemon=True).start()
    reference = ReplicaStore()  # the objects as Python values, as every process held them before
    bundle = Bundle((Module("p.rego", "package p\n"),), {"other": {"x": 1}})
    engines = [open_engine(bundle), open_engine(bundle)]
    feed = ReplicaFeed(address, KEY, None, TextReplicaStore())  # type: ignore[arg-type]

    def put(ref: ResourceRef, obj: dict[str, Any]) -> None:
        reference.put(ref.resource, obj, namespaced=ref.namespaced)
        feeder.store.put(ref.resource, obj, namespaced=ref.namespaced)

    def remove(ref: ResourceRef, namespace: str, name: str) -> None:
        reference.remove(ref.resource, namespace, name, namespaced=ref.namespaced)
        feeder.store.remove(ref.resource, namespace, name, namespaced=ref.namespaced)

    def same_data() -> None:
        wait_until(lambda: feed.store.document == feeder.store.document, what="the worker's mirror to catch up")
        [seen_by_reference], [seen_by_worker] = (e.query("x := data") for e in engines)
        assert seen_by_worker == seen_by_reference
        data = seen_by_worker["bindings"]["x"]
        assert data["kubernetes"] == reference.document and data["other"] == {"x": 1}
        assert data["inventory"] == from_replica(reference.document)

    try:
        for ref, obj in objects()[:3]:
            put(ref, obj)
        feed.ensure([CONFIGMAPS, NAMESPACES, CLUSTERROLES])  # the feeder declares each (empty) as it is asked
        for ref in (NAMESPACES, CLUSTERROLES):
            reference.declare(ref.resource)
        assert feed.wait_ready(10)
        engines[0].follow(InventoryView(reference))
        engines[1].follow(InventoryView(feed.store))
        same_data()
        for ref, obj in objects()[3:]:  # a cluster-scoped resource's first objects: merged in
            put(ref, obj)
        put(CONFIGMAPS, {**configmap("fourth"), "metadata": {"name": "fourth", "namespace": "new"}})
        same_data()
        put(CONFIGMAPS, {**configmap("second"), "data": {"changed": "yes"}})  # a change: a reload
        remove(CONFIGMAPS, "kube-system", "third")  # a namespace's last object
        remove(CLUSTERROLES, "", "view")
        same_data()
    finally:
        feed.stop()
        listener.close()
        for engine in engines:
            engine.close()


def test_a_worker_holds_each_object_as_its_json_text_not_as_python_values(address: str, feeder: Replicator) -> None:
    feed = ReplicaFeed(address, KEY, None, TextReplicaStore())  # type: ignore[arg-type]
    try:
        feed.ensure([CONFIGMAPS])
        assert feed.wait_ready(10)
        feeder.store.put("configmaps", configmap("marked-1f3a"), namespaced=True)  # its dict goes after put
        held = lambda: feed.store.document.get("configmaps", {}).get("default", {})  # noqa: E731
        wait_until(lambda: "marked-1f3a" in held(), what="the object reaching the worker")
        assert {name: type(text) for name, text in held().items()} == {"first": str, "marked-1f3a": str}
        gc.collect()
        assert not [o for o in gc.get_objects() if type(o) is dict and o.get("name") == "marked-1f3a"]
        assert feed.store.object_at("configmaps", "default", "marked-1f3a") == configmap("marked-1f3a")
    finally:
        feed.stop()
