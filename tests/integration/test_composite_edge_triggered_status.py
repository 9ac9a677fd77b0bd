"""Metacontroller writes the hook's status on every sync: a hook that records a transition only on the
sync that creates its children (TransientRoleBinding-style, edge-triggered) keeps that record."""

from __future__ import annotations

from pathlib import Path

import kube
from kube import Cluster, create, get, merge_patch
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
    parents = f"/apis/example.com/v1/namespaces/{namespace}/helloworlds"
    parent = {
        "apiVersion": "example.com/v1",
        "kind": "HelloWorld",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"who": "Ada"},
    }
    with ControllerProcess(
        cluster.kubeconfig, policies=[policies], controllers=[tmp_path / "controller.yaml"], namespace=namespace
    ) as ctl:
        create(api, parents, parent)
        kube.wait_for(
            lambda: get(api, f"/api/v1/namespaces/{namespace}/configmaps/p"), what="the child ConfigMap", timeout=30
        )
        effective = [{"type": "effective", "status": "True"}]
        kube.wait_for(
            lambda: get(api, f"{parents}/p"),
            lambda p: p.get("status", {}).get("conditions") == effective,
            what="the condition recorded on the creating sync",
            timeout=30,
        )
        # A later sync (an annotation brings one; its count proves it ran) carries the condition forward.
        before = _syncs(ctl.metrics())
        merge_patch(api, f"{parents}/p", {"metadata": {"annotations": {"poke": "1"}}})
        kube.wait_for(ctl.metrics, lambda m: _syncs(m) > before, what="a sync after the annotation")
        assert get(api, f"{parents}/p")["status"]["conditions"] == effective
        assert ctl.stop() == 0


def _syncs(text: str) -> float:
    prefix = "regokite_controller_reconciles_total{"
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix) and 'result="ok"' in line
    )
