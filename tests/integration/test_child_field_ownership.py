"""A child the sync finds missing is created with a POST (the API server takes it for about half of what an
apply that creates costs) and applied from then on: as on a child an apply created, a field the hook no
longer returns goes (Metacontroller's three-way merge) and a field another writer set stays."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kube import Cluster, apply, get
from kubernetes import client

from regokite.kube.actuator import Actuator
from regokite.kube.client import KubeClient
from regokite.resources import Action, ChildType

CM = ChildType("v1", "configmaps", "ConfigMap", True)


def child(namespace: str, name: str, labels: dict[str, str], data: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


@pytest.fixture
def actuator(cluster: Cluster) -> Any:
    kube_client = KubeClient(cluster.kubeconfig)
    yield Actuator(kube_client)
    kube_client.close()


def test_a_posted_child_loses_what_the_hook_drops_as_an_applied_one_does(
    api: client.ApiClient, namespace: str, actuator: Actuator
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    first = {"keep": "1", "drop": "1"}, {"a": "1", "b": "2"}
    steps = [({"keep": "1", "drop": "1"}, {"a": "3", "b": "2"}), ({"keep": "1"}, {"a": "3"}), ({}, {})]
    seen: dict[str, list[tuple[Any, ...]]] = {}
    for how in ("posted", "applied"):
        body = child(namespace, how, *first)
        if how == "posted":
            actuator.execute(Action("create", CM, namespace, how, body), controller="test")
            fields = get(api, f"{path}/{how}")["metadata"]["managedFields"]
            assert [(m["manager"], m["operation"]) for m in fields] == [("regokite", "Update")]
        else:
            actuator.apply(CM, body, controller="test")
        theirs = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": how}, "data": {"theirs": "x"}}
        apply(api, f"{path}/{how}", theirs, "another-writer")
        for labels, data in steps:
            actuator.execute(Action("update", CM, namespace, how, child(namespace, how, labels, data)), controller="t")
            now = get(api, f"{path}/{how}")
            managers = sorted((m["manager"], m["operation"]) for m in now["metadata"]["managedFields"])
            seen.setdefault(how, []).append((now["metadata"].get("labels"), now.get("data"), managers))
    # the value changed, nothing dropped: the create's entry stays beside the apply's
    assert seen["posted"][0] == (
        {"keep": "1", "drop": "1"},
        {"a": "3", "b": "2", "theirs": "x"},
        [("another-writer", "Apply"), ("regokite", "Apply"), ("regokite", "Update")],
    )
    # dropped: the label and b go, the other writer's field stays; the create's entry is folded into the apply's
    assert seen["posted"][1] == (
        {"keep": "1"},
        {"a": "3", "theirs": "x"},
        [("another-writer", "Apply"), ("regokite", "Apply")],
    )
    assert seen["posted"][2][:2] == (None, {"theirs": "x"})
    # as on the child an apply created, step by step
    assert [s[:2] for s in seen["posted"]] == [s[:2] for s in seen["applied"]]
    assert seen["applied"][1][2] == [("another-writer", "Apply"), ("regokite", "Apply")]


def test_a_posted_child_already_there_is_applied(api: client.ApiClient, namespace: str, actuator: Actuator) -> None:
    """The cache behind: the sync creates a child that exists; the POST's 409 turns into the apply. A
    resourceVersion in the hook's child (copied from an observed object) does not stop the create."""
    path = f"/api/v1/namespaces/{namespace}/configmaps/c"
    first = child(namespace, "c", {}, {"a": "1"})
    first["metadata"]["resourceVersion"] = "12345"
    actuator.execute(Action("create", CM, namespace, "c", first), controller="t")
    assert first["metadata"]["resourceVersion"] == "12345"  # the hook's answer is left as it was
    body = child(namespace, "c", {}, {"a": "2"})
    actuator.execute(Action("create", CM, namespace, "c", copy.deepcopy(body)), controller="t")
    assert get(api, path)["data"] == {"a": "2"}
