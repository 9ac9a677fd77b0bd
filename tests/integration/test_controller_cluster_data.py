"""`regokite controller --replicate`: a sync hook reads another object through data.kubernetes, on the
real API server. The object exists before the controller starts, so the first child already shows it
(no sync ran on an empty inventory); a later change shows in the next sync."""

from __future__ import annotations

import textwrap
from pathlib import Path

import kube
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.definitions_text import composite_controller
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"

POLICY = """\
package controllers.greeting

settings := data.kubernetes.configmaps[input.parent.metadata.namespace].settings

children := [{
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": input.parent.metadata.name, "namespace": input.parent.metadata.namespace},
	"data": {"greeting": sprintf("%s, %s", [settings.data.greeting, input.parent.spec.who])},
}]
"""

CONTROLLER = composite_controller("greeting", "helloworlds", "configmaps", "rego: {package: controllers.greeting}")


def test_hooks_read_replicated_objects_loaded_before_the_first_sync(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None, tmp_path: Path
) -> None:
    (tmp_path / "greeting.rego").write_text(POLICY)
    (tmp_path / "controller.yaml").write_text(textwrap.dedent(CONTROLLER))
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    parents = kube.helloworlds(namespace)
    create(api, cms, {"metadata": {"name": "settings"}, "data": {"greeting": "Hello"}})
    create(api, parents, kube.hello_world("p"))
    extra = ["--replicate", "v1/configmaps"]
    with ControllerProcess.running(cluster.kubeconfig, tmp_path, extra=extra) as ctl:
        child = kube.wait_for(lambda: get(api, f"{cms}/p"), what="the child ConfigMap", timeout=30)
        assert child["data"] == {"greeting": "Hello, Ada"}  # the first sync saw the replicated settings
        replicated = ctl.readiness()["replicated"]
        assert (replicated["ready"], replicated["pending"]) == (True, [])
        assert replicated["watches"]["v1/configmaps"]["connected"] is True
        # no sync failed meanwhile; a 409 (a status written on a version the cache had not caught up with)
        # is optimistic concurrency at work, retried on the next read, not a failure
        failures = [
            line
            for line in ctl.metrics().splitlines()
            if line.startswith("regokite_controller_reconcile_errors_total{") and 'reason="conflict"' not in line
        ]
        assert failures == []

        merge_patch(api, f"{cms}/settings", {"data": {"greeting": "Bonjour"}})
        merge_patch(api, f"{parents}/p", {"spec": {"who": "Grace"}})
        # The two changes reach the controller on separate watches, in either order (a sync in between
        # may still use the old settings); every sync after the replicated change uses the new ones.
        touches = iter(range(1000))

        def touch_then_read() -> dict:
            merge_patch(api, f"{parents}/p", {"metadata": {"annotations": {"touch": str(next(touches))}}})
            return get(api, f"{cms}/p")

        kube.wait_for(
            touch_then_read,
            lambda c: c["data"] == {"greeting": "Bonjour, Grace"},
            what="the child from the new settings",
            timeout=30,
        )
        assert 'regokite_replicated_objects{resource="v1/configmaps"}' in ctl.metrics()
