"""The kubelet stand-in (scripts/kubelet_standin.py) lets kube-controller-manager's workload
controllers progress on the local control plane: each check fails with the stand-in dead
(Pods stay Pending, nothing is Ready, no Job completes, a deleted Pod keeps its name)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kube
from kubernetes import client


def pod_template(restart_policy: str = "Always") -> dict:
    return {
        "metadata": {"labels": {"app": "standin"}},
        "spec": {"restartPolicy": restart_policy, "containers": [{"name": "c", "image": "nginx:1.26.2"}]},
    }


def test_a_deployments_pods_become_ready(api: client.ApiClient, namespace: str, kubelet_standin: Path | None) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    kube.create(
        api,
        base,
        {
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "standin"}}, "template": pod_template()},
        },
    )
    kube.wait_for(
        lambda: kube.get(api, f"{base}/web"),
        lambda d: d.get("status", {}).get("readyReplicas") == 2 and d["status"].get("availableReplicas") == 2,
        what="Deployment web with 2 ready, available replicas",
        timeout=60,
    )
    pods = kube.get(api, f"/api/v1/namespaces/{namespace}/pods")["items"]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("standin-")
        assert pod["status"]["phase"] == "Running" and pod["status"]["podIP"]
        assert pod["status"]["containerStatuses"][0]["ready"] is True
        assert kube.has_condition("Ready")(pod)


def test_a_job_completes(api: client.ApiClient, namespace: str, kubelet_standin: Path | None) -> None:
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    kube.create(api, base, {"metadata": {"name": "once"}, "spec": {"template": pod_template("Never")}})
    job = kube.wait_for_condition(api, f"{base}/once", "Complete", timeout=60)
    assert job["status"]["succeeded"] == 1
    (pod,) = kube.get(api, f"/api/v1/namespaces/{namespace}/pods", labelSelector="job-name=once")["items"]
    assert pod["status"]["phase"] == "Succeeded"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_a_statefulset_scales_down_because_deleted_pods_go(
    api: client.ApiClient, namespace: str, kubelet_standin: Path | None
) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/statefulsets"
    spec = {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "standin"}}}
    kube.create(api, base, {"metadata": {"name": "web"}, "spec": {**spec, "template": pod_template()}})
    ready = kube.wait_for(
        lambda: kube.get(api, f"{base}/web"),
        lambda s: s.get("status", {}).get("readyReplicas") == 2,
        what="StatefulSet web with 2 ready replicas (OrderedReady: web-1 only after web-0 is Ready)",
        timeout=60,
    )
    kube.merge_patch(api, f"{base}/web", {"spec": {"replicas": 1}})
    # web-1 gets a deletionTimestamp (grace period 30 s); only the kubelet's removal frees it.
    kube.wait_for_deletion(api, f"/api/v1/namespaces/{namespace}/pods/web-1", timeout=20)
    assert ready["status"]["replicas"] == 2
    assert kube.exists(api, f"/api/v1/namespaces/{namespace}/pods/web-0")


def test_kubectl_logs_shows_what_an_echoing_container_prints(
    cluster: kube.Cluster, api: client.ApiClient, namespace: str, kubelet_standin: Path | None
) -> None:
    container = {
        "name": "c",
        "image": "busybox",
        "command": ["sh", "-c", "echo ${N}"],
        "env": [{"name": "N", "value": "9"}],
    }
    pod = {"metadata": {"name": "echo"}, "spec": {"containers": [container]}}
    # A fresh namespace's service account token may not exist yet: the API server says retry.
    kube.wait_for(lambda: kube.create(api, f"/api/v1/namespaces/{namespace}/pods", pod), what="Pod echo created")
    kube.wait_for(
        lambda: kube.get(api, f"/api/v1/namespaces/{namespace}/pods/echo"),
        lambda p: p.get("status", {}).get("phase") == "Running",
        what="Pod echo Running",
        timeout=30,
    )
    logs = subprocess.run(
        ["kubectl", "logs", "-n", namespace, "echo"],
        env={**os.environ, **cluster.env()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (logs.returncode, logs.stdout) == (0, "9\n"), logs.stderr
