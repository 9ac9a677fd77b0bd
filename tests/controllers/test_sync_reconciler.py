"""The composite and decorator runners over the in-memory API server: one sync each, the finalizer,
the conflict policy. Caches are filled by one relist; nothing runs in the background."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
import urllib3

from regokite.controllers import failing
from regokite.controllers.composite.runner import CompositeRunner
from regokite.controllers.decorator.decisions import DECORATOR_ANNOTATION, DecoratorController, TargetResource
from regokite.controllers.decorator.runner import DecoratorRunner
from regokite.controllers.definitions import ParentResource
from regokite.controllers.hooks import LocalHooks, ResolvedHook
from regokite.controllers.schema import ChildResource, Hooks, HookTarget
from regokite.engine import UNDEFINED
from regokite.errors import HookError
from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError
from regokite.kube.discovery import Discovery
from regokite.runtime.manager import Manager
from regokite.runtime.reconcile import Result
from tests.controllers.composite.configmap_runner import configmap_runner
from tests.kube_api.fake import FakeKube, ScriptedEngine

THINGS = "/apis/example.com/v1/namespaces/ns/things"
CMS = "/api/v1/namespaces/ns/configmaps"
PODS = "/api/v1/namespaces/ns/pods"


def cluster() -> FakeKube:
    kube = FakeKube()
    kube.serve("example.com/v1", "things", "Thing", status=True)
    kube.serve("v1", "configmaps", "ConfigMap").serve("v1", "pods", "Pod")
    return kube


def relist(manager: Manager) -> None:
    for inf in manager.informers.informers:
        inf._relist()


def thing_policy(ref: str, input: Any) -> Any:
    parent = input["parent"]
    if ref == "data.things.children":
        if input["finalizing"]:
            return []
        name = parent["metadata"]["name"]
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": parent["spec"]}]
    if ref == "data.things.status":
        return {"configMaps": len(input["children"]["ConfigMap.v1"])}
    if ref == "data.things.finalized":
        return input["finalizing"]
    return UNDEFINED


def composite_runner(
    kube: FakeKube,
    engine: ScriptedEngine,
    finalize: bool = False,
    rules: tuple[str, ...] = ("children", "status", "finalized"),
    update_method: str = "InPlace",
) -> CompositeRunner:
    """The `things` controller: a ConfigMap child per Thing, the hooks answered by `engine`."""
    parent = ParentResource("example.com/v1", "things")
    return configmap_runner(
        kube,
        engine,
        parent,
        name="things",
        package="things",
        rules=rules,
        update_method=update_method,
        finalize=finalize,
    )


def runner_over_p(
    engine: ScriptedEngine, spec: dict[str, str] | None = None, **options: Any
) -> tuple[FakeKube, CompositeRunner]:
    """A cluster holding the Thing `p` (in ns) and the `things` runner (composite_runner's `options`), its
    caches filled."""
    kube = cluster()
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": spec or {}})
    runner = composite_runner(kube, engine, **options)
    relist(runner.manager)
    return kube, runner


def test_one_sync_creates_children_and_writes_the_status_answered_then_nothing_is_written() -> None:
    kube, runner = runner_over_p(ScriptedEngine(thing_policy), {"v": "1"})
    assert runner.reconcile("ns", "p") == Result()
    child = kube.stored(f"{CMS}/p")
    assert child["data"] == {"v": "1"} and child["metadata"]["ownerReferences"][0]["name"] == "p"
    # as Metacontroller: the status the hook answered on the creating sync is written on that sync
    assert kube.stored(f"{THINGS}/p")["status"] == {"configMaps": 0}
    relist(runner.manager)  # the ConfigMap's watch event
    runner.reconcile("ns", "p")
    assert kube.stored(f"{THINGS}/p")["status"] == {"configMaps": 1}
    relist(runner.manager)
    writes = len(kube.writes())
    runner.reconcile("ns", "p")
    assert len(kube.writes()) == writes  # in sync: no write at all


def test_a_resync_the_hook_asks_for_is_the_sync_s_result() -> None:
    """resyncAfterSeconds comes back to the worker as the Result's requeue_after (runtime.sync_workers adds the
    key again after it); without it the Result asks for nothing."""
    kube = cluster()
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {"v": "1"}})

    def policy(ref: str, input: Any) -> Any:
        if ref == "data.things.resyncAfterSeconds":
            return 2.5 if input["parent"]["spec"]["v"] == "1" else 0
        return thing_policy(ref, input)

    runner = composite_runner(kube, ScriptedEngine(policy), rules=("children", "status", "resyncAfterSeconds"))
    relist(runner.manager)
    assert runner.reconcile("ns", "p") == Result(requeue_after=2.5)
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {"v": "2"}})
    relist(runner.manager)
    assert runner.reconcile("ns", "p") == Result()


def edge_triggered_policy(ref: str, input: Any) -> Any:
    """Records a transition only on the sync that creates the child; otherwise carries the status forward."""
    parent, observed = input["parent"], input["children"]["ConfigMap.v1"]
    desired = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": parent["metadata"]["name"]}}]
    if ref == "data.things.children":
        return desired
    if ref == "data.things.status":
        conditions = list(parent.get("status", {}).get("conditions", []))
        if len(desired) != len(observed):
            conditions.append({"type": "effective", "status": "True"})
        return {"conditions": conditions}
    return UNDEFINED


def test_an_edge_triggered_status_answered_on_the_creating_sync_is_kept() -> None:
    kube, runner = runner_over_p(ScriptedEngine(edge_triggered_policy))
    runner.reconcile("ns", "p")
    relist(runner.manager)
    runner.reconcile("ns", "p")
    assert kube.stored(f"{THINGS}/p")["status"] == {"conditions": [{"type": "effective", "status": "True"}]}


def test_a_finalize_hook_keeps_the_finalizer_until_it_answers_finalized() -> None:
    kube, runner = runner_over_p(ScriptedEngine(thing_policy), finalize=True)
    runner.reconcile("ns", "p")
    parent = kube.stored(f"{THINGS}/p")
    assert parent["metadata"]["finalizers"] == ["metacontroller.io/compositecontroller-things"]
    parent["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    kube.put(THINGS, parent)
    relist(runner.manager)
    runner.reconcile("ns", "p")
    assert "finalizers" not in kube.stored(f"{THINGS}/p")["metadata"]
    assert kube.stored(f"{CMS}/p") is None  # the finalize hook wanted no children


def fail_creating(kube: FakeKube, status: int) -> None:
    """The next create of child p answers `status`; a 409 (there already) also to the apply it turns into."""
    kube.fail("POST", CMS, status)
    if status == 409:
        kube.fail("PATCH", f"{CMS}/p", 409)


def test_conflicts_are_retried_quietly_other_errors_and_bad_hooks_are_reported() -> None:
    kube, runner = runner_over_p(ScriptedEngine(thing_policy))
    fail_creating(kube, 409)
    with pytest.raises(ApiError):
        runner.reconcile("ns", "p")
    assert kube.events == []
    fail_creating(kube, 500)
    with pytest.raises(ApiError):
        runner.reconcile("ns", "p")
    assert [e["reason"] for e in kube.events] == ["SyncError"]
    runner.evaluator = LocalHooks(ScriptedEngine(lambda ref, _: "nonsense" if ref.endswith("status") else UNDEFINED))  # type: ignore[arg-type]
    with pytest.raises(HookError):
        runner.reconcile("ns", "p")
    assert kube.events[-1]["reason"] == "InvalidHookOutput"


def hook_calls(engine: ScriptedEngine, rule: str) -> int:
    return sum(1 for ref, _ in engine.seen if ref == rule)


def test_a_status_refused_as_of_a_stale_cache_is_written_over_the_object_read_again_the_hook_asked_once() -> None:
    """The sync a child's event brings before the watch delivered the previous sync's status: its status
    meets a newer version (409) and is written again over a fresh GET, as Metacontroller's
    AtomicStatusUpdate: the hook is not asked again, no child is written again."""
    engine = ScriptedEngine(thing_policy)
    kube, runner = runner_over_p(engine)
    runner.reconcile("ns", "p")  # creates the child; status: no children observed yet
    assert kube.stored(f"{THINGS}/p")["status"]["configMaps"] == 0
    for inf in runner.children.values():
        inf._relist()  # the child's event is in, the parent's status event not yet
    stale = runner.parents.get("ns", "p")
    calls, hooks = len(kube.calls), hook_calls(engine, "data.things.status")
    assert runner.reconcile("ns", "p") == Result()
    assert kube.stored(f"{THINGS}/p")["status"] == {"configMaps": 1}
    assert hook_calls(engine, "data.things.status") == hooks + 1  # the hook saw the cached parent, once
    [(_, seen)] = [(ref, i) for ref, i in engine.seen[-3:] if ref == "data.things.status"]
    assert seen["parent"]["metadata"]["resourceVersion"] == stale["metadata"]["resourceVersion"]
    # the child applied once (in sync: not at all), the status twice (refused, then over the GET)
    assert kube.calls[calls:] == [
        ("PATCH", f"{THINGS}/p/status"),
        ("GET", f"{THINGS}/p"),
        ("PATCH", f"{THINGS}/p/status"),
    ]
    assert kube.events == []


def test_a_status_still_refused_after_every_fresh_read_is_left_to_the_next_sync() -> None:
    """Metacontroller retries its status write five times on a conflict, then ignores it: the newer
    version's watch event brings the next sync. No Event, no failure, the hook asked once."""
    engine = ScriptedEngine(thing_policy)
    kube, runner = runner_over_p(engine)
    for _ in range(runner.status_rereads + 1):
        kube.fail("PATCH", f"{THINGS}/p/status", 409)
    assert runner.reconcile("ns", "p") == Result()
    assert hook_calls(engine, "data.things.status") == 1
    statuses = [c for c in kube.calls if c == ("PATCH", f"{THINGS}/p/status")]
    assert len(statuses) == runner.status_rereads + 1 == 6
    assert "status" not in kube.stored(f"{THINGS}/p") and kube.events == []
    assert kube.stored(f"{CMS}/p") is not None  # the children were written, once
    relist(runner.manager)
    runner.reconcile("ns", "p")  # the next sync writes it
    assert kube.stored(f"{THINGS}/p")["status"]["configMaps"] == 1


