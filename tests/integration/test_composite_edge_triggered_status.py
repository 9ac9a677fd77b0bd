"""Metacontroller writes the hook's status on every sync, the one that creates its children included:
a hook that records a transition only on that sync (edge-triggered) gets that record written.

Whether a later sync keeps it is the hook's business, as under Metacontroller: a sync whose parent cache
predates that write answers from the stale parent, and its status is written over the newer version
(Metacontroller's AtomicStatusUpdate; `test_composite_status_conflict`). So the record is looked for in
the parent's history (a watch from its creation), not in its last version.
"""

from __future__ import annotations

from pathlib import Path

import kube
from kube import Cluster, create, get
from kubernetes import client

from tests.controllers.definitions_text import composite_controller
from tests.controllers.process import ControllerProcess

HOOK = """package controllers.edge_triggered

desired := [{
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": input.parent.metadata.name},
	"data": {"who": input.parent.spec.who},
}]

children := desired

observed := object.get(input, ["children", "ConfigMap.v1"], {})

carried := object.get(input.parent, ["status", "conditions"], [])

# the transition is recorded only on the sync whose desired children differ from the observed ones
status := {"conditions": array.concat(carried, [{"type": "effective", "status": "True"}])} if {
	count(desired) != count(observed)
} else := {"conditions": carried}
"""

CONTROLLER = composite_controller(
    "edge-triggered", "helloworlds", "configmaps", "rego: {package: controllers.edge_triggered}", None
)


def test_a_transition_recorded_only_on_the_creating_sync_is_written(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "edge_triggered.rego").write_text(HOOK)
    (tmp_path / "controller.yaml").write_text(CONTROLLER)
    parents = kube.helloworlds(namespace)
    parent = kube.hello_world("p", namespace=namespace)
    with ControllerProcess(
        cluster.kubeconfig, policies=[policies], controllers=[tmp_path / "controller.yaml"], namespace=namespace
    ) as ctl:
        created = create(api, parents, parent)
        kube.wait_for(
            lambda: get(api, f"/api/v1/namespaces/{namespace}/configmaps/p"), what="the child ConfigMap", timeout=30
        )
        effective = [{"type": "effective", "status": "True"}]
        statuses = []
        for event in kube.watch(
            api, parents, resource_version=created["metadata"]["resourceVersion"], timeout_seconds=30,
            fieldSelector="metadata.name=p",
        ):  # fmt: skip
            statuses.append(event["object"].get("status", {}).get("conditions"))
            if statuses[-1] == effective:
                break
        assert effective in statuses, f"the creating sync's status was never written: {statuses}"
        assert _syncs(ctl.metrics()) >= 1
        assert ctl.stop() == 0


def _syncs(text: str) -> float:
    prefix = "regokite_controller_reconciles_total{"
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix) and 'result="ok"' in line
    )
