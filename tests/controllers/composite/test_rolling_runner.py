"""Rolling updates at run time: revisions are written through the actuator before a child moves."""

from __future__ import annotations

from regokite.controllers.composite.rolling import CHILDREN_ANNOTATION
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