def test_the_hooks_events_are_recorded_when_its_status_is_left_to_the_next_sync() -> None:
    """The next sync's hook may not answer an event again (edge-triggered): a status left behind after
    every fresh read still has the sync's events recorded."""

    def announcing(ref: str, input: Any) -> Any:
        if ref == "data.things.events":
            return [{"type": "Normal", "reason": "Created", "message": "children made"}]
        return thing_policy(ref, input)

    kube = cluster()
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {}})
    runner = composite_runner(kube, ScriptedEngine(announcing), rules=("children", "status", "events"))
    relist(runner.manager)
    for _ in range(runner.status_rereads + 1):
        kube.fail("PATCH", f"{THINGS}/p/status", 409)
    assert runner.reconcile("ns", "p") == Result()
    assert "status" not in kube.stored(f"{THINGS}/p")
    assert [(e["reason"], e["message"]) for e in kube.events] == [("Created", "children made")]


def test_a_status_write_ends_quietly_when_the_object_read_again_is_gone_or_replaced() -> None:
    kube, runner = runner_over_p(ScriptedEngine(thing_policy))
    kube.fail("PATCH", f"{THINGS}/p/status", 409)
    stored = kube.stored(f"{THINGS}/p")
    del kube.objects[("/apis/example.com/v1", "things", "ns", "p")]
    kube.put(THINGS, {**stored, "metadata": {"name": "p", "namespace": "ns"}})  # another object by that name
    assert runner.reconcile("ns", "p") == Result()
    assert "status" not in kube.stored(f"{THINGS}/p") and kube.events == []


