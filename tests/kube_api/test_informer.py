"""Informers: the relist turns the difference into events, the watch resumes and relists on 410, indices."""

from __future__ import annotations

import pytest

from regokite.kube.client import ApiError
from regokite.kube.informer import Gone, Informer, InformerFactory
from tests.kube_api.fake import FakeKube
from tests.waiting import wait_until

CMS = "/api/v1/namespaces/ns/configmaps"


def cm(name: str, owner: str | None = None, **data: str) -> dict:
    meta: dict = {"name": name}
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def informer(kube: FakeKube) -> tuple[Informer, list[tuple[str, str | None, str | None]]]:
    inf = Informer(kube, "v1", "configmaps")  # type: ignore[arg-type]
    seen: list[tuple[str, str | None, str | None]] = []
    inf.add_handler(lambda e, new, old: seen.append((e, new and new["data"].get("v"), old and old["data"].get("v"))))
    return inf, seen


def test_a_relist_notifies_exactly_what_changed_while_away() -> None:
    kube = FakeKube()
    kube.page_size = 2  # the list comes in pages
    for name in ("keep", "change", "drop"):
        kube.put(CMS, cm(name, v="1"))
    inf, seen = informer(kube)
    inf._relist()
    assert sorted(seen) == [("ADDED", "1", None)] * 3 and inf.synced.is_set()
    seen.clear()
    kube.put(CMS, cm("change", v="2"))
    kube.put(CMS, cm("new", v="3"))
    kube.delete(f"{CMS}/drop")
    kube.fail("GET", "/api/v1/configmaps", 410, after=1)  # a continuation that expired mid-list starts the list again
    inf._relist()
    assert sorted(seen) == [("ADDED", "3", None), ("DELETED", None, "1"), ("MODIFIED", "2", "1")]
    assert sorted(o["metadata"]["name"] for o in inf.list("ns")) == ["change", "keep", "new"]


