"""The namespace-defaults Watch: `apply` and `delete` outputs, on a cluster-scoped resource."""

from __future__ import annotations

from pathlib import Path

import kube
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = ROOT / "policies" / "watches" / "namespace_defaults"


def test_labelled_namespaces_get_quota_and_limits_removed_with_the_label(
    cluster: Cluster, api: client.ApiClient
) -> None:
    name = kube.unique_name("nd")
    ns_path = f"/api/v1/namespaces/{name}"
    quota = f"{ns_path}/resourcequotas/regokite-defaults"
    limits = f"{ns_path}/limitranges/regokite-defaults"
    with ControllerProcess.running(
        cluster.kubeconfig, DEFAULTS, "watch.yaml", extra=["--var", "quota={pods: '7'}"]
    ) as ctl:
        create(api, "/api/v1/namespaces", {"metadata": {"name": name, "labels": {"regokite.dev/defaults": "true"}}})
        try:
            q = kube.wait_for(lambda: get(api, quota), what="the quota")
            assert q["spec"]["hard"] == {"pods": "7"}
            lr = kube.wait_for(lambda: get(api, limits), what="the limit range")
            assert lr["spec"]["limits"][0]["default"] == {"cpu": "500m", "memory": "512Mi"}

            merge_patch(api, ns_path, {"metadata": {"labels": {"regokite.dev/defaults": None}}})
            kube.wait_for_deletion(api, quota)
            kube.wait_for_deletion(api, limits)
            assert ctl.stop() == 0
        finally:
            kube.delete(api, ns_path)
