"""A parent whose sync keeps failing says why: a Warning Event (as Metacontroller records) and the
condition `regokite.dev/SyncFailing` in its status, beside the hook's own status, never shown to the
hook; fixing the policy file (--watch-definitions reloads it) removes the condition, and the status
is then exactly the hook's again. Another parent of the same controller syncs all along."""

from __future__ import annotations

from pathlib import Path

import kube
from kube import Cluster, create, get
from kubernetes import client

from tests.controllers.definitions_text import composite_controller
from tests.controllers.process import ControllerProcess

CONDITION = "regokite.dev/SyncFailing"
HOOK = """package controllers.gadgets

children contains {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": input.parent.metadata.name}}

status := {"size": input.parent.spec.size, "sawConditions": object.get(input.parent, ["status", "conditions"], [])}
"""
BROKEN = (
    HOOK
    + """
status := {"size": 0} if input.parent.spec.size > 3  # two values for one parent: a conflict, an error
"""
)
DEFINITION = composite_controller(
    "gadgets", "gadgets", "configmaps", "rego: {package: controllers.gadgets}", method=None
)


def test_a_parent_whose_sync_keeps_failing_gets_a_condition_and_an_event_until_the_hook_is_fixed(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path, definition_crds: None
) -> None:
    kube.install_crd(api, kube.crd_manifest("example.com", "Gadget"))
    policy = tmp_path / "policies" / "gadgets.rego"
    policy.parent.mkdir()
    policy.write_text(BROKEN)
    (tmp_path / "gadgets.yaml").write_text(DEFINITION)
    parents = f"/apis/example.com/v1/namespaces/{namespace}/gadgets"
    with ControllerProcess(
        cluster.kubeconfig,
        policies=[policy.parent],
        controllers=[tmp_path / "gadgets.yaml"],
        namespace=namespace,
        extra=["--watch-definitions"],
    ) as ctl:
        try:
            for name, size in (("small", 1), ("big", 5)):
                create(api, parents, {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name},
                                      "spec": {"size": size}})  # fmt: skip
            small = kube.wait_for(lambda: get(api, f"{parents}/small"), lambda p: "status" in p, what="small synced")
            assert small["status"] == {"size": 1, "sawConditions": [], "observedGeneration": 1}

            big = kube.wait_for_condition(api, f"{parents}/big", CONDITION, timeout=30)
            condition = kube.condition(big, CONDITION)
            assert condition["reason"] == "PolicyError" and "controllers.gadgets" in condition["message"]
            assert condition["lastTransitionTime"] and condition["observedGeneration"] == 1
            events = kube.wait_for(
                lambda: [
                    e
                    for e in get(api, f"/api/v1/namespaces/{namespace}/events")["items"]
                    if e["involvedObject"]["name"] == "big"
                ],
                what="the Event on big",
            )
            assert {(e["type"], e["reason"]) for e in events} == {("Warning", "PolicyError")}
            assert get(api, f"/api/v1/namespaces/{namespace}/configmaps/small")

            policy.write_text(HOOK)  # fixed: the definitions reload, the sync succeeds
            fixed = kube.wait_for(
                lambda: get(api, f"{parents}/big"), lambda p: p.get("status", {}).get("size") == 5, what="big synced"
            )
            # the hook's status, as written: the condition gone, and the hook never saw it
            assert fixed["status"] == {"size": 5, "sawConditions": [], "observedGeneration": 1}
            assert 'verb="condition"' in ctl.metrics()
        except BaseException:
            print(ctl.logs(60))
            raise
