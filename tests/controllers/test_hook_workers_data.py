"""Replicated cluster data in hook worker processes: each worker's mirror follows the controller's
store change by change (creations, edits, removals), and a worker that replaces a killed one gets
the whole document before its first answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite import outline
from regokite.bundle import load_bundle
from regokite.clusterdata.store import ReplicaStore, decode_changes, encode_changes
from regokite.controllers.hook_workers import HookWorkers
from regokite.controllers.hooks import ResolvedHook, resolve_hook
from regokite.controllers.schema import HookTarget
from tests.processes import kill_and_wait

POLICY = """package hooks.copy

status := {"colors": {name: cm.data.color | some name, cm in data.kubernetes.configmaps.team}}
"""


def configmap(name: str, color: str, rv: str) -> dict:
    meta = {"name": name, "namespace": "team", "resourceVersion": rv}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"color": color}}


@pytest.fixture
def setup(tmp_path: Path):
    (tmp_path / "copy.rego").write_text(POLICY)
    bundle = load_bundle([str(tmp_path)])
    packages = outline.packages(outline.outline(bundle.modules))
    hook = resolve_hook(HookTarget("hooks.copy"), packages, ("status",))
    store = ReplicaStore()
    store.declare("configmaps")
    pool = HookWorkers(bundle, processes=2, store=store)
    yield pool, hook, store
    pool.close()


def colors(pool: HookWorkers, hook: ResolvedHook) -> dict:
    return pool.evaluate(hook, {"parent": {}, "children": {}}).get("status", {}).get("colors", {})


def test_every_worker_sees_each_change_of_the_store_at_its_next_call(setup) -> None:
    pool, hook, store = setup
    store.put("configmaps", configmap("a", "red", "1"), namespaced=True)
    for _ in range(4):  # both workers, each at least twice
        assert colors(pool, hook) == {"a": "red"}
    store.put("configmaps", configmap("b", "blue", "2"), namespaced=True)  # a creation: merged in
    store.put("configmaps", configmap("a", "crimson", "3"), namespaced=True)  # an edit: a reload, no lag
    for _ in range(4):
        assert colors(pool, hook) == {"a": "crimson", "b": "blue"}
    store.remove("configmaps", "team", "b", namespaced=True)
    for _ in range(4):
        assert colors(pool, hook) == {"a": "crimson"}


def test_a_worker_replacing_a_killed_one_starts_from_the_whole_document(setup) -> None:
    pool, hook, store = setup
    store.put("configmaps", configmap("a", "red", "1"), namespaced=True)
    for _ in range(4):
        colors(pool, hook)
    kill_and_wait(pool.pids())
    store.put("configmaps", configmap("b", "blue", "2"), namespaced=True)
    for _ in range(4):  # the dead are replaced as calls find them; every answer has both objects
        assert colors(pool, hook) == {"a": "red", "b": "blue"}


def test_a_store_too_far_ahead_for_its_log_sends_the_whole_document(tmp_path: Path) -> None:
    (tmp_path / "copy.rego").write_text(POLICY)
    bundle = load_bundle([str(tmp_path)])
    hook = resolve_hook(HookTarget("hooks.copy"), outline.packages(outline.outline(bundle.modules)), ("status",))
    store = ReplicaStore(log_size=3)
    store.declare("configmaps")
    pool = HookWorkers(bundle, processes=1, store=store)
    try:
        assert colors(pool, hook) == {}
        for i in range(10):  # more changes than the log holds
            store.put("configmaps", configmap(f"c{i}", "green", str(i)), namespaced=True)
        assert colors(pool, hook) == {f"c{i}": "green" for i in range(10)}
    finally:
        pool.close()


def test_a_mirror_applies_the_changes_it_is_sent_as_the_store_made_them() -> None:
    store, mirror = ReplicaStore(), ReplicaStore()
    store.put("configmaps", configmap("a", "red", "1"), namespaced=True)
    store.put("configmaps", configmap("b", "blue", "2"), namespaced=True)
    store.put("configmaps", configmap("a", "crimson", "3"), namespaced=True)
    store.remove("configmaps", "team", "b", namespaced=True)
    mirror.apply(decode_changes(encode_changes(store.changes_since(0) or [])))
    assert mirror.document == store.document
    store.remove("configmaps", "team", "a", namespaced=True)  # the namespace empties: removed whole
    mirror.apply(decode_changes(encode_changes(store.changes_since(4) or [])))
    assert mirror.document == store.document == {"configmaps": {}}
