"""`regokite controller --watch-definitions` with no definition files: CompositeControllers applied to the
real API server start their controllers, get an Accepted status, a deleted one stops while another runs, an
edited one is reconfigured."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import kube
import pytest
import yaml
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
DEFINITIONS = "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers"


def controller(name: str, app: str) -> dict:
    doc = copy.deepcopy(yaml.safe_load((HELLO / "controller.yaml").read_text()))
    doc["metadata"]["name"] = name
    doc["spec"]["parentResource"]["labelSelector"] = {"matchLabels": {"app": app}}
    return doc


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """A copy of the hello_world example's policies, for a test that edits them."""
    shutil.copytree(HELLO, tmp_path / "hello")
    return tmp_path / "hello"


def hello(namespace: str, name: str, app: str, who: str) -> dict:
    """A HelloWorld for the definition that selects label app=`app`."""
    return kube.hello_world(name, who, namespace=namespace, labels={"app": app})


def greeting(pod: dict) -> list[str]:
    return pod["spec"]["containers"][0]["command"]


def assert_recreated_by_the_edit(
    api: client.ApiClient, pod_path: str, first: dict, who: str, ctl: ControllerProcess
) -> None:
    """The policy now says Howdy: the pod is replaced by one that does, by the same process (no restart)."""
    howdy = kube.wait_for(
        lambda: get(api, pod_path),
        lambda p: greeting(p) == ["echo", f"Howdy, {who}!"],
        what="the pod recreated by the edited policy",
        timeout=30,
    )
    assert howdy["metadata"]["uid"] != first["metadata"]["uid"]
    assert ctl.proc is not None and ctl.proc.poll() is None, "no restart of the process"


