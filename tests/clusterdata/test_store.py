"""The replica store's layout and change log, and engines following it (both engines)."""

from __future__ import annotations

import json

import pytest

from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import (
    ReplicaStore,
    ReplicationError,
    TextReplicaStore,
    check_replica_root,
    guess_resource,
    parse_resource,
    store_of,
)

# both ways of holding the objects: Python values, or each object's JSON text (an admission worker's mirror)
STORES = pytest.mark.parametrize("store_kind", [ReplicaStore, TextReplicaStore], ids=["objects", "text"])

POLICY = """\
package p

import rego.v1

hosts contains host if {
	some ns, name
	some rule in data.kubernetes.ingresses[ns][name].spec.rules
	host := rule.host
}

namespaces := object.keys(data.kubernetes.namespaces)
"""


def ingress(ns: str, name: str, host: str) -> dict:
    return {"kind": "Ingress", "metadata": {"namespace": ns, "name": name}, "spec": {"rules": [{"host": host}]}}


def test_layout_is_kube_mgmts() -> None:
    store = ReplicaStore()
    store.put("ingresses", ingress("a", "web", "x.io"), namespaced=True)
    store.put("namespaces", {"metadata": {"name": "a"}}, namespaced=False)
    assert store.document == {
        "ingresses": {"a": {"web": ingress("a", "web", "x.io")}},
        "namespaces": {"a": {"metadata": {"name": "a"}}},
    }
    assert len(store) == 2
    store.remove("ingresses", "a", "web", namespaced=True)
    assert store.document["ingresses"] == {}  # an emptied namespace goes
    assert len(store) == 1


def test_a_text_store_holds_each_object_as_its_json_text_in_the_same_layout() -> None:
    store = TextReplicaStore()
    web = ingress("a", "web", "x.io")
    store.put("ingresses", web, namespaced=True)
    store.put("namespaces", {"metadata": {"name": "a", "labels": {"é": "ü"}}}, namespaced=False)
    held = store.document["ingresses"]["a"]["web"]
    assert isinstance(held, str) and json.loads(held) == web and held.isascii()
    assert store.object_at("namespaces", "a") == {"metadata": {"name": "a", "labels": {"é": "ü"}}}
    assert store.object_at("namespaces", "b") is None and store.object_at("ingresses", "a", "web") == web
    generation = store.generation
    store.put("ingresses", ingress("a", "web", "x.io"), namespaced=True)  # the same text again: no change
    assert store.generation == generation
    changed = ingress("a", "web", "y.io")
    store.put("ingresses", changed, namespaced=True)
    [change] = store.changes_since(generation) or []
    assert (change.path, json.loads(change.value), change.created) == (("ingresses", "a", "web"), changed, False)
    assert json.loads(store.loadable(store.rooted(store.document))) == {
        "kubernetes": {
            "ingresses": {"a": {"web": ingress("a", "web", "y.io")}},
            "namespaces": {"a": {"metadata": {"name": "a", "labels": {"é": "ü"}}}},
        }
    }


@STORES
def test_changes_since_and_a_log_that_no_longer_reaches_back(store_kind: type[ReplicaStore]) -> None:
    store = store_kind(log_size=3)
    store.put("ingresses", ingress("a", "one", "x"), namespaced=True)  # resource, namespace
    generation = store.generation
    store.put("ingresses", ingress("a", "two", "y"), namespaced=True)
    changes = store.changes_since(generation)
    assert changes is not None and [(c.path, c.created) for c in changes] == [(("ingresses", "a", "two"), True)]
    assert store.changes_since(store.generation) == []
    store.put("ingresses", ingress("a", "two", "z"), namespaced=True)
    store.remove("ingresses", "a", "one", namespaced=True)
    assert store.changes_since(0) is None


def test_resource_syntax_and_kind_guesses() -> None:
    ref = parse_resource("networking.k8s.io/v1/ingresses", namespaced=True)
    assert (ref.group, ref.version, ref.resource, ref.api_version) == (
        "networking.k8s.io",
        "v1",
        "ingresses",
        "networking.k8s.io/v1",
    )
    assert parse_resource("v1/namespaces", namespaced=False).api_version == "v1"
    with pytest.raises(ReplicationError, match="VERSION/RESOURCE"):
        parse_resource("ingresses", namespaced=True)
    assert [guess_resource(k) for k in ("Ingress", "Policy", "ConfigMap", "Gateway", "Endpoints")] == [
        "ingresses", "policies", "configmaps", "gateways", "endpointses",
    ]  # fmt: skip


