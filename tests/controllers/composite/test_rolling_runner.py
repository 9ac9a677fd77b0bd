"""Rolling updates at run time: revisions are written through the actuator before a child moves."""

from __future__ import annotations

from typing import Any

from regokite.controllers.composite.rolling import CHILDREN_ANNOTATION
from regokite.engine import UNDEFINED
from tests.controllers.test_sync_reconciler import CMS, THINGS, cluster, composite_runner, relist, thing_policy
from tests.kube_api.fake import ScriptedEngine

REVISIONS = "/apis/apps/v1/namespaces/ns/controllerrevisions"


def test_the_first_sync_records_a_revision_and_a_change_moves_the_child_to_the_next() -> None:
    kube = cluster().serve("apps/v1", "controllerrevisions", "ControllerRevision")
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {"v": "1"}})
    runner = composite_runner(
        kube, ScriptedEngine(thing_policy), rules=("children", "status"), update_method="RollingInPlace"
    )
    relist(runner.manager)
    runner.reconcile("ns", "p")
    relist(runner.manager)
    runner.reconcile("ns", "p")  # the child now exists: it is recorded at the first revision
    [first] = [o for k, o in kube.objects.items() if k[1] == "controllerrevisions"]
    assert "ConfigMap" in first["metadata"]["annotations"][CHILDREN_ANNOTATION]
    assert first["metadata"]["ownerReferences"][0]["name"] == "p"
    parent = kube.stored(f"{THINGS}/p")
    kube.put(THINGS, {**parent, "spec": {"v": "2"}})
    relist(runner.manager)
    runner.reconcile("ns", "p")
    assert kube.stored(f"{CMS}/p")["data"] == {"v": "2"}
    assert len([k for k in kube.objects if k[1] == "controllerrevisions"]) >= 1


def two_maps(ref: str, input: Any) -> Any:
    """Children p-2 then p-10 (the order a rollout takes, not the names' order), each holding the spec."""
    spec = input["parent"]["spec"]
    if ref == "data.things.children":
        return [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": spec} for n in ("p-2", "p-10")
        ]
    if ref == "data.things.status":
        return {"seen": len(input["children"]["ConfigMap.v1"])}
    return UNDEFINED


def updated(kube) -> dict:
    [cond] = [c for c in kube.stored(f"{THINGS}/p")["status"]["conditions"] if c["type"] == "Updated"]
    return {k: cond[k] for k in ("status", "reason", "message")}


def test_a_child_whose_cache_is_behind_its_update_holds_the_rollout_back() -> None:
    kube = cluster().serve("apps/v1", "controllerrevisions", "ControllerRevision")
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {"v": "1"}})
    runner = composite_runner(
        kube, ScriptedEngine(two_maps), rules=("children", "status"), update_method="RollingInPlace"
    )
    for _ in range(2):
        relist(runner.manager)
        runner.reconcile("ns", "p")
    assert updated(kube)["reason"] == "OnLatestRevision"
    before = kube.stored(f"{CMS}/p-2")
    kube.put(THINGS, {**kube.stored(f"{THINGS}/p"), "spec": {"v": "2"}})
    relist(runner.manager)
    runner.reconcile("ns", "p")  # the hook's first child moves first (Metacontroller's order)
    assert [kube.stored(f"{CMS}/{n}")["data"] for n in ("p-2", "p-10")] == [{"v": "2"}, {"v": "1"}]
    assert updated(kube) == {"status": "False", "reason": "RolloutProgressing", "message": "updating ConfigMap p-2"}
    kube.put(CMS, before)  # what a child cache still holds before the update's watch event arrives
    relist(runner.manager)
    runner.reconcile("ns", "p")
    assert kube.stored(f"{CMS}/p-10")["data"] == {"v": "1"}
    assert updated(kube) == {
        "status": "False",
        "reason": "RolloutWaiting",
        "message": "child ConfigMap p-2 is not updated yet",
    }
    for _ in range(3):
        relist(runner.manager)
        runner.reconcile("ns", "p")
    assert [kube.stored(f"{CMS}/{n}")["data"] for n in ("p-2", "p-10")] == [{"v": "2"}, {"v": "2"}]
    assert updated(kube)["reason"] == "OnLatestRevision"
    assert kube.stored(f"{THINGS}/p")["status"]["seen"] == 2  # the hook's own status is kept beside it
