"""kube-mgmt's ConfigMaps on the real API server: `regokite configmaps` writes the labelled policy and
data ConfigMaps of a namespace as a policy directory, `regokite admission` serves it; each ConfigMap
gets kube-mgmt's status annotation; a broken edit says where and the last good policy keeps deciding."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import kube
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from regokite.kube.client import KubeClient
from regokite.sources.configmap_policies import STATUS_ANNOTATION, ConfigMapSync
from tests.admission.reviews import review
from tests.admission.server import admission_server

POLICY = """package kubernetes.admission

deny contains msg if {{
	some c in input.request.object.spec.containers
	endswith(c.image, data["{ns}"].settings["s.json"].banned)
	msg := sprintf("image %s is banned", [c.image])
}}
"""


def pod(image: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": image}]}}  # fmt: skip


def status(api: client.ApiClient, path: str) -> dict:
    return json.loads((get(api, path)["metadata"].get("annotations") or {}).get(STATUS_ANNOTATION, "{}"))


def labelled_configmaps(api: client.ApiClient, namespace: str) -> str:
    """kube-mgmt's data ConfigMap (`settings`: the banned image suffix) and policy ConfigMap (`images`) in
    `namespace`; returns their collection's path."""
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    create(api, cms, {"metadata": {"name": "settings", "labels": {"openpolicyagent.org/data": "opa"}},
                      "data": {"s.json": json.dumps({"banned": ":latest"})}})  # fmt: skip
    create(api, cms, {"metadata": {"name": "images", "labels": {"openpolicyagent.org/policy": "rego"}},
                      "data": {"images.rego": POLICY.format(ns=namespace)}})  # fmt: skip
    return cms


def served_and_followed(api: client.ApiClient, cms: str, namespace: str, http: httpx.Client) -> None:
    """The ConfigMaps decide (each reports ok); an edit of the data changes the decision; a broken policy
    edit says where on its ConfigMap and the last good policy keeps deciding."""

    def verdict(image: str) -> dict:
        return http.post("/validate", json=review(pod(image))).json()["response"]

    assert not verdict("nginx:latest")["allowed"]
    assert "image nginx:latest is banned" in verdict("nginx:latest")["status"]["message"]
    assert verdict("nginx:1.27")["allowed"]
    assert status(api, f"{cms}/images") == {"status": "ok"}

    merge_patch(api, f"{cms}/settings", {"data": {"s.json": json.dumps({"banned": ":1.27"})}})
    kube.wait_for(lambda: verdict("nginx:1.27")["allowed"], lambda a: a is False, what="the new data")

    merge_patch(api, f"{cms}/images", {"data": {"images.rego": "package kubernetes.admission\n\ndeny := \n"}})
    broken = kube.wait_for(
        lambda: status(api, f"{cms}/images"), lambda s: s.get("status") == "error", what="the error status"
    )
    assert f"configmap/{namespace}/images/images.rego:4:1" in broken["error"]
    assert not verdict("nginx:1.27")["allowed"]
    assert status(api, f"{cms}/settings") == {"status": "ok"}


def test_configmap_policies_are_served_and_report_their_status(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    cms = labelled_configmaps(api, namespace)
    out = tmp_path / "policies"
    sync = ConfigMapSync(KubeClient(cluster.kubeconfig), out, [namespace])
    sync.start()
    stop = threading.Event()
    runner = threading.Thread(target=sync.run, args=(stop,), daemon=True)
    runner.start()
    try:
        for name in ("settings", "images"):
            kube.wait_for(lambda n=name: status(api, f"{cms}/{n}"), lambda s: s == {"status": "ok"}, what=name)
        (tmp_path / "server").mkdir()
        with admission_server(out, tmp_path / "server") as server, server.client() as http:
            served_and_followed(api, cms, namespace, http)
    finally:
        stop.set()
        runner.join(5)
        sync.stop()


def test_the_admission_server_follows_configmaps_itself_with_policy_namespaces(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """`regokite admission --policy-namespaces NS`, no --policies and no `regokite configmaps` beside it:
    the ConfigMaps already there decide from the first review; an edit is followed; a broken one keeps
    the last good policy and says where on the ConfigMap."""
    cms = labelled_configmaps(api, namespace)
    args = ("--policy-namespaces", namespace, "--kubeconfig", str(cluster.kubeconfig))
    with admission_server([], tmp_path, *args) as server, server.client() as http:
        served_and_followed(api, cms, namespace, http)


def test_a_restarted_server_serves_the_last_good_content_of_a_configmap_refused_before_it_restarted(
    cluster: Cluster, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """`--policy-namespaces-dir` keeps what the sync wrote across a restart (an emptyDir in a pod): the
    policy ConfigMap whose edit was refused still decides with its last good content from the restarted
    server's first review, as Gatekeeper's last good versions survive a restart of `regokite gatekeeper`;
    in a temporary directory (the default) it would not be served at all."""
    cms = labelled_configmaps(api, namespace)
    kept = tmp_path / "configmap-policies"
    args = ("--policy-namespaces", namespace, "--policy-namespaces-dir", str(kept))
    args += ("--kubeconfig", str(cluster.kubeconfig))
    for run in ("first", "restarted"):
        (tmp_path / run).mkdir()
        with admission_server([], tmp_path / run, *args) as server, server.client() as http:
            if run == "first":
                served_and_followed(api, cms, namespace, http)  # ends with a refused edit, the last good deciding
                continue
            answer = http.post("/validate", json=review(pod("nginx:1.27"))).json()["response"]
            assert not answer["allowed"] and "image nginx:1.27 is banned" in answer["status"]["message"]
            assert status(api, f"{cms}/images")["status"] == "error"
            assert "last written found" in server.logs()