def test_bundle_data_where_replicas_go_is_refused() -> None:
    with pytest.raises(ReplicationError, match=r"data\.kubernetes"):
        check_replica_root({"kubernetes": {"x": 1}}, ReplicaStore())
    check_replica_root({"other": 1}, ReplicaStore())
    with pytest.raises(ReplicationError, match=r"data\.a"):
        check_replica_root({"a": 1}, ReplicaStore("a/b"))


def test_store_of_objects_guesses_resources() -> None:
    store = store_of([ingress("a", "web", "x"), {"kind": "Namespace", "metadata": {"name": "a"}}])
    assert set(store.document) == {"ingresses", "namespaces"}
    assert "web" in store.document["ingresses"]["a"]


@STORES
def test_engines_follow_adds_changes_and_removals(make_engine, store_kind: type[ReplicaStore]) -> None:
    store = store_kind()
    store.declare("ingresses")
    store.put("ingresses", ingress("a", "one", "one.io"), namespaced=True)
    engine = make_engine(Bundle((Module("p.rego", POLICY),), {"other": {"x": 1}}))
    engine.follow(store)
    assert engine.evaluate("data.p.hosts") == ["one.io"]
    store.put("ingresses", ingress("a", "two", "two.io"), namespaced=True)  # an addition: merged
    store.put("ingresses", ingress("b", "three", "three.io"), namespaced=True)
    store.put("namespaces", {"metadata": {"name": "a"}}, namespaced=False)
    assert engine.evaluate("data.p.hosts") == ["one.io", "three.io", "two.io"]
    assert engine.evaluate("data.p.namespaces") == ["a"]
    store.put("ingresses", ingress("a", "two", "changed.io"), namespaced=True)  # a change
    store.remove("ingresses", "b", "three", namespaced=True)  # a removal
    assert engine.evaluate("data.p.hosts") == ["changed.io", "one.io"]
    assert engine.evaluate("data.other.x") == 1  # the bundle's own data survives a reload
    store.remove("ingresses", "a", "one", namespaced=True)
    store.remove("ingresses", "a", "two", namespaced=True)
    assert engine.evaluate("data.p.hosts") == []
    assert engine.evaluate("data.kubernetes.ingresses") == {}


@STORES
def test_a_follower_may_lag_on_changes_up_to_max_lag_but_never_on_new_objects(
    make_engine, store_kind: type[ReplicaStore]
) -> None:
    store = store_kind(max_lag=3600)
    store.put("ingresses", ingress("a", "one", "one.io"), namespaced=True)
    engine = make_engine(Bundle((Module("p.rego", POLICY),), {}))
    engine.follow(store)
    assert engine.evaluate("data.p.hosts") == ["one.io"]  # the first load is never held back
    store.put("ingresses", ingress("a", "two", "two.io"), namespaced=True)
    assert engine.evaluate("data.p.hosts") == ["one.io", "two.io"]
    store.remove("ingresses", "a", "one", namespaced=True)
    expected = ["two.io"] if engine.name == "opa" else ["one.io", "two.io"]  # a sidecar is patched in place
    assert engine.evaluate("data.p.hosts") == expected


@STORES
def test_a_sidecar_another_writer_changed_gets_the_whole_replica(opa_standin, store_kind: type[ReplicaStore]) -> None:
    """Two admission workers patch one sidecar: a removal the other already made is not an error."""
    from regokite.engine import EngineSettings, open_engine

    opa_standin.clear()
    store = store_kind()
    store.put("ingresses", ingress("a", "one", "one.io"), namespaced=True)
    store.put("ingresses", ingress("a", "two", "two.io"), namespaced=True)
    engine = open_engine(Bundle((Module("p.rego", POLICY),), {}), EngineSettings("opa", opa_standin.url))
    try:
        engine.follow(store)
        opa_standin.delete_data(["kubernetes", "ingresses", "a", "one"])  # the other worker was faster
        store.remove("ingresses", "a", "one", namespaced=True)
        store.put("ingresses", ingress("b", "three", "three.io"), namespaced=True)
        assert engine.evaluate("data.p.hosts") == ["three.io", "two.io"]
    finally:
        engine.close()


@STORES
def test_a_value_no_engine_may_hold_is_refused_naming_where_it_would_go(store_kind: type[ReplicaStore]) -> None:
    from regokite.input_guard import InputRejected

    store = store_kind()
    with pytest.raises(InputRejected, match=r"data\.kubernetes\.configmaps\.a\.big\.data\.n"):
        store.put(
            "configmaps", {"metadata": {"name": "big", "namespace": "a"}, "data": {"n": 2**64 + 5}}, namespaced=True
        )
    assert store.document == {} and store.generation == 0


