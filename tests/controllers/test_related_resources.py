"""Related resources: the customize hook's rules are indexed, so a change re-queues exactly the parents
whose rules select the object, before or after the change."""

from __future__ import annotations

from typing import Any

from regokite.controllers.hooks import LocalHooks, ResolvedHook
from regokite.controllers.related_resources import RelatedResources
from regokite.controllers.schema import HookTarget
from regokite.engine import UNDEFINED
from regokite.kube.discovery import Discovery
from regokite.runtime.manager import Manager
from tests.kube_api.fake import FakeKube, ScriptedEngine

SECRETS = "/api/v1/namespaces/ns/secrets"


def customize(ref: str, i: Any) -> Any:
    if ref != "data.c.relatedResources":
        return UNDEFINED
    wanted = i["parent"]["spec"]["wants"]
    return [{"apiVersion": "v1", "resource": "secrets", "labelSelector": {"matchLabels": {"team": wanted}}}]


def parent(name: str, wants: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"wants": wants}}


def secret(name: str, team: str, rv: str = "1") -> dict:
    return {"metadata": {"name": name, "namespace": "ns", "labels": {"team": team}, "resourceVersion": rv}}


def test_related_objects_are_gathered_and_their_changes_requeue_the_parents_that_select_them() -> None:
    kube = FakeKube().serve("v1", "secrets", "Secret")
    kube.put(SECRETS, secret("s1", "red"))
    manager = Manager(kube)  # type: ignore[arg-type]
    manager.informers.informer("v1", "secrets")._relist()
    queued: list[tuple[str, str]] = []
    related = RelatedResources(
        manager=manager,
        evaluator=LocalHooks(ScriptedEngine(customize)),  # type: ignore[arg-type]
        hook=ResolvedHook(HookTarget("c"), rules=("relatedResources",)),
        discovery=Discovery(kube),  # type: ignore[arg-type]
        controller={},
        parent_namespaced=True,
        enqueue=lambda ns, name: queued.append((ns, name)),
    )
    got = related.gather(parent("red-parent", "red"))
    assert list(got["Secret.v1"]) == ["s1"]
    related.gather(parent("blue-parent", "blue"))
    inf = manager.informers.informer("v1", "secrets")
    kube.script_watch(("ADDED", secret("s2", "blue", "5")), ("MODIFIED", secret("s2", "red", "6")))
    inf._watch()
    assert queued[0] == ("ns", "blue-parent")  # s2 added as blue
    assert sorted(queued[1:]) == [("ns", "blue-parent"), ("ns", "red-parent")]  # blue before the change, red after
    related.forget("ns", "blue-parent")
    queued.clear()
    kube.script_watch(("MODIFIED", secret("s2", "blue", "7")))
    inf._watch()
    assert queued == [("ns", "red-parent")]
