"""Rolling updates at run time: revisions are written through the actuator before a child moves."""

from __future__ import annotations

from regokite.controllers.definitions import CompositeController, ParentResource
from regokite.controllers.hooks import LocalHooks, ResolvedHook
from regokite.controllers.rolling import CHILDREN_ANNOTATION
from regokite.controllers.schema import ChildResource, Hooks, HookTarget
from regokite.kube.actuator import Actuator
from regokite.kube.discovery import Discovery
from regokite.kube.manager import Manager
from regokite.runners.composite_runner import CompositeRunner
from tests.kube_runtime.fake import ScriptedEngine
from tests.runners.test_composite_and_decorator import CMS, THINGS, cluster, relist, thing_policy

REVISIONS = "/apis/apps/v1/namespaces/ns/controllerrevisions"


def test_the_first_sync_records_a_revision_and_a_change_moves_the_child_to_the_next() -> None:
    kube = cluster().serve("apps/v1", "controllerrevisions", "ControllerRevision")
    kube.put(THINGS, {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "p"}, "spec": {"v": "1"}})
    definition = CompositeController(
        name="things",
        parent=ParentResource("example.com/v1", "things"),
        children=(ChildResource("v1", "configmaps", update_method="RollingInPlace"),),
        hooks=Hooks(sync=HookTarget("things")),
        generate_selector=True,
    )
    hook = ResolvedHook(HookTarget("things"), rules=("children", "status"))
    runner = CompositeRunner(
        definition,
        manager=Manager(kube),  # type: ignore[arg-type]
        evaluator=LocalHooks(ScriptedEngine(thing_policy)),  # type: ignore[arg-type]
        actuator=Actuator(kube),  # type: ignore[arg-type]
        sync_hook=hook,
        finalize_hook=None,
        discovery=Discovery(kube),  # type: ignore[arg-type]
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