def test_an_error_reading_the_object_again_fails_the_sync_as_any_other() -> None:
    """The GET after a conflict is part of the sync: its failure is a SyncError Event and counts toward
    the SyncFailing condition, as every other API error does."""
    kube = cluster()
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {}})
    runner = composite_runner(kube, ScriptedEngine(thing_policy))
    for _ in range(failing.REPEATED):
        relist(runner.manager)
        kube.fail("PATCH", f"{THINGS}/p/status", 409)
        kube.fail("GET", f"{THINGS}/p", 500, "etcd is away")
        with pytest.raises(ApiError, match="500"):
            runner.reconcile("ns", "p")
    assert [e["reason"] for e in kube.events] == ["SyncError"]
    condition = failing.current(kube.stored(f"{THINGS}/p"))
    assert condition is not None and condition["reason"] == "SyncError" and "etcd is away" in condition["message"]


def decorator_runner(kube: FakeKube, engine: ScriptedEngine) -> DecoratorRunner:
    definition = DecoratorController(
        name="tagger",
        resources=(TargetResource("v1", "pods", label_selector={"matchLabels": {"tag": "yes"}}),),
        attachments=(ChildResource("v1", "configmaps", update_method="InPlace"),),
        hooks=Hooks(sync=HookTarget("tagger")),
    )
    hook = ResolvedHook(HookTarget("tagger"), rules=("labels", "attachments", "status"))
    return DecoratorRunner(
        definition,
        manager=Manager(kube),  # type: ignore[arg-type]
        evaluator=LocalHooks(engine),  # type: ignore[arg-type]
        actuator=Actuator(kube),  # type: ignore[arg-type]
        sync_hook=hook,
        finalize_hook=None,
        customize_hook=None,
        discovery=Discovery(kube),  # type: ignore[arg-type]
    )


