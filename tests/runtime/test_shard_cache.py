"""Caches of only this replica's share: the filter, the informer's load and prune, and that a replica
acts on a view only once the objects it gains (parents and children) are in its caches."""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest

from regokite.kube.informer import Informer, InformerFactory
from regokite.runtime.leader import LeaderSettings
from regokite.runtime.shard_cache import OWNER, OWNER_CLUSTER, SELF, ShardCache, ShareFilter, owner_role, share_key
from regokite.runtime.shards import Shards, Verdict, object_key, owner
from tests.clocks import ManualClock
from tests.kube_api.fake import FakeKube
from tests.waiting import wait_until

PARENTS = "/api/v1/namespaces/team/configmaps"  # the parents (role SELF)
CHILDREN = "/api/v1/namespaces/team/secrets"  # their children (role OWNER)
NAMES = [f"p-{i}" for i in range(60)]


def parent(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def child(name: str, of: str | None) -> dict:
    meta: dict = {"name": name}
    if of is not None:
        meta["ownerReferences"] = [{"kind": "ConfigMap", "name": of, "uid": f"uid-{of}", "controller": True}]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta}


def mine(identity: str, view: list[str]) -> set[str]:
    return {n for n in NAMES if owner(object_key("team", n), view) == identity}


def test_the_share_key_is_the_object_or_its_controller_and_orphans_are_kept_whole() -> None:
    obj = child("c", "p-1")
    obj["metadata"]["namespace"] = "team"
    assert share_key(SELF, obj) == ("team", "c")
    assert share_key(OWNER, obj) == ("team", "p-1")
    assert share_key(OWNER_CLUSTER, obj) == ("", "p-1")
    assert share_key(OWNER, child("o", None)) is None
    assert owner_role({True}) == OWNER and owner_role({False}) == OWNER_CLUSTER and owner_role({True, False}) is None
    f = ShareFilter("a")
    assert not f.opened.is_set() and not f.keeps(SELF, obj)  # nothing before the first view
    f.widen((), ["a", "b"])
    assert f.opened.is_set()
    ours, theirs = sorted(mine("a", ["a", "b"])), sorted(mine("b", ["a", "b"]))
    assert f.keeps(OWNER, {**child("x", ours[0]), "metadata": {**child("x", ours[0])["metadata"], "namespace": "team"}})
    assert not f.keeps(SELF, {"metadata": {"namespace": "team", "name": theirs[0]}})
    assert f.keeps(OWNER, child("orphan", None))
    f.widen(["a", "b"], ["a"])  # a hand-over: what either view gives us
    assert f.keeps(SELF, {"metadata": {"namespace": "team", "name": theirs[0]}})
    f.narrow(["a", "b"])
    assert not f.keeps(SELF, {"metadata": {"namespace": "team", "name": theirs[0]}})


def test_load_adds_the_gained_objects_when_a_relist_under_the_old_filter_lands_during_it() -> None:
    """A watch's 410 relist that listed before the filter widened, and replaced the cache while the load
    listed: the load must still add what was gained (it once took any relist meanwhile for a wider one)."""
    kube = FakeKube()
    for i, name in enumerate(NAMES):
        kube.put(CHILDREN, child(f"c-{i}", name))
    inf, share = filtered(kube, "a", ["a", "b"])
    inf._relist()
    before = share.generation
    share.widen(["a", "b"], ["a"])
    listing = kube.get

    def relisted_meanwhile(path: str, **query: object) -> object:
        with inf._lock:  # what _relist records once its list, made under the filter before, is in the cache
            inf.relists += 1
            inf._relisted_under = before
        return listing(path, **query)

    kube.get = relisted_meanwhile  # type: ignore[method-assign]
    inf.load()
    kube.get = listing  # type: ignore[method-assign]
    assert {o["metadata"]["name"] for o in inf.list()} == {f"c-{NAMES.index(n)}" for n in mine("a", ["a"])}


def filtered(kube: FakeKube, identity: str, view: list[str]) -> tuple[Informer, ShareFilter]:
    share = ShareFilter(identity)
    share.widen((), view)
    inf = Informer(kube, "v1", "secrets", share_role=OWNER)  # type: ignore[arg-type]
    inf.share = share
    return inf, share


