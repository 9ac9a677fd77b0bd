"""Syncs that fail because the API server is away count toward `regokite.dev/SyncFailing` as any other
failure: nothing can be written while it is down (the Event attempts are logged as not recorded), and
once it answers, a sync that still fails is the third in a row and says so in the status.

On a private control plane (its API server is stopped); the sync runs in process, its caches filled by
one list each (as the runner tests do), so each sync is the test's own.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import controlplane
import kube
import pytest
import yaml
from kube import create, get

from regokite.controllers import failing
from regokite.controllers.definitions import ParentResource
from regokite.engine import UNDEFINED
from regokite.errors import HookError
from regokite.kube.client import UNANSWERED, KubeClient
from regokite.runtime.reconcile import Result
from tests.controllers.composite.configmap_runner import configmap_runner
from tests.kube_api.fake import ScriptedEngine

ROOT = Path(__file__).resolve().parents[2]
PARENTS = kube.helloworlds("default")
CHILD = "/api/v1/namespaces/default/configmaps/p"


def hello(broken: set[str]) -> Any:
    def decide(ref: str, input: Any) -> Any:
        parent = input["parent"]
        if ref == "data.hello.children":
            name = parent["metadata"]["name"]
            return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": parent["spec"]}]
        if ref == "data.hello.status":
            return "not an object" if parent["metadata"]["name"] in broken else {"ok": True}
        return UNDEFINED

    return decide


def test_syncs_the_api_server_did_not_answer_count_toward_sync_failing(
    private_plane: controlplane.ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    cp = private_plane
    crd = yaml.safe_load((ROOT / "policies/controllers/hello_world/crd.yaml").read_text())
    with kube.Cluster.of(cp).api_client() as api:
        kube.install_crd(api, crd)
        create(api, PARENTS, kube.hello_world("p"))
        kube_client = KubeClient(cp.kubeconfig)
        broken: set[str] = set()
        hellos = ParentResource("example.com/v1", "helloworlds")
        engine = ScriptedEngine(hello(broken))
        runner = configmap_runner(kube_client, engine, hellos, name="hello", package="hello", namespace="default")
        try:
            for informer in runner.cache_informers():
                informer._relist()

            def outage() -> None:  # the child's create meets no API server, REPEATED - 1 times
                for _ in range(failing.REPEATED - 1):
                    with pytest.raises(UNANSWERED):
                        runner.reconcile("default", "p")

            with caplog.at_level(logging.WARNING, logger="regokite.controller"):
                controlplane.restart_apiserver(cp, 0, while_down=outage)
            assert "could not record event" in [r.getMessage() for r in caplog.records]  # (a repeat: aggregated)
            assert not kube.exists(api, CHILD)

            broken.add("p")  # back, and the sync fails another way: the third failure in a row
            with pytest.raises(HookError):
                runner.reconcile("default", "p")
            parent = get(api, f"{PARENTS}/p")
            condition = failing.current(parent)
            assert condition is not None and condition["reason"] == "InvalidHookOutput", parent.get("status")
            events = get(api, "/api/v1/namespaces/default/events", fieldSelector="involvedObject.name=p")["items"]
            assert [e["reason"] for e in events] == ["InvalidHookOutput"]  # none could be written meanwhile

            broken.clear()
            for informer in runner.cache_informers():
                informer._relist()
            assert runner.reconcile("default", "p") == Result()
            assert failing.current(get(api, f"{PARENTS}/p")) is None
            assert get(api, CHILD)["data"] == {"who": "Ada"}
        finally:
            kube_client.close()