def test_the_watch_delivers_in_order_follows_bookmarks_and_relists_after_410() -> None:
    kube = FakeKube()
    inf, seen = informer(kube)
    inf._relist()
    a1 = {**cm("a", v="1"), "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "10"}}
    a2 = {**cm("a", v="2"), "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "11"}}
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}
    kube.script_watch(("ADDED", a1), ("MODIFIED", a2), bookmark, ("DELETED", a2))
    inf._watch()
    assert seen == [("ADDED", "1", None), ("MODIFIED", "2", "1"), ("DELETED", None, "2")]
    assert inf.resource_version == "11" and inf.get("ns", "a") is None
    kube.script_watch({"type": "ERROR", "object": {"code": 410}})
    with pytest.raises(Gone):
        inf._watch()
    kube.script_watch(ApiError(410, "Gone", {}, "WATCH"))
    with pytest.raises(Gone):
        inf._watch()


def test_objects_are_indexed_by_controller_and_as_orphans_and_trimmed() -> None:
    kube = FakeKube()
    kube.put(CMS, cm("owned", owner="p1"))
    kube.put(CMS, {**cm("free"), "metadata": {"name": "free", "managedFields": [{"manager": "x"}]}})
    inf, _ = informer(kube)
    inf._relist()
    assert [o["metadata"]["name"] for o in inf.owned_by("p1")] == ["owned"]
    assert [o["metadata"]["name"] for o in inf.orphans("ns")] == ["free"]
    assert "managedFields" not in inf.get("ns", "free")["metadata"]
    released = {**cm("owned"), "metadata": {"name": "owned", "namespace": "ns", "resourceVersion": "99"}}
    kube.script_watch(("MODIFIED", released))
    inf._watch()
    assert inf.owned_by("p1") == [] and len(inf.orphans("ns")) == 2


def test_the_factory_shares_one_informer_per_resource_namespace_and_selector() -> None:
    factory = InformerFactory(FakeKube(), namespace="team")  # type: ignore[arg-type]
    a = factory.informer("v1", "configmaps")
    assert factory.informer("v1", "configmaps") is a
    assert factory.informer("v1", "configmaps", label_selector="x=1") is not a
    assert a.namespace == "team" and factory.informer("v1", "nodes", namespaced=False).namespace is None
    assert not factory.synced()


def test_health_says_whether_the_watch_is_connected_and_for_how_long_events_may_be_missed() -> None:
    from regokite.kube.informer import staleness

    informer = Informer(FakeKube(), "v1", "configmaps")  # type: ignore[arg-type]
    assert informer.health()["connected"] is False and informer.confirmed
    informer._disconnected()
    health = informer.health()
    assert not informer.confirmed and health["missed_events_for_seconds"] is not None
    assert staleness({"a": health, "b": {"missed_events_for_seconds": None}}) == health["missed_events_for_seconds"]
    informer._relist()
    assert informer.confirmed and informer.health()["last_event_seconds_ago"] is not None


def test_an_error_event_inside_a_200_watch_relists_and_a_watch_ended_at_once_with_nothing_is_a_failure() -> None:
    """The API server answers an expired resourceVersion with 200 and an ERROR event of code 410 (not an
    HTTP 410): relist at once; any other ERROR event relists after a backoff (as client-go's reflector);
    a watch ended within a second with nothing in it is retried with backoff, not in a hot loop."""
    from regokite.kube.informer import ErrorEvent, ShortWatch

    kube = FakeKube()
    inf, _ = informer(kube)
    inf._relist()
    kube.script_watch({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})
    with pytest.raises(Gone):
        inf._watch()
    kube.script_watch({"type": "ERROR", "object": {"kind": "Status", "code": 504, "reason": "Timeout"}})
    with pytest.raises(ErrorEvent, match="504 Timeout"):
        inf._watch()
    kube.script_watch()  # 200, then the end of the stream, no event
    with pytest.raises(ShortWatch):
        inf._watch()


def test_a_watch_resumed_from_a_resource_version_the_server_has_not_reached_relists() -> None:
    """etcd restored from a backup: the server's history is behind the informer's resourceVersion, and a
    watch from it is silent (200, no event, no bookmark, no 410) while the server drops every change up to
    it. The informer compares the server's current resourceVersion with its own and relists."""
    kube = FakeKube()
    inf, seen = informer(kube)
    inf._relist()
    inf.resource_version = "1000"  # from before the restore: ahead of the server's
    inf._disconnected()  # the watch failed as the API server went away
    kube.put(CMS, cm("made-after-the-restore", v="1"))
    for _ in range(50):
        kube.script_watch()  # each resumed watch: 200, then nothing
    inf.start()
    try:  # the relist counts itself before it notifies: wait on the event it brings, not on the count
        wait_until(lambda: ("ADDED", "1", None) in seen, what="the relist's ADDED event")
    finally:
        inf.stop()
    assert inf.relists == 2, f"no relist: {kube.calls[-5:]}"
    assert int(inf.resource_version) < 1000


def test_a_resource_version_behind_or_not_a_number_is_not_a_reason_to_relist() -> None:
    kube = FakeKube()
    inf, _ = informer(kube)
    inf._relist()
    inf._check_not_ahead()  # the server has moved on past ours: fine
    inf.resource_version = "opaque-token"
    inf._check_not_ahead()  # not numbers: not compared
    inf.resource_version = "999999"
    with pytest.raises(Gone, match="behind ours"):
        inf._check_not_ahead()


def test_a_resumed_watch_confirms_the_cache_once_it_reaches_the_servers_version_of_the_resume() -> None:
    """After a watch failure the cache may hold objects deleted meanwhile (creates then confirm their
    parent with a GET); a resumed watch replays in order, so once it delivers an event at or past the
    server's resourceVersion of the moment it resumed, nothing missed is left: no GETs until a relist
    that may never come (a resume without 410 never relists)."""
    kube = FakeKube()
    inf, seen = informer(kube)
    kube.put(CMS, cm("a", v="1"))
    inf._relist()
    inf._disconnected()
    server_rv = inf._check_not_ahead()
    assert server_rv is not None
    inf._caught_up_at = server_rv
    before = {**cm("a", v="2"), "metadata": {"name": "a", "namespace": "ns", "resourceVersion": str(server_rv - 1)}}
    kube.script_watch(("MODIFIED", before))
    inf._watch()
    assert not inf.confirmed  # the replay has not reached the resume's version yet
    at = {**cm("a", v="3"), "metadata": {"name": "a", "namespace": "ns", "resourceVersion": str(server_rv)}}
    kube.script_watch(("MODIFIED", at))
    inf._watch()
    assert inf.confirmed and inf.relists == 1 and seen[-1] == ("MODIFIED", "3", "2")
    inf._disconnected()  # a new failure: unconfirmed again, and a bookmark alone confirms nothing then
    kube.script_watch({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(server_rv + 5)}}})
    inf._watch()
    assert not inf.confirmed