def tagger(ref: str, input: Any) -> Any:
    name = input["object"]["metadata"]["name"]
    return {
        "data.tagger.labels": {"decorated": "yes"},
        "data.tagger.attachments": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-cfg"}}],
    }.get(ref, UNDEFINED)


def test_a_decorator_labels_selected_objects_and_owns_marked_attachments() -> None:
    kube = cluster()
    kube.put(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"tag": "yes"}}})
    kube.put(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}})
    runner = decorator_runner(kube, ScriptedEngine(tagger))
    [target] = runner.targets
    relist(target.manager)
    target.reconcile("ns", "a")
    target.reconcile("ns", "b")  # not selected: nothing
    assert kube.stored(f"{PODS}/a")["metadata"]["labels"] == {"tag": "yes", "decorated": "yes"}
    assert "decorated" not in (kube.stored(f"{PODS}/b")["metadata"].get("labels") or {})
    cfg = kube.stored(f"{CMS}/a-cfg")
    assert cfg["metadata"]["annotations"][DECORATOR_ANNOTATION] == "tagger"
    relist(target.manager)
    writes = len(kube.writes())
    target.reconcile("ns", "a")
    assert len(kube.writes()) == writes


def test_a_decorator_s_status_refused_as_of_a_stale_cache_is_left_to_the_next_sync() -> None:
    """Metacontroller's decorator writes the status with UpdateStatus on the cached version and ignores a
    conflict: no read again, no second hook call; the newer version's sync writes it."""
    kube = cluster()
    kube.put(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "labels": {"tag": "yes"}}})

    def policy(ref: str, input: Any) -> Any:
        return {"tagged": True} if ref == "data.tagger.status" else tagger(ref, input)

    engine = ScriptedEngine(policy)
    runner = decorator_runner(kube, engine)
    [target] = runner.targets
    relist(target.manager)
    target.reconcile("ns", "a")
    pod = kube.stored(f"{PODS}/a")
    assert pod["status"] == {"tagged": True}
    del pod["status"]
    kube.put(PODS, pod)  # someone else's status
    relist(target.manager)
    kube.patch(f"{PODS}/a", {"metadata": {"annotations": {"since": "the cache read"}}})
    calls, hooks = len(kube.calls), hook_calls(engine, "data.tagger.status")
    assert target.reconcile("ns", "a") == Result()
    assert hook_calls(engine, "data.tagger.status") == hooks + 1
    assert ("GET", f"{PODS}/a") not in kube.calls[calls:] and kube.events == []
    assert "status" not in kube.stored(f"{PODS}/a")  # left to the next sync
    relist(target.manager)
    target.reconcile("ns", "a")
    assert kube.stored(f"{PODS}/a")["status"] == {"tagged": True}


