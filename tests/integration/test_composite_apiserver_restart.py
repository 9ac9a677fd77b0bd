"""The API server going away mid-watch and coming back loses no update.

Uses a private control plane (not the session one) so kube-apiserver can be
stopped and started again on the same port and etcd; while it is down, etcd's
history is compacted, so the informers' resume must relist after 410 Gone.
"""

from __future__ import annotations

from pathlib import Path

import controlplane
import kube
import yaml
from kube import create, get, merge_patch

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]

EXAMPLE = ROOT / "policies" / "controllers" / "config_bundle"


def bundle(name: str, value: str) -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "ConfigBundle",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"configs": [{"v": value}]},
    }


def test_no_update_is_lost_across_an_apiserver_restart(private_plane: controlplane.ControlPlane) -> None:
    cp = private_plane
    cluster = kube.Cluster.of(cp)
    parents = "/apis/example.com/v1/namespaces/default/configbundles"
    cms = "/api/v1/namespaces/default/configmaps"
    with cluster.api_client() as api:
        kube.install_crd(api, yaml.safe_load((EXAMPLE / "crd.yaml").read_text()))
        with ControllerProcess.running(cp.kubeconfig, EXAMPLE) as ctl:
            create(api, parents, bundle("a", "1"))
            kube.wait_for(lambda: get(api, f"{cms}/a-0"), lambda c: c["data"] == {"v": "1"}, what="a-0 v=1")

            # Down, history compacted while down, up: then change things at once,
            # before the controller's watches have had a chance to come back.
            controlplane.restart_apiserver(cp, 1.0, while_down=lambda: kube.compact_etcd(cp.etcd_url))
            merge_patch(api, f"{parents}/a", {"spec": {"configs": [{"v": "2"}]}})
            create(api, parents, bundle("b", "1"))

            kube.wait_for(lambda: get(api, f"{cms}/a-0"), lambda c: c["data"] == {"v": "2"}, what="a-0 v=2")
            kube.wait_for(lambda: get(api, f"{cms}/b-0"), what="b-0 created", timeout=30)

            # A second outage with changes made by someone else right after it.
            controlplane.restart_apiserver(cp, 0.5)
            merge_patch(api, f"{parents}/b", {"spec": {"configs": [{"v": "3"}]}})
            kube.wait_for(lambda: get(api, f"{cms}/b-0"), lambda c: c["data"] == {"v": "3"}, what="b-0 v=3")
            records = ctl.log_records()
            assert any(r.get("msg") == "watch failed, retrying" for r in records)
            assert any(r.get("msg") == "watch history gone, relisting" for r in records) or any(
                r.get("msg") == "listed" and r.get("informer", "").startswith("configbundles") for r in records[5:]
            )
            assert ctl.stop() == 0
