"""`regokite controller --policy-namespaces NS --watch-definitions`: a CompositeController whose hook
Rego arrives later, in a kube-mgmt-labelled ConfigMap, waits (refused, saying which package is missing)
and starts once the ConfigMap loads; no `--policies` directory and no `regokite configmaps` beside it."""

from __future__ import annotations

import json
from pathlib import Path

import kube
import yaml
from kube import Cluster, create, get
from kubernetes import client

from regokite.sources.configmap_policies import STATUS_ANNOTATION
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"
DEFINITIONS = "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers"


def test_a_definition_waits_for_its_hook_package_to_arrive_in_a_configmap(
    cluster: Cluster, api: client.ApiClient, namespace: str, definition_crds: None
) -> None:
    name = kube.unique_name("hello-cm")
    definition = yaml.safe_load((HELLO / "controller.yaml").read_text())
    definition["metadata"]["name"] = name
    definition["spec"]["parentResource"]["labelSelector"] = {"matchLabels": {"app": name}}
    parents = kube.helloworlds(namespace)
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    extra = ["--watch-definitions", "--policy-namespaces", namespace]
    with ControllerProcess(cluster.kubeconfig, policies=[], controllers=[], namespace=namespace, extra=extra) as ctl:
        try:
            create(api, DEFINITIONS, definition)
            create(api, parents, kube.hello_world("p", labels={"app": name}))
            refused = kube.wait_for_condition(api, f"{DEFINITIONS}/{name}", "Accepted", status="False", timeout=30)
            assert "controllers.hello_world" in kube.condition(refused, "Accepted")["message"]

            rego = (HELLO / "hello_world.rego").read_text()
            create(api, cms, {"metadata": {"name": "hello-hook", "labels": {"openpolicyagent.org/policy": "rego"}},
                              "data": {"hello_world.rego": rego}})  # fmt: skip
            pod = kube.wait_for(
                lambda: get(api, f"/api/v1/namespaces/{namespace}/pods/p"), what="the hook's Pod", timeout=60
            )
            assert pod["spec"]["containers"][0]["command"] == ["echo", "Hello, Ada!"]
            kube.wait_for_condition(api, f"{DEFINITIONS}/{name}", "Accepted", timeout=30)
            annotations = get(api, f"{cms}/hello-hook")["metadata"]["annotations"]
            assert json.loads(annotations[STATUS_ANNOTATION]) == {"status": "ok"}
        except BaseException:
            print(ctl.logs(60))
            raise
        finally:
            kube.delete(api, f"{DEFINITIONS}/{name}")