def test_no_child_is_created_for_a_parent_a_cache_that_missed_events_still_holds() -> None:
    """After a watch failure the parent cache may hold a parent deleted meanwhile (until it lists
    again): its uid is confirmed with a GET before children are created, and only then."""
    kube, runner = runner_over_p(ScriptedEngine(thing_policy), {"v": "1"})
    runner.parents._disconnected()  # its watch failed: it may have missed the deletion below
    del kube.objects[("/apis/example.com/v1", "things", "ns", "p")]
    gets = len(kube.calls)
    assert runner.reconcile("ns", "p") == Result()
    assert kube.stored(f"{CMS}/p") is None and not kube.writes()
    assert ("GET", f"{THINGS}/p") in kube.calls[gets:]
    # the same parent still there (a different one would have a new uid): children are created
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "q"}, "spec": {"v": "1"}})
    runner.parents._relist()
    runner.children["ConfigMap.v1"]._disconnected()
    assert runner.reconcile("ns", "q") == Result() and kube.stored(f"{CMS}/q") is not None
    # all caches current again: no GET before a create
    relist(runner.manager)
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "r"}, "spec": {"v": "1"}})
    relist(runner.manager)
    gets = len(kube.calls)
    runner.reconcile("ns", "r")
    assert kube.stored(f"{CMS}/r") is not None and ("GET", f"{THINGS}/r") not in kube.calls[gets:]


def failing_policy(broken: set[str], seen: list[dict]) -> Any:
    """thing_policy with conditions of its own, whose status rule fails for the parents in `broken`;
    `seen` collects the parents the hook was given."""

    def decide(ref: str, input: Any) -> Any:
        parent = input["parent"]
        if ref == "data.things.status":
            seen.append(parent)
            if parent["metadata"]["name"] in broken:
                return "not an object"
            return {"configMaps": len(input["children"]["ConfigMap.v1"]), "conditions": [{"type": "Ready"}]}
        return thing_policy(ref, input)

    return decide


def test_a_parent_whose_sync_keeps_failing_says_why_in_a_condition_the_hook_never_sees() -> None:
    kube = cluster()
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {}})
    broken, seen = {"p"}, []
    runner = composite_runner(kube, ScriptedEngine(failing_policy(broken, seen)))
    broken.clear()
    relist(runner.manager)
    runner.reconcile("ns", "p")
    broken.add("p")
    for _ in range(failing.REPEATED):
        relist(runner.manager)
        assert failing.current(kube.stored(f"{THINGS}/p")) is None  # not before REPEATED failures in a row
        with pytest.raises(HookError):
            runner.reconcile("ns", "p")
    status = kube.stored(f"{THINGS}/p")["status"]
    assert status["configMaps"] == 0 and status["conditions"][0] == {"type": "Ready"}  # the hook's, as written
    condition = failing.current(kube.stored(f"{THINGS}/p"))
    assert condition is not None and condition["reason"] == "InvalidHookOutput"
    assert "status" in condition["message"] and "not an object" in condition["message"]
    assert [e["reason"] for e in kube.events] == ["InvalidHookOutput"]  # one Event, aggregated
    relist(runner.manager)
    writes = len(kube.writes())
    with pytest.raises(HookError):
        runner.reconcile("ns", "p")
    assert len(kube.writes()) == writes  # the same failure again: the condition already says it
    assert all(failing.current(p) is None for p in seen)

    broken.clear()  # fixed: the hook's status alone, as Metacontroller writes it
    relist(runner.manager)
    runner.reconcile("ns", "p")
    assert kube.stored(f"{THINGS}/p")["status"] == {"configMaps": 1, "conditions": [{"type": "Ready"}]}


