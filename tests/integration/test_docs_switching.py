"""The Switching-from pages, every shell block run in order against the real API server, so a
migration guide that stops working fails the suite (tests/docs/shell_blocks.py says how)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
from kube import Cluster
from kubernetes import client

from regokite.manifests.definition_crds import crds as definition_crds
from tests.docs.shell_blocks import Workspace, blocks, run_page, upstream, workspace

PAGES = ["switching/gatekeeper.md", "switching/opa-kube-mgmt.md", "switching/metacontroller.md"]


def kubectl(space: Workspace, *args: str) -> None:
    subprocess.run(["kubectl", *args], env=space.env, capture_output=True, timeout=120)


@pytest.fixture
def space(cluster: Cluster, tmp_path: Path) -> Workspace:
    return workspace(tmp_path, install=True, kubeconfig=cluster.kubeconfig)


@pytest.fixture
def metacontroller_running(api: client.ApiClient, space: Workspace) -> Iterator[None]:
    """The page's premise: Metacontroller's StatefulSet and definition CRDs are there (no nodes: it never runs)."""
    for crd in definition_crds():
        kube.install_crd(api, crd)
    kubectl(space, "create", "namespace", "metacontroller")
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "metacontroller", "namespace": "metacontroller"},
        "spec": {
            "replicas": 1,
            "serviceName": "",
            "selector": {"matchLabels": {"app": "metacontroller"}},
            "template": {
                "metadata": {"labels": {"app": "metacontroller"}},
                "spec": {"containers": [{"name": "metacontroller", "image": "metacontroller/metacontroller:v4"}]},
            },
        },
    }
    kube.create(api, "/apis/apps/v1/namespaces/metacontroller/statefulsets", statefulset)
    yield
    kubectl(space, "delete", "--ignore-not-found", "-n", "default", "helloworld", "my-hello", "--wait=false")
    kubectl(space, "delete", "--ignore-not-found", "compositecontroller", "hello-controller")
    kubectl(space, "delete", "--ignore-not-found", "namespace", "metacontroller", "--wait=false")


def test_switching_from_metacontroller_runs(
    api: client.ApiClient, space: Workspace, metacontroller_running: None, hello_crd: None, tmp_path: Path
) -> None:
    with run_page("switching/metacontroller.md", space, tmp_path):
        pass
    statefulset = kube.get(api, "/apis/apps/v1/namespaces/metacontroller/statefulsets/metacontroller")
    assert statefulset["spec"]["replicas"] == 0
    pod = kube.get(api, "/api/v1/namespaces/default/pods/my-hello")
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "HelloWorld"


@pytest.fixture
def gatekeeper_library(space: Workspace) -> Iterator[None]:
    if upstream() is None:
        pytest.skip("gatekeeper-library is not beside the repository (REGOKITE_UPSTREAM)")
    yield
    kubectl(space, "delete", "--ignore-not-found", "k8srequiredlabels", "all-must-have-owner")
    kubectl(space, "delete", "--ignore-not-found", "constrainttemplate", "k8srequiredlabels")
    kubectl(space, "delete", "--ignore-not-found", "crd", "k8srequiredlabels.constraints.gatekeeper.sh")


def test_switching_from_gatekeeper_runs(space: Workspace, gatekeeper_library: None, tmp_path: Path) -> None:
    with run_page("switching/gatekeeper.md", space, tmp_path) as outputs:
        pass
    assert "all-must-have-owner" in outputs[-3]  # the audit found the Namespaces without an owner


@pytest.fixture
def opa_namespace(space: Workspace) -> Iterator[None]:
    kubectl(space, "delete", "--ignore-not-found", "namespace", "opa", "--wait=true")
    yield
    kubectl(space, "delete", "--ignore-not-found", "namespace", "opa", "--wait=false")


def test_switching_from_opa_kube_mgmt_runs(space: Workspace, opa_namespace: None, tmp_path: Path) -> None:
    with run_page("switching/opa-kube-mgmt.md", space, tmp_path):
        pass
    assert (space.repo / "cm-policies").is_dir()


@pytest.mark.parametrize("page", PAGES)
def test_every_switching_page_needs_the_cluster_somewhere(page: str) -> None:
    """Each page ends on the real API server; its offline blocks run here too, in order."""
    assert any(b.cluster for b in blocks(page))