def test_an_informer_holds_only_its_share_and_hears_of_a_child_that_leaves_it() -> None:
    kube = FakeKube()
    kube.page_size = 7
    ours, theirs = sorted(mine("a", ["a", "b"])), sorted(mine("b", ["a", "b"]))
    for i, name in enumerate(NAMES):
        kube.put(CHILDREN, child(f"c-{i}", name))
    kube.put(CHILDREN, child("orphan", None))
    inf, _ = filtered(kube, "a", ["a", "b"])
    seen: list[tuple[str, str | None, str | None]] = []
    inf.add_handler(
        lambda e, new, old: seen.append((e, new and new["metadata"]["name"], old and old["metadata"]["name"]))
    )
    inf._relist()
    owners = {(o["metadata"].get("ownerReferences") or [{}])[0].get("name") for o in inf.list()}
    assert owners == {*ours, None} and len(inf) == len(ours) + 1
    seen.clear()
    name = f"c-{NAMES.index(ours[0])}"
    moved = copy.deepcopy(inf.get("team", name))
    moved["metadata"]["ownerReferences"][0]["name"] = theirs[0]  # another parent (of b's) controls it now
    moved["metadata"]["resourceVersion"] = "900"
    other = child("c-new", theirs[1]) | {"metadata": {**child("c-new", theirs[1])["metadata"], "namespace": "team"}}
    kube.script_watch(("MODIFIED", moved), ("ADDED", other), ("DELETED", other))
    inf._watch()
    assert inf.get("team", name) is None and inf.get("team", "c-new") is None
    assert seen == [("MODIFIED", name, name)]  # the old owner's parent is requeued; b's events pass silently


def test_load_adds_the_gained_objects_but_not_one_the_watch_deleted_meanwhile_nor_an_older_event() -> None:
    kube = FakeKube()
    for i, name in enumerate(NAMES):
        kube.put(CHILDREN, child(f"c-{i}", name))
    inf, share = filtered(kube, "a", ["a", "b"])
    inf._relist()
    gained = sorted(mine("a", ["a"]) - mine("a", ["a", "b"]))
    deleted = f"c-{NAMES.index(gained[0])}"
    stale = f"c-{NAMES.index(gained[1])}"
    share.widen(["a", "b"], ["a"])
    listing = kube.get

    def get_then_watch(path: str, **query: object) -> object:
        page = listing(path, **query)  # the list is taken; the watch then brings the deletion of one it holds
        gone = {
            **kube.stored(f"{CHILDREN}/{deleted}"),
            "metadata": {**kube.stored(f"{CHILDREN}/{deleted}")["metadata"]},
        }
        gone["metadata"]["resourceVersion"] = str(int(page["metadata"]["resourceVersion"]) + 1)  # type: ignore[index]
        inf._apply({"type": "DELETED", "object": gone})
        return page

    kube.get = get_then_watch  # type: ignore[method-assign]
    inf.load()
    kube.get = listing  # type: ignore[method-assign]
    names = {o["metadata"]["name"] for o in inf.list()}
    assert deleted not in names and stale in names
    assert names == {f"c-{NAMES.index(n)}" for n in mine("a", ["a"])} - {deleted}
    older = kube.stored(f"{CHILDREN}/{stale}")
    older["metadata"]["resourceVersion"] = "1"  # an event from before the list: not applied over it
    older["data"] = {"v": "old"}
    inf._apply({"type": "MODIFIED", "object": older})
    assert "data" not in inf.get("team", stale)
    share.narrow(["a"])
    assert inf.prune() == 0
    share.narrow(["a", "b"])
    assert inf.prune() == len(gained) - 1 and len(inf) == len(mine("a", ["a", "b"]))


def test_informers_wait_for_the_first_view_and_the_factory_does_not_wait_for_them() -> None:
    kube = FakeKube()
    assert InformerFactory(kube).informer("v1", "secrets", share=OWNER).share_role is None  # type: ignore[arg-type]
    factory = InformerFactory(kube, sharded=True)  # type: ignore[arg-type]
    whole = factory.informer("v1", "secrets")
    part = factory.informer("v1", "secrets", share=OWNER)
    assert whole is not part  # read both ways: two informers
    share = ShareFilter("a")
    factory.use_share(share)
    assert factory.filtered() == [part] and whole.share is None
    whole._relist()
    assert factory.wait_synced(0.1)  # the filtered one lists only once a view is published
    part.start()
    with pytest.raises(TimeoutError):
        part.load(timeout=0.3)  # no view yet: it has not listed
    assert not part.synced.is_set() and ("GET", "/api/v1/secrets") not in kube.calls[1:]
    share.widen((), ["a"])
    wait_until(part.synced.is_set, what="the first list once the view is out")
    part.stop()


# -- Shards acting only on what is loaded


def replica(kube: FakeKube, identity: str) -> tuple[Shards, InformerFactory]:
    settings = LeaderSettings(name="ctl", namespace="ns", identity=identity, retry_period=0.05)
    shards = Shards(kube, settings, clock=ManualClock())  # type: ignore[arg-type]
    cache = ShardCache(identity)
    shards.cache = cache
    factory = InformerFactory(kube, sharded=True)  # type: ignore[arg-type]
    parents = factory.informer("v1", "configmaps", share=SELF)
    factory.informer("v1", "secrets", share=OWNER)
    factory.use_share(cache.filter)
    cache.attach(factory)
    factory.start()
    shards.keys = parents.keys
    return shards, factory


