"""scripts/kubelet_standin.py's decisions: which node a Pod is bound to, the statuses it writes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import kubelet_standin as standin

NODES = {
    "standin-0": {"kubernetes.io/hostname": "standin-0", "disk": "ssd"},
    "standin-1": {"kubernetes.io/hostname": "standin-1"},
}


def pod(**spec: object) -> dict:
    return {"metadata": {"name": "p", "namespace": "n", "uid": "u1"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_an_unpinned_pod_goes_to_the_least_loaded_node() -> None:
    assert standin.choose_node(pod(), NODES, {"standin-0": 3, "standin-1": 1}) == "standin-1"
    assert standin.choose_node(pod(), NODES, {}) == "standin-0"


def test_a_node_selector_limits_the_nodes_and_may_leave_the_pod_pending() -> None:
    assert standin.choose_node(pod(nodeSelector={"disk": "ssd"}), NODES, {"standin-0": 9}) == "standin-0"
    assert standin.choose_node(pod(nodeSelector={"disk": "hdd"}), NODES, {}) is None


def test_a_daemonset_pod_goes_to_the_node_its_affinity_names() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["standin-1"]}]}
                ]
            }
        }
    }
    assert standin.choose_node(pod(affinity=affinity), NODES, {"standin-1": 9}) == "standin-1"
    affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"][
        0
    ]["values"] = ["elsewhere"]
    assert standin.choose_node(pod(affinity=affinity), NODES, {}) is None


def test_running_is_ready_with_an_ip_and_a_status_per_container() -> None:
    status = standin.running_status(pod(initContainers=[{"name": "init"}]), "127.0.1.1", "10.244.0.9")
    assert status["phase"] == "Running" and status["podIP"] == "10.244.0.9" and status["hostIP"] == "127.0.1.1"
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    (main,) = status["containerStatuses"]
    assert main["ready"] and "running" in main["state"]
    (init,) = status["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0


def test_only_never_and_onfailure_pods_run_to_completion() -> None:
    assert standin.runs_to_completion(pod(restartPolicy="Never"))
    assert standin.runs_to_completion(pod(restartPolicy="OnFailure"))
    assert not standin.runs_to_completion(pod(restartPolicy="Always"))
    done = standin.succeeded_status({**pod(), "status": {"startTime": "2026-01-01T00:00:00Z"}})
    assert done["phase"] == "Succeeded"
    assert done["containerStatuses"][0]["state"]["terminated"]["startedAt"] == "2026-01-01T00:00:00Z"
    assert {c["type"]: c["status"] for c in done["conditions"]}["Ready"] == "False"


def test_an_echoing_container_logs_what_it_would_print_and_others_nothing() -> None:
    env = [{"name": "JOB_INDEX", "value": "9"}]
    assert standin.fake_log({"command": ["sh", "-c", "echo ${JOB_INDEX}"], "env": env}) == "9\n"
    assert standin.fake_log({"command": ["/bin/sh", "-c", "echo 'a  b' $JOB_INDEX"], "env": env}) == "a  b 9\n"
    assert standin.fake_log({"command": ["echo"], "args": ["index", "$(JOB_INDEX)"], "env": env}) == "index 9\n"
    assert standin.fake_log({"command": ["sh", "-c", "echo a; rm -rf /"]}) == ""
    assert standin.fake_log({"command": ["sh", "-c", "echo $(date)"]}) == ""
    assert standin.fake_log({"command": ["nginx"]}) == ""
    assert standin.fake_log({}) == ""


def claim(name: str, deleting: bool, finalizers: list[str]) -> dict:
    meta = {"name": name, "namespace": "n", "finalizers": finalizers, "resourceVersion": "1"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def test_a_deleted_claim_no_running_pod_mounts_loses_pvc_protection() -> None:
    mounting = {**pod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "used"}}]), "status": {}}
    finished = {
        **pod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "done"}}]),
        "status": {"phase": "Succeeded"},
    }
    claims = [
        claim("used", True, [standin.PVC_PROTECTION]),
        claim("done", True, [standin.PVC_PROTECTION]),
        claim("free", True, [standin.PVC_PROTECTION, "other"]),
        claim("kept", False, [standin.PVC_PROTECTION]),
        claim("plain", True, ["other"]),
    ]
    released = standin.releasable_claims(claims, [mounting, finished])
    assert [c["metadata"]["name"] for c in released] == ["done", "free"]
