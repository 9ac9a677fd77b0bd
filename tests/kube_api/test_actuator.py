"""The actuator, the only writer: preconditions, 404/409 handling, and every write counted once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from regokite.kube.actuator import Actuator, fold_created_fields, merge_patch_to
from regokite.kube.client import ApiError
from regokite.ops import controller_metrics as metrics
from regokite.resources import Action, ChildType, HookEvent, with_defaulted_list_keys
from tests.kube_api.fake import FakeKube

CM = ChildType("v1", "configmaps", "ConfigMap", True)
THING = ChildType("example.com/v1", "things", "Thing", True, status_subresource=True)
CMS = "/api/v1/namespaces/ns/configmaps"


def writes(controller: str, verb: str, kind: str = "ConfigMap") -> float:
    return metrics.applies.labels(controller, kind, verb)._value.get()


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube()


def test_apply_and_child_actions_are_counted_once(kube: FakeKube) -> None:
    act = Actuator(kube, "mgr")  # type: ignore[arg-type]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}}
    before = writes("t-apply", "create")
    act.execute(Action("create", CM, "ns", "a", body), controller="t-apply")
    assert kube.stored(f"{CMS}/a")["data"] == {"k": "v"}
    assert writes("t-apply", "create") == before + 1


def test_a_missing_child_is_created_with_a_post_and_one_found_there_after_all_is_applied(kube: FakeKube) -> None:
    act = Actuator(kube, "mgr")  # type: ignore[arg-type]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"k": "v"}}
    act.execute(Action("create", CM, "ns", "a", body), controller="t-post")
    assert kube.writes()[-1] == ("POST", CMS)
    body["data"] = {"k": "w"}
    act.execute(Action("create", CM, "ns", "a", body), controller="t-post")  # the cache had not seen it yet
    assert kube.writes()[-2:] == [("POST", CMS), ("PATCH", f"{CMS}/a")]  # 409 AlreadyExists, then applied
    assert kube.stored(f"{CMS}/a")["data"] == {"k": "w"}
    assert writes("t-post", "create") == 2


def test_a_creates_fields_are_folded_into_the_apply_once_an_apply_leaves_one_out() -> None:
    def entry(operation: str, fields: dict[str, Any], manager: str = "regokite", version: str = "v1") -> dict:
        return {"manager": manager, "operation": operation, "apiVersion": version, "fieldsV1": fields}

    created = entry("Update", {"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}}}})
    other = entry("Apply", {"f:data": {"f:c": {}}}, manager="kubectl")
    applied = entry("Apply", {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {}}})
    folded = fold_created_fields([created, other, applied], "regokite")
    union = {"f:data": {"f:a": {}, ".": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}}}}
    assert folded == [other, {**applied, "fieldsV1": union}]
    # the apply still sets all the create set (a map itself, ".", is no field of its own): nothing to fold
    everything = entry("Apply", {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {}}})
    assert fold_created_fields([created, everything], "regokite") is None
    # an apply of an empty map holds the map, not the keys the create set in it: they are folded
    emptied = entry("Apply", {"f:data": {}, "f:metadata": {"f:labels": {}}})
    assert fold_created_fields([created, emptied], "regokite") == [
        {**emptied, "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}}}}}
    ]
    # no create, another manager's, another version: nothing
    assert fold_created_fields([applied], "regokite") is None
    assert fold_created_fields([created, applied], "another") is None
    assert fold_created_fields([created, entry("Apply", {}, version="v2")], "regokite") is None


def test_delete_is_false_when_gone_or_replaced_and_only_real_deletes_count(kube: FakeKube) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    uid = kube.put(CMS, {"metadata": {"name": "a"}})["metadata"]["uid"]
    before = writes("t-del", "delete")
    assert act.delete(CM, "ns", "a", "another-uid", controller="t-del") is False  # replaced: 409 on the precondition
    assert act.delete(CM, "ns", "a", uid, controller="t-del") is True
    assert act.delete(CM, "ns", "a", uid, controller="t-del") is False  # 404
    assert writes("t-del", "delete") == before + 1
    kube.fail("DELETE", f"{CMS}/b", 500)
    with pytest.raises(ApiError):
        act.delete(CM, "ns", "b", None, controller="t-del")


def test_a_patch_is_made_as_of_the_version_read(kube: FakeKube) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    seen = kube.put(CMS, {"metadata": {"name": "a"}, "data": {"n": "1"}})
    kube.put(CMS, {"metadata": {"name": "a"}, "data": {"n": "2"}})  # changed since it was read
    with pytest.raises(ApiError) as merge:
        act.patch(CM, seen, {"data": {"n": "3"}}, controller="t")
    with pytest.raises(ApiError) as json_patch:
        act.patch(CM, seen, [{"op": "replace", "path": "/data/n", "value": "3"}], controller="t")
    assert (merge.value.status, json_patch.value.status) == (409, 422)
    fresh = act.read(CM, "ns", "a")
    assert act.patch(CM, fresh, {"data": {"n": "3"}}, controller="t")["data"] == {"n": "3"}
    assert act.read(CM, "ns", "gone") is None


def test_status_goes_through_the_subresource_and_finalizers_and_owners_are_guarded(kube: FakeKube) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    parent = kube.put("/apis/example.com/v1/namespaces/ns/things", {"metadata": {"name": "p"}})
    parent = act.set_status(THING, parent, {"ready": True}, controller="t")
    assert ("PATCH", "/apis/example.com/v1/namespaces/ns/things/p/status") in kube.calls
    before = writes("t-fin", "add-finalizer", "Thing")
    parent = act.set_finalizers(THING, parent, ["regokite.dev/x"], controller="t-fin")
    assert writes("t-fin", "add-finalizer", "Thing") == before + 1
    done = [HookEvent("Normal", "Done", "ok")]
    act.finish(THING, parent, done, finalizer="regokite.dev/x", release=True, controller="t")
    stored = kube.stored("/apis/example.com/v1/namespaces/ns/things/p")
    assert "finalizers" not in stored["metadata"] and stored["status"] == {"ready": True}
    assert [e["reason"] for e in kube.events] == ["Done"]
    child = kube.put(CMS, {"metadata": {"name": "c"}})
    kube.put(CMS, {"metadata": {"name": "c", "uid": child["metadata"]["uid"]}})
    with pytest.raises(ApiError, match="409"):  # adopting an object that changed since it was read
        act.set_owner_references(CM, child, [{"uid": "p"}], controller="t", verb="adopt")


def test_events_repeat_at_most_once_a_minute_and_never_fail_a_sync(kube: FakeKube) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns", "uid": "u"}}
    act.event(obj, "Warning", "Bad", "same")
    act.event(obj, "Warning", "Bad", "same")
    act.event(obj, "Warning", "Bad", "other")
    assert [e["message"] for e in kube.events] == ["same", "other"]

    def refuse(method: str, path: str) -> None:
        raise ApiError(0, "NotLeader", {}, f"{method} {path}")

    kube.write_guard = refuse
    act.event(obj, "Warning", "Bad", "third")  # logged, not raised


def test_a_repeated_event_is_aggregated_its_count_growing(kube: FakeKube, monkeypatch: pytest.MonkeyPatch) -> None:
    import regokite.kube.actuator as actuator

    patches: list[tuple[str, dict]] = []
    kube.request = lambda method, path, body=None, **_: {"metadata": {"name": "a.1"}}  # type: ignore[method-assign]
    kube.patch = lambda path, body, *_, **__: patches.append((path, body)) or {}  # type: ignore[method-assign]
    act = Actuator(kube)  # type: ignore[arg-type]
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns", "uid": "u"}}
    for _ in range(5):
        act.event(obj, "Warning", "SyncError", "etcd is away")
    assert patches == []  # within the minute: counted, not written
    monkeypatch.setattr(actuator, "EVENT_REPEAT_SECONDS", 0.0)
    act.event(obj, "Warning", "SyncError", "etcd is away")
    assert patches[-1][0] == "/api/v1/namespaces/ns/events/a.1" and patches[-1][1]["count"] == 6


def test_a_plans_writes_go_out_together_and_a_failure_stops_none_of_the_others(kube: FakeKube) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    body = lambda n: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "ns"}}  # noqa: E731
    kube.fail("PATCH", f"{CMS}/b", 500, "etcd is away")
    actions = [Action("update", CM, "ns", n, body(n)) for n in "abcd"]
    with pytest.raises(ApiError, match="etcd is away"):
        act.execute_all(actions, controller="t-all")
    assert [n for n in "abcd" if kube.stored(f"{CMS}/{n}")] == ["a", "c", "d"]  # as Metacontroller: the rest done
    act.execute_all([Action("update", CM, "ns", "b", body("b"))], controller="t-all")  # the next sync
    assert kube.stored(f"{CMS}/b") is not None


def test_a_plans_first_write_is_made_by_the_syncing_thread_the_rest_at_once_beside_it(kube: FakeKube) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    body = lambda n: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "ns"}}  # noqa: E731
    writers: dict[str, threading.Thread] = {}
    others_started = threading.Barrier(3, timeout=10)  # b and c are written while a's write waits for them
    real_apply = act.apply

    def apply(t: ChildType, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        writers[obj["metadata"]["name"]] = threading.current_thread()
        others_started.wait()
        return real_apply(t, obj, **kw)

    act.apply = apply  # type: ignore[method-assign]
    act.execute_all([Action("update", CM, "ns", n, body(n)) for n in "abc"], controller="t-inline")
    assert writers["a"] is threading.current_thread()
    assert threading.current_thread() not in (writers["b"], writers["c"]) and writers["b"] is not writers["c"]
    kube.fail("PATCH", f"{CMS}/d", 500, "etcd is away")  # the calling thread's write fails: the others still go
    with pytest.raises(ApiError, match="etcd is away"):
        act.execute_all([Action("update", CM, "ns", n, body(n)) for n in "def"], controller="t-inline")
    assert [n for n in "def" if kube.stored(f"{CMS}/{n}")] == ["e", "f"]


def test_apply_fills_in_the_port_protocol_server_side_apply_keys_by(kube: FakeKube) -> None:
    """A hook written for Metacontroller leaves `protocol` out; the API server refuses such an apply."""
    act = Actuator(kube)  # type: ignore[arg-type]
    svc_type = ChildType("v1", "services", "Service", True)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]},
    }
    act.apply(svc_type, service, controller="t")
    assert kube.stored("/api/v1/namespaces/ns/services/web")["spec"]["ports"] == [
        {"port": 80, "protocol": "TCP"},
        {"port": 53, "protocol": "UDP"},
    ]
    assert "protocol" not in service["spec"]["ports"][0]  # the hook's answer is left as it was


def test_container_ports_get_their_protocol_in_every_pod_spec() -> None:
    container = {"name": "c", "ports": [{"containerPort": 80}]}
    tcp = [{"containerPort": 80, "protocol": "TCP"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "spec": {"initContainers": [container], "containers": [container]}}
    out = with_defaulted_list_keys(pod)
    assert [c["ports"] for c in out["spec"]["containers"] + out["spec"]["initContainers"]] == [tcp, tcp]
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [container]}}}}},
    }
    assert (
        with_defaulted_list_keys(cronjob)["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["ports"]
        == tcp
    )
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    assert with_defaulted_list_keys(replica_set)["spec"]["template"]["spec"]["containers"][0]["ports"] == tcp
    assert container == {"name": "c", "ports": [{"containerPort": 80}]}


def test_objects_with_nothing_to_default_are_passed_as_they_are() -> None:
    complete = {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80, "protocol": "TCP"}]}}
    custom = {"apiVersion": "example.com/v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}
    malformed = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": "nope"}}
    for obj in (complete, custom, malformed, {"apiVersion": "v1", "kind": "ConfigMap"}):
        assert with_defaulted_list_keys(obj) is obj


def test_a_status_written_as_read_replaces_it_whole_and_is_refused_on_a_stale_parent(kube: FakeKube) -> None:
    """A status computed from a parent read before the last status write must not overwrite it:
    an edge-triggered hook would lose the transition it recorded (Metacontroller's UpdateStatus
    answers 409 there too)."""
    act = Actuator(kube)  # type: ignore[arg-type]
    stale = kube.put("/apis/example.com/v1/namespaces/ns/things", {"metadata": {"name": "p"}})
    recorded = {"conditions": [{"type": "effective"}], "seen": {"a": 1, "b": 2}}
    fresh = act.set_status(THING, stale, recorded, controller="t", as_read=True)
    with pytest.raises(ApiError, match="409"):
        act.set_status(THING, stale, {"conditions": []}, controller="t", as_read=True)
    assert kube.stored("/apis/example.com/v1/namespaces/ns/things/p")["status"] == recorded
    act.set_status(THING, fresh, {"seen": {"a": 1}}, controller="t", as_read=True)
    assert kube.stored("/apis/example.com/v1/namespaces/ns/things/p")["status"] == {"seen": {"a": 1}}


def test_merge_patch_to_turns_the_old_document_into_the_new() -> None:
    old = {"a": 1, "m": {"x": 1, "y": [1]}, "gone": {"z": 1}}
    new = {"a": 2, "m": {"y": [2]}, "n": {"k": "v"}}
    assert merge_patch_to(old, new) == {"a": 2, "m": {"x": None, "y": [2]}, "n": {"k": "v"}, "gone": None}
    assert merge_patch_to(None, new) == new


def add_entry(entry: dict) -> Any:
    """A `change` for update_status: this writer's entry of status.byPod, the others' kept."""

    def change(current: Mapping[str, Any]) -> dict | None:
        by_pod = [p for p in (current.get("status") or {}).get("byPod", []) if p["id"] != entry["id"]]
        return None if entry in (current.get("status") or {}).get("byPod", []) else {"byPod": [*by_pod, entry]}

    return change


def test_a_shared_status_is_written_over_the_version_read_and_again_over_a_fresh_one_on_a_conflict(
    kube: FakeKube,
) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    listed = kube.put("/apis/example.com/v1/namespaces/ns/things", {"metadata": {"name": "p"}})
    path = "/apis/example.com/v1/namespaces/ns/things/p"
    kube.patch(f"{path}/status", {"status": {"byPod": [{"id": "audit"}]}})  # another writer's, since the list
    written = act.update_status(THING, listed, add_entry({"id": "webhook"}), controller="t")
    assert written["status"]["byPod"] == [{"id": "audit"}, {"id": "webhook"}]
    assert kube.calls[-3:] == [("PATCH", f"{path}/status"), ("GET", path), ("PATCH", f"{path}/status")]
    calls = len(kube.calls)
    assert act.update_status(THING, written, add_entry({"id": "webhook"}), controller="t") == written
    assert len(kube.calls) == calls  # already so: nothing written


def test_a_shared_status_changed_under_each_write_is_given_up_loudly(
    kube: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    act = Actuator(kube)  # type: ignore[arg-type]
    kube.put("/apis/example.com/v1/namespaces/ns/things", {"metadata": {"name": "p"}})
    status = "/apis/example.com/v1/namespaces/ns/things/p/status"
    for _ in range(3):
        kube.fail("PATCH", status, 409)
    with caplog.at_level(logging.WARNING, logger="regokite.controller"), pytest.raises(ApiError, match="409"):
        act.update_status(THING, {"metadata": {"name": "p", "namespace": "ns"}}, add_entry({"id": "a"}),
                          controller="t", read_first=True)  # fmt: skip
    [given_up] = [r for r in caplog.records if r.getMessage().startswith("status not written")]
    assert given_up.writes == 3 and given_up.path.endswith("/things/p")  # type: ignore[attr-defined]
    kube.fail("PATCH", status, 409)
    kube.fail("GET", "/apis/example.com/v1/namespaces/ns/things/p", 503)
    with pytest.raises(ApiError, match="503"):  # the read again failing: raised, not swallowed
        act.update_status(THING, kube.stored(status), add_entry({"id": "a"}), controller="t")