@pytest.fixture
def cluster() -> Iterator[FakeKube]:
    kube = FakeKube()
    for i, name in enumerate(NAMES):
        kube.put(PARENTS, parent(name))
        kube.put(CHILDREN, child(f"c-{i}", name))
    kube.put(CHILDREN, child("orphan", None))
    yield kube


def held(factory: InformerFactory) -> tuple[set[str], set[str]]:
    parents, children = factory.filtered()
    kids = {(o["metadata"].get("ownerReferences") or [{"name": None}])[0]["name"] for o in children.list()}
    return {o["metadata"]["name"] for o in parents.list()}, kids - {None}


def two_replicas(kube: FakeKube) -> tuple[Shards, InformerFactory, Shards, InformerFactory]:
    """Replicas a and b, agreed on the view [a, b]."""
    a, fa = replica(kube, "a")
    b, fb = replica(kube, "b")
    for _ in range(3):
        a.tick(), b.tick()
    return a, fa, b, fb


def test_a_replica_acts_on_gained_objects_only_after_they_and_their_children_are_in_its_caches(cluster) -> None:
    a, fa, b, fb = two_replicas(cluster)
    try:
        assert held(fa) == (mine("a", ["a", "b"]),) * 2 and held(fb) == (mine("b", ["a", "b"]),) * 2
        assert all(len(f.filtered()[1].orphans("team")) == 1 for f in (fa, fb))  # orphans: whole
        gained = mine("a", ["a"]) - mine("a", ["a", "b"])
        during: list[tuple[Verdict, bool]] = []
        loading = ShardCache.load

        def load(self: ShardCache, stopped) -> None:  # type: ignore[no-untyped-def]
            during.append((a.begin("team", min(gained)), min(gained) in held(fa)[0]))
            loading(self, stopped)

        resynced: list[tuple[set[str], tuple[set[str], set[str]]]] = []
        a.on_view_change.append(lambda only: resynced.append(({n for n in NAMES if only("team", n)}, held(fa))))
        ShardCache.load = load  # type: ignore[method-assign]
        try:
            b.release()
            a.tick()
        finally:
            ShardCache.load = loading  # type: ignore[method-assign]
        assert during == [(Verdict.OTHER, False)]  # loading: not acted on, not in yet
        (keys, (parents, children)), *_ = resynced
        assert gained <= keys and keys <= parents and gained <= children  # queued only once they are in
        assert held(fa) == (set(NAMES), set(NAMES)) and a.begin("team", min(gained)) is Verdict.MINE
        a.end()
    finally:
        for f in (fa, fb):
            f.stop()


def test_a_replica_drops_what_it_gave_away_and_a_newcomer_loads_its_share_first(cluster) -> None:
    kube = cluster
    a, fa = replica(kube, "a")
    try:
        a.tick(), a.tick()
        assert held(fa) == (set(NAMES), set(NAMES))
        c, fc = replica(kube, "c")
        try:
            at_start: list[tuple[set[str], set[str]]] = []
            c.on_view_change.append(lambda only: at_start.append(held(fc)))
            c.tick()  # c's first view: its caches list before it acts
            assert at_start == [(mine("c", ["a", "c"]),) * 2] and c.may_act()
            loads: list[object] = []
            a.cache.load = loads.append  # type: ignore[union-attr,method-assign]
            a.tick()  # a gives c's share away: nothing in flight, then drops it from its caches
            assert loads == []  # a member joined: a gains nothing, so it lists nothing
            assert held(fa) == (mine("a", ["a", "c"]),) * 2
            assert len(fa.filtered()[1].orphans("team")) == 1
        finally:
            fc.stop()
    finally:
        fa.stop()


def test_a_share_that_cannot_be_loaded_is_not_acted_on_and_the_old_one_still_is(cluster) -> None:
    """A resource that cannot be listed (a CRD deleted, RBAC revoked) must not stop the replica acting on the
    share it holds whole: it claims the old view again, is not ready, and tries the load each round."""
    a, fa, b, fb = two_replicas(cluster)
    try:
        b.release()
        parents = fa.filtered()[0]

        def unreachable() -> None:
            raise ConnectionError("the API server did not answer")

        parents.load = unreachable  # type: ignore[method-assign]
        a.tick()
        del parents.load
        assert a.may_act() and a.describe()["view"] == ["a", "b"] and not a.ready()
        assert held(fa)[0] == mine("a", ["a", "b"])  # the part loaded is dropped again
        kept, gained = min(mine("a", ["a", "b"])), min(set(NAMES) - mine("a", ["a", "b"]))
        assert a.begin("team", kept) is Verdict.MINE and a.begin("team", gained) is Verdict.OTHER
        a.end()
        a.tick()
        assert a.may_act() and a.describe()["view"] == ["a"] and held(fa) == (set(NAMES), set(NAMES)) and a.ready()
    finally:
        for f in (fa, fb):
            f.stop()