def test_hooks_wait_for_their_cluster_data_then_read_it() -> None:
    from fastapi.testclient import TestClient

    from regokite import outline
    from regokite.engine import open_engine
    from regokite.hookserving.server import HookPolicies, Served, create_app

    class Loading:
        def __init__(self) -> None:
            self.store, self.loaded = ReplicaStore(), False

        def ready(self) -> bool:
            return self.loaded

        def pending(self) -> list[str]:
            return [] if self.loaded else ["networking.k8s.io/v1/ingresses"]

    bundle = Bundle((Module("p.rego", POLICY),), {})
    engine = open_engine(bundle)
    replica = Loading()
    engine.follow(replica.store)
    policies = HookPolicies(engine, outline.packages(outline.outline(bundle.modules)))
    app = create_app(Served(lambda: policies), replica=replica)  # type: ignore[arg-type]
    with TestClient(app) as client:
        waiting = client.post("/v1/data/p/hosts", json={"input": {}})
        assert waiting.status_code == 503 and "networking.k8s.io/v1/ingresses" in waiting.json()["message"]
        assert client.get("/readyz").status_code == 503
        replica.store.put("ingresses", ingress("a", "one", "one.io"), namespaced=True)
        replica.loaded = True
        assert client.post("/v1/data/p/hosts", json={"input": {}}).json() == {"result": ["one.io"]}
        assert client.get("/readyz").status_code == 200
    engine.close()


@STORES
def test_a_sets_json_is_a_list_and_a_misplaced_object_does_not_stop_the_inventory(
    store_kind: type[ReplicaStore],
) -> None:
    """A set (a manifest's `!!set`, read by `regokite check`) is written as a list for a sidecar OPA, as
    before the text store; an object with a namespace replicated as cluster-scoped is placed, not a crash
    of every evaluation that reads `data.inventory`."""
    from regokite.gatekeeper.inventory import InventoryView

    store = store_kind()
    store.put("things", {"metadata": {"name": "s"}, "tags": {"x"}}, namespaced=False)
    assert json.loads(store.dumps(store.document))["things"]["s"]["tags"] == ["x"]
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns1"}}
    store.put("configmaps", configmap, namespaced=False)
    assert "inventory" in InventoryView(store).rooted(store.document)


def _merged(pieces: list[dict]) -> dict:
    """What an engine holds after merging `pieces` in order."""
    merged: dict = {}
    for piece in pieces:
        for resource, tree in piece.items():
            target = merged.setdefault(resource, {})
            for key, node in tree.items():
                if key in target:  # a namespace split between pieces: no name in two of them
                    assert isinstance(node, dict) and not node.keys() & target[key].keys()
                    target[key].update(node)
                else:
                    target[key] = node
    return merged


@STORES
def test_pieces_of_a_load_in_steps_merge_to_the_document_as_it_was(store_kind: type[ReplicaStore]) -> None:
    store = store_kind()
    store.declare("secrets")  # a resource without objects is still placed
    for i in range(40):
        store.put("ingresses", ingress(f"ns{i % 3}", f"web{i}", f"h{i}.example.com"), namespaced=True)
    store.put("namespaces", {"metadata": {"name": "a"}}, namespaced=False)
    store.put("namespaces", {"metadata": {"name": "b"}}, namespaced=False)
    before = json.loads(json.dumps(store.document))
    generation, pieces = store.pieces(300)
    store.put("ingresses", ingress("ns0", "later", "later.example.com"), namespaced=True)  # after the snapshot
    store.remove("ingresses", "ns1", "web1", namespaced=True)
    taken = list(pieces)
    assert generation == store.generation - 2
    merged = _merged([json.loads(json.dumps(p)) for p in taken])
    assert merged == before  # the document at `generation`, whole, and nothing of what came after
    if store.holds_text:  # texts split a namespace: each piece holds about 300 bytes of objects
        assert len(taken) > 10
        assert all(len(store.loadable(p)) < 300 + 200 for p in taken)
        assert store.text_bytes() == sum(len(t) for tree in store.document.values() for t in _texts(tree))
    else:
        assert store.text_bytes() == 0


def _texts(node: str | dict) -> list[str]:
    return [node] if isinstance(node, str) else [t for value in node.values() for t in _texts(value)]
