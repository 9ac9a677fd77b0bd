"""A status two writers share (Gatekeeper's `status.byPod`: the webhook side's entry and the audit's) is
written by both through `Actuator.update_status`: over the version read, so the real API server refuses a
write that would drop the other's entry made since (409), and the write is made again over the object read
afresh, keeping it. Another writer is made to write between the read and each write, for certain."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kube import Cluster, create, get, hello_world, helloworlds, merge_patch
from kubernetes import client

from regokite.kube.actuator import Actuator
from regokite.kube.client import ApiError, KubeClient
from regokite.resources import ChildType

HELLO = ChildType("example.com/v1", "helloworlds", "HelloWorld", True, True)


class RacingClient(KubeClient):
    """The real client; before each of its next `races` status writes, another writer adds its own entry."""

    def __init__(self, kubeconfig: Any, api: client.ApiClient, races: int) -> None:
        super().__init__(kubeconfig)
        self.other, self.races, self.raced = api, races, 0

    def patch(self, path: str, patch: Any, content_type: str = "application/merge-patch+json", **query: Any) -> Any:
        if path.endswith("/status") and self.raced < self.races:
            self.raced += 1
            current = get(self.other, path)
            by_pod = [*current.get("status", {}).get("byPod", []), {"id": f"other-{self.raced}"}]
            merge_patch(self.other, path, {"status": {"byPod": by_pod}})
        return super().patch(path, patch, content_type, **query)


def ours(current: dict[str, Any]) -> dict[str, Any]:
    by_pod = [p for p in current.get("status", {}).get("byPod", []) if p["id"] != "regokite"]
    return {"byPod": [*by_pod, {"id": "regokite", "observedGeneration": current["metadata"]["generation"]}]}


def test_an_entry_written_since_the_read_is_kept(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None
) -> None:
    parents = helloworlds(namespace)
    listed = create(api, parents, hello_world("c"))
    kube_client = RacingClient(cluster.kubeconfig, api, races=1)
    try:
        Actuator(kube_client).update_status(HELLO, listed, ours, controller="test")
    finally:
        kube_client.close()
    assert [p["id"] for p in get(api, f"{parents}/c")["status"]["byPod"]] == ["other-1", "regokite"]


def test_a_status_changed_under_each_write_is_given_up_and_logged(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None, caplog: pytest.LogCaptureFixture
) -> None:
    parents = helloworlds(namespace)
    create(api, parents, hello_world("c"))
    kube_client = RacingClient(cluster.kubeconfig, api, races=3)
    try:
        with caplog.at_level(logging.WARNING, logger="regokite.controller"), pytest.raises(ApiError) as refused:
            Actuator(kube_client).update_status(
                HELLO, {"metadata": {"name": "c", "namespace": namespace}}, ours, controller="test", read_first=True
            )
    finally:
        kube_client.close()
    assert refused.value.status == 409
    assert any(r.getMessage().startswith("status not written") for r in caplog.records)
    assert [p["id"] for p in get(api, f"{parents}/c")["status"]["byPod"]] == ["other-1", "other-2", "other-3"]
