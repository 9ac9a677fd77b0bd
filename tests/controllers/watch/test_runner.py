"""A Watch at run time: every change delivered in order, at most 64 waiting per object (later changes
merged), stale decisions dropped, apply and delete through the actuator."""

from __future__ import annotations

from typing import Any

from regokite.controllers.hooks import LocalHooks, ResolvedHook
from regokite.controllers.schema import HookTarget
from regokite.controllers.watch import decisions as contract
from regokite.controllers.watch.runner import MAX_PENDING, WatchRunner
from regokite.engine import UNDEFINED
from regokite.kube.actuator import Actuator
from regokite.kube.discovery import Discovery
from regokite.ops import controller_metrics as metrics
from regokite.runtime.manager import Manager
from tests.kube_api.fake import FakeKube, ScriptedEngine

CMS = "/api/v1/namespaces/ns/configmaps"


def cm(rv: int, **data: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": str(rv)},
        "data": data,
    }


def runner(kube: FakeKube, decide) -> tuple[WatchRunner, ScriptedEngine]:
    kube.serve("v1", "configmaps", "ConfigMap")
    engine = ScriptedEngine(decide)
    watch = contract.Watch(name="w", resource=contract.WatchResource("v1", "configmaps"), package="w")
    hook = ResolvedHook(HookTarget("w"), rules=contract.OUTPUTS)
    r = WatchRunner(
        watch,
        manager=Manager(kube),  # type: ignore[arg-type]
        evaluator=LocalHooks(engine),  # type: ignore[arg-type]
        actuator=Actuator(kube),  # type: ignore[arg-type]
        discovery=Discovery(kube),  # type: ignore[arg-type]
        hook=hook,
    )
    r.informer._relist()
    return r, engine


def delivered(engine: ScriptedEngine) -> list[tuple[str, str | None, str | None]]:
    out = []
    for ref, i in engine.seen:
        if ref.endswith(".patch"):
            old = i["oldObject"]["data"].get("v") if i["oldObject"] else None
            out.append((i["event"], i["object"]["data"].get("v"), old))
    return out


def test_every_change_of_an_object_is_delivered_in_order() -> None:
    kube = FakeKube()
    r, engine = runner(kube, lambda ref, i: UNDEFINED)
    kube.script_watch(("ADDED", cm(10, v="1")), ("MODIFIED", cm(11, v="2")), ("MODIFIED", cm(12, v="3")))
    r.informer._watch()
    assert r.pending() == 3
    r.reconcile("ns", "a")
    assert delivered(engine) == [("ADDED", "1", None), ("MODIFIED", "2", "1"), ("MODIFIED", "3", "2")]
    assert r.pending() == 0


def test_beyond_64_waiting_changes_the_latest_are_merged_into_one() -> None:
    kube = FakeKube()
    r, engine = runner(kube, lambda ref, i: UNDEFINED)
    changes = [("ADDED", cm(10, v="0"))] + [("MODIFIED", cm(10 + n, v=str(n))) for n in range(1, 100)]
    kube.script_watch(*changes)
    r.informer._watch()
    assert r.pending() == MAX_PENDING
    r.reconcile("ns", "a")
    got = delivered(engine)
    assert got[:3] == [("ADDED", "0", None), ("MODIFIED", "1", "0"), ("MODIFIED", "2", "1")]
    assert got[-1] == ("MODIFIED", "99", "62")  # old of the first change merged, new of the last


def test_a_decision_on_a_state_that_changed_is_dropped_not_written() -> None:
    kube = FakeKube()
    stored = kube.put(CMS, cm(0, v="1"))
    r, _ = runner(
        kube, lambda ref, i: {"data": {"seen": i["object"]["data"]["v"]}} if ref == "data.w.patch" else UNDEFINED
    )
    stale = metrics.stale_writes.labels("w")._value.get()
    kube.put(CMS, {**stored, "data": {"v": "2"}})  # changed after the informer's event
    kube.script_watch(("MODIFIED", {**stored, "data": {"v": "1", "x": "y"}}))
    r.informer._watch()
    r.reconcile("ns", "a")
    assert kube.stored(f"{CMS}/a")["data"] == {"v": "2"}  # the stale decision wrote nothing
    assert metrics.stale_writes.labels("w")._value.get() == stale + 1


def test_apply_and_delete_outputs_are_written_through_the_actuator() -> None:
    kube = FakeKube()
    kube.put(CMS, {"metadata": {"name": "old"}})

    def decide(ref: str, i: dict) -> Any:
        return {
            "data.w.apply": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "copy"}, "data": {"k": "v"}}
            ],
            "data.w.delete": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "old"}],
        }.get(ref, UNDEFINED)

    r, _ = runner(kube, decide)
    kube.script_watch(("ADDED", cm(50, v="1")))
    r.informer._watch()
    r.reconcile("ns", "a")
    assert kube.stored(f"{CMS}/copy")["data"] == {"k": "v"}  # placed in the watched object's namespace
    assert kube.stored(f"{CMS}/old") is None


def test_with_shards_a_watch_records_only_its_own_objects_and_forgets_one_that_moves() -> None:
    class OnlyA:
        """A shard that owns the ConfigMap `a` alone."""

        identity = "a"
        cache = None

        def owns(self, namespace: str, name: str) -> bool:
            return name == "a"

        def may_act(self) -> bool:
            return True

        def guard(self, method: str, path: str) -> None:
            pass

    kube = FakeKube()
    r, _ = runner(kube, lambda ref, i: UNDEFINED)
    r.manager.use_shards(OnlyA())  # type: ignore[arg-type]
    other = {**cm(21, v="x"), "metadata": {"name": "b", "namespace": "ns", "resourceVersion": "21"}}
    kube.script_watch(("ADDED", cm(20, v="1")), ("ADDED", other), ("MODIFIED", cm(22, v="2")))
    r.informer._watch()
    assert r.pending() == 2 and len(r.manager.queue_of(r.name)) == 1  # b's events are its owner's
    r.resync_all()
    assert r.pending() == 2  # a RESYNC joins nothing already waiting; b is not recorded
    r.disown("ns", "a")  # a went to another replica: its waiting events are that replica's now
    assert r.pending() == 0