def reloads(metrics: str) -> float:
    lines = [ln for ln in metrics.splitlines() if ln.startswith("regokite_controller_definitions_reloads_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


def test_apply_starts_a_controller_delete_stops_it_while_another_runs_and_an_edit_reconfigures(
    cluster: Cluster, api: client.ApiClient, namespace: str, definition_crds: None
) -> None:
    a, b = kube.unique_name("hello-a"), kube.unique_name("hello-b")
    parents = kube.helloworlds(namespace)
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with ControllerProcess(
        cluster.kubeconfig, policies=[HELLO], controllers=[], namespace=namespace, extra=["--watch-definitions"]
    ) as ctl:
        try:
            create(api, DEFINITIONS, controller(a, "a"))
            create(api, DEFINITIONS, controller(b, "b"))
            for name in (a, b):
                kube.wait_for_condition(api, f"{DEFINITIONS}/{name}", "Accepted", timeout=30)
            create(api, parents, hello(namespace, "pa", "a", "A"))
            create(api, parents, hello(namespace, "pb", "b", "B"))
            pod_a = kube.wait_for(lambda: get(api, f"{pods}/pa"), what="controller a's pod", timeout=30)
            assert greeting(pod_a) == ["echo", "Hello, A!"]
            kube.wait_for(lambda: get(api, f"{pods}/pb"), what="controller b's pod", timeout=30)

            before = reloads(ctl.metrics())
            kube.delete(api, f"{DEFINITIONS}/{a}")
            kube.wait_for(ctl.metrics, lambda m: reloads(m) > before, what="the restart without controller a")
            assert "definitions changed: controllers restarted" in ctl.logs(200)

            merge_patch(api, f"{parents}/pa", {"spec": {"who": "A2"}})
            merge_patch(api, f"{parents}/pb", {"spec": {"who": "B2"}})
            kube.wait_for(
                lambda: get(api, f"{pods}/pb"),
                lambda p: greeting(p) == ["echo", "Hello, B2!"],
                what="controller b still acting",
                timeout=30,
            )
            after = get(api, f"{pods}/pa")
            assert after["metadata"]["uid"] == pod_a["metadata"]["uid"], "the deleted controller acted"
            assert greeting(after) == ["echo", "Hello, A!"]

            # An edit reconfigures: b now selects app=a too, so the change to pa is acted on.
            merge_patch(api, f"{DEFINITIONS}/{b}", {"spec": {"parentResource": {"labelSelector": None}}})
            kube.wait_for(
                lambda: get(api, f"{pods}/pa"),
                lambda p: greeting(p) == ["echo", "Hello, A2!"],
                what="the edited controller b taking over pa",
                timeout=30,
            )
        finally:
            for name in (a, b):
                if kube.exists(api, f"{DEFINITIONS}/{name}"):
                    kube.delete(api, f"{DEFINITIONS}/{name}")


def test_an_invalid_definition_on_the_server_says_why_in_its_status(
    cluster: Cluster, api: client.ApiClient, namespace: str, definition_crds: None
) -> None:
    name = kube.unique_name("broken")
    doc = controller(name, "x")
    doc["spec"]["hooks"]["sync"]["rego"]["package"] = "controllers.no_such_package"
    with ControllerProcess(
        cluster.kubeconfig, policies=[HELLO], controllers=[], namespace=namespace, extra=["--watch-definitions"]
    ):
        create(api, DEFINITIONS, doc)
        try:
            refused = kube.wait_for_condition(api, f"{DEFINITIONS}/{name}", "Accepted", status="False", timeout=30)
            message = kube.condition(refused, "Accepted")["message"]
            assert f"compositecontroller/{name}" in message and "controllers.no_such_package" in message
        finally:
            kube.delete(api, f"{DEFINITIONS}/{name}")


def test_an_edited_policy_file_recreates_the_pod_and_a_broken_one_keeps_the_last_good_set(
    cluster: Cluster, api: client.ApiClient, namespace: str, definition_crds: None, policies: Path
) -> None:
    rego = policies / "hello_world.rego"
    name = kube.unique_name("hello-live")
    pod_path = f"/api/v1/namespaces/{namespace}/pods/pl"
    with ControllerProcess(  # no --controllers: the definitions on the API server are run
        cluster.kubeconfig, policies=[policies], controllers=[], namespace=namespace
    ) as ctl:
        create(api, DEFINITIONS, controller(name, "live"))
        try:
            kube.wait_for_condition(api, f"{DEFINITIONS}/{name}", "Accepted", timeout=30)
            create(api, kube.helloworlds(namespace), hello(namespace, "pl", "live", "X"))
            first = kube.wait_for(lambda: get(api, pod_path), what="the pod", timeout=30)
            assert greeting(first) == ["echo", "Hello, X!"]

            (policies / "broken.rego").write_text("package broken\n\nallow if {\n")
            kube.wait_for(ctl.logs, lambda text: "last good set keeps running" in text, what="the refusal logged")
            state = ctl.readiness()["definitions"]
            assert name in state["running"] and "broken" in state["reload_error"]  # /readyz: still the last good set
            rego.write_text(rego.read_text().replace("Hello, %s!", "Howdy, %s!"))
            (policies / "broken.rego").unlink()
            assert_recreated_by_the_edit(api, pod_path, first, "X", ctl)
        finally:
            kube.delete(api, f"{DEFINITIONS}/{name}")


def test_a_watch_applied_to_the_cluster_runs_and_says_so_in_its_status(
    cluster: Cluster, api: client.ApiClient, namespace: str, definition_crds: None
) -> None:
    scaler = ROOT / "policies" / "watches" / "deployment_scaler"
    doc = yaml.safe_load((scaler / "watch.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    doc["spec"]["namespace"] = namespace
    watches = f"/apis/regokite.dev/v1alpha1/namespaces/{namespace}/watches"
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    with ControllerProcess(cluster.kubeconfig, policies=[scaler], controllers=[], namespace=namespace) as ctl:
        create(api, watches, doc)
        accepted = kube.wait_for_condition(api, f"{watches}/deployment-scaler", "Accepted", timeout=30)
        assert accepted["status"]["observedGeneration"] == accepted["metadata"]["generation"]
        create(api, deployments, {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "big", "namespace": namespace, "labels": {"enforce-max-replicas": "true"}},
            "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "big"}},
                     "template": {"metadata": {"labels": {"app": "big"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        })  # fmt: skip
        kube.wait_for(lambda: get(api, f"{deployments}/big"), lambda d: d["spec"]["replicas"] == 3, what="capped")
        assert f"{namespace}/deployment-scaler" in ctl.readiness()["definitions"]["running"]

        # a Watch naming a package the policies lack is refused in its status, the other keeps running
        bad = copy.deepcopy(doc)
        bad["metadata"]["name"] = "no-policy"
        bad["spec"]["policy"]["package"] = "watches.nothing_here"
        create(api, watches, bad)
        refused = kube.wait_for_condition(api, f"{watches}/no-policy", "Accepted", status="False", timeout=30)
        assert "watches.nothing_here" in refused["status"]["conditions"][0]["message"]
        merge_patch(api, f"{deployments}/big", {"spec": {"replicas": 8}})
        kube.wait_for(lambda: get(api, f"{deployments}/big"), lambda d: d["spec"]["replicas"] == 3, what="still capped")


def test_policy_files_reload_without_watching_the_clusters_definitions(
    cluster: Cluster, api: client.ApiClient, namespace: str, hello_crd: None, policies: Path
) -> None:
    rego = policies / "hello_world.rego"
    pod_path = f"/api/v1/namespaces/{namespace}/pods/pf"
    with ControllerProcess.running(cluster.kubeconfig, policies, namespace=namespace) as ctl:
        create(api, kube.helloworlds(namespace), hello(namespace, "pf", "any", "Y"))
        first = kube.wait_for(lambda: get(api, pod_path), what="the pod", timeout=30)
        assert greeting(first) == ["echo", "Hello, Y!"]
        rego.write_text(rego.read_text().replace("Hello, %s!", "Howdy, %s!"))
        assert_recreated_by_the_edit(api, pod_path, first, "Y", ctl)
        assert "definitions" in ctl.readiness()
