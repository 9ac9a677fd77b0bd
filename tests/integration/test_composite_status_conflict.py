"""A composite's status refused by the real API server as of a stale parent (409 on its resourceVersion)
is written again over the parent read afresh, as Metacontroller's AtomicStatusUpdate does: the hook is
asked once per sync and sees the parent its cache held; no child is written again.

The sync runs in process on the session's control plane, its caches filled by one list each (as the
runner tests do), so the stale parent is there for certain: the child's cache has the child's newer
version, the parent's has the version before the previous sync's status write.
"""

from __future__ import annotations

from typing import Any

import kube
from kube import Cluster, create, get
from kubernetes import client

from regokite.controllers.definitions import ParentResource
from regokite.engine import UNDEFINED
from regokite.kube.client import KubeClient
from regokite.runtime.reconcile import Result
from tests.controllers.composite.configmap_runner import configmap_runner
from tests.kube_api.fake import ScriptedEngine


class RecordingClient(KubeClient):
    """The real client, noting each request's method and path."""

    def __init__(self, kubeconfig: Any) -> None:
        super().__init__(kubeconfig)
        self.calls: list[tuple[str, str]] = []

    def get(self, path: str, **query: Any) -> Any:
        self.calls.append(("GET", path))
        return super().get(path, **query)

    def apply(self, path: str, obj: dict[str, Any], manager: str, *, force: bool = True, parse: bool = True) -> Any:
        self.calls.append(("APPLY", path))
        return super().apply(path, obj, manager, force=force, parse=parse)

    def patch(self, path: str, patch: Any, content_type: str = "application/merge-patch+json", **query: Any) -> Any:
        self.calls.append(("PATCH", path))
        return super().patch(path, patch, content_type, **query)


def policy(ref: str, input: Any) -> Any:
    """One ConfigMap per HelloWorld saying how many it saw; the status counts them."""
    parent, observed = input["parent"], input["children"]["ConfigMap.v1"]
    if ref == "data.hello.children":
        data = {"who": parent["spec"]["who"], "seen": str(len(observed))}
        return [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": parent["metadata"]["name"]}, "data": data}
        ]
    if ref == "data.hello.status":
        return {"configMaps": len(observed)}
    return UNDEFINED


def test_a_status_refused_as_of_a_stale_parent_is_written_again_the_hook_asked_once(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None
) -> None:
    parents = kube.helloworlds(namespace)
    child = f"/api/v1/namespaces/{namespace}/configmaps/p"
    kube_client = RecordingClient(cluster.kubeconfig)
    engine = ScriptedEngine(policy)
    hellos = ParentResource("example.com/v1", "helloworlds")
    name = kube.unique_name("conflict")
    runner = configmap_runner(kube_client, engine, hellos, name=name, package="hello", namespace=namespace)
    try:
        create(api, parents, kube.hello_world("p", namespace=namespace))
        for informer in runner.cache_informers():
            informer._relist()
        assert runner.reconcile(namespace, "p") == Result()  # creates the child; status: none seen yet
        assert get(api, f"{parents}/p")["status"] == {"configMaps": 0, "observedGeneration": 1}
        for informer in runner.children.values():
            informer._relist()  # the child is in; the parent's cache is the version before its status
        stale = runner.parents.get(namespace, "p")
        assert "status" not in stale

        calls, hooks = len(kube_client.calls), len(engine.seen)
        assert runner.reconcile(namespace, "p") == Result()
        asked = engine.seen[hooks:]
        assert [ref for ref, _ in asked] == ["data.hello.children", "data.hello.status"]  # once
        assert all(i["parent"]["metadata"]["resourceVersion"] == stale["metadata"]["resourceVersion"] for _, i in asked)
        status_path = f"{parents}/p/status"
        assert kube_client.calls[calls:] == [
            ("APPLY", child),  # seen: 0 -> 1, once
            ("PATCH", status_path),  # refused by the API server: 409
            ("GET", f"{parents}/p"),
            ("PATCH", status_path),
        ]
        assert get(api, f"{parents}/p")["status"] == {"configMaps": 1, "observedGeneration": 1}
        assert get(api, child)["data"] == {"who": "Ada", "seen": "1"}
    finally:
        kube_client.close()