def test_a_conflict_is_no_failure_and_a_success_between_failures_starts_the_count_again() -> None:
    kube, runner = runner_over_p(ScriptedEngine(thing_policy))
    for _ in range(failing.REPEATED):
        fail_creating(kube, 409)
        with pytest.raises(ApiError):
            runner.reconcile("ns", "p")
    for _ in range(failing.REPEATED - 1):
        fail_creating(kube, 500)
        with pytest.raises(ApiError):
            runner.reconcile("ns", "p")
    runner.reconcile("ns", "p")
    kube.fail("PATCH", f"{CMS}/p", 500)  # created; the cache without it: created again, there, so applied
    with pytest.raises(ApiError):
        runner.reconcile("ns", "p")
    assert failing.current(kube.stored(f"{THINGS}/p")) is None
    for _ in range(failing.REPEATED - 1):
        runner.parents._relist()  # the status written; the child's cache still without it: applied again
        kube.fail("PATCH", f"{CMS}/p", 500)
        with pytest.raises(ApiError):
            runner.reconcile("ns", "p")
    condition = failing.current(kube.stored(f"{THINGS}/p"))
    assert condition is not None and condition["reason"] == "SyncError" and "500" in condition["message"]


def broken_tagger(status: bool) -> Any:
    def decide(ref: str, input: Any) -> Any:
        if ref == "data.tagger.labels":
            return "not an object" if input["object"]["metadata"].get("labels", {}).get("broken") else {"ok": "y"}
        if ref == "data.tagger.status" and status:
            return {"tagged": True}
        return UNDEFINED

    return decide


def test_a_decorator_reports_a_failing_sync_in_a_status_only_its_hook_writes() -> None:
    kube = cluster()
    meta = {"name": "a", "labels": {"tag": "yes", "broken": "y"}}
    kube.put(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": "Running"}})
    runner = decorator_runner(kube, ScriptedEngine(broken_tagger(status=True)))
    [target] = runner.targets
    target.writes_failing_condition = False  # a hook without a `status` rule: the Pod's status is the kubelet's
    for _ in range(failing.REPEATED + 1):
        relist(target.manager)
        with pytest.raises(HookError):
            target.reconcile("ns", "a")
    assert kube.stored(f"{PODS}/a")["status"] == {"phase": "Running"}
    target.writes_failing_condition = True  # its hook answers `status`: the status is the decorator's
    relist(target.manager)
    with pytest.raises(HookError):
        target.reconcile("ns", "a")
    assert failing.current(kube.stored(f"{PODS}/a"))["reason"] == "InvalidHookOutput"
    target.evaluator = LocalHooks(ScriptedEngine(broken_tagger(status=False)))  # type: ignore[arg-type]
    pod = kube.stored(f"{PODS}/a")
    pod["metadata"]["labels"].pop("broken")
    kube.put(PODS, pod)
    relist(target.manager)
    target.reconcile("ns", "a")  # fixed, and answers no status: the condition alone goes
    assert kube.stored(f"{PODS}/a")["status"] == {"phase": "Running"}


def unanswered(path: str) -> urllib3.exceptions.MaxRetryError:
    """What KubeClient raises when the API server refuses the connection (urllib3's retries spent)."""
    cause = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] refused")  # type: ignore[arg-type]
    return urllib3.exceptions.MaxRetryError(None, path, cause)  # type: ignore[arg-type]


def test_a_request_the_api_server_did_not_answer_fails_the_sync_as_any_other() -> None:
    """A connection refused mid-sync is a failed sync: raised as it was (the worker backs off and logs
    it), a SyncError Event, and a count toward SyncFailing (the server answering the other requests)."""
    kube, runner = runner_over_p(ScriptedEngine(thing_policy))
    for _ in range(failing.REPEATED):
        kube.errors.setdefault(("POST", CMS), deque()).append(unanswered(CMS))
        with pytest.raises(urllib3.exceptions.MaxRetryError):
            runner.reconcile("ns", "p")
    assert [(e["reason"], e["type"]) for e in kube.events] == [("SyncError", "Warning")]
    assert "the API server did not answer" in kube.events[0]["message"]
    condition = failing.current(kube.stored(f"{THINGS}/p"))
    assert condition is not None and condition["reason"] == "SyncError" and "refused" in condition["message"]
    relist(runner.manager)
    runner.reconcile("ns", "p")  # answered again: the sync succeeds, the condition goes
    assert failing.current(kube.stored(f"{THINGS}/p")) is None and kube.stored(f"{CMS}/p") is not None
