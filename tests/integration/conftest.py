"""Fixtures for tests against a real control plane (etcd + kube-apiserver + KCM).

By default the session starts its own hermetic instance (temp dir, random ports)
with scripts/controlplane.py, building the binaries on first use; set
REGOKITE_KUBECONFIG to run against an existing cluster instead (e.g. one started
with `scripts/cluster up`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "scripts")]  # works under any import mode

import controlplane  # noqa: E402
import kube  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration is an integration test (`-m "not integration"`)."""
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def private_plane(tmp_path: Path) -> Iterator[controlplane.ControlPlane]:
    """A control plane of the test's own, for a test that stops or restarts the API server."""
    cp = controlplane.start(tmp_path / "cp")
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kube.Cluster]:
    """The API server under test; a private instance unless REGOKITE_KUBECONFIG is set."""
    external = os.environ.get("REGOKITE_KUBECONFIG")
    if external:
        found = kube.cluster_from_kubeconfig(Path(external))
        # A `scripts/cluster up` instance: its state file also tells where etcd is.
        state = controlplane.load(Path(external).resolve().parent)
        if state and state.kubeconfig == Path(external).resolve():
            found.etcd_url = state.etcd_url
        yield found
        return
    t0 = time.monotonic()
    try:
        cp = controlplane.start(tmp_path_factory.mktemp("controlplane"))
    except controlplane.ControlPlaneError as e:
        pytest.fail(f"could not start the control plane:\n{e}", pytrace=False)
    controlplane.log(f"session control plane up in {time.monotonic() - t0:.1f}s; logs in {cp.log_dir}")
    try:
        yield kube.Cluster.of(cp)
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def kubelet_standin(cluster: kube.Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    """scripts/kubelet_standin.py on the session cluster for one test module: one Node, Pods bound
    and made Running/Ready (a pass every 0.25 s; Succeeded for Never/OnFailure after 1 s); it deletes
    its Node when it stops, so modules that do not ask for it see Pods stay Pending as before. Yields
    its log file, or None on an external cluster whose stand-in already runs (`scripts/cluster up`)."""
    with cluster.api_client() as api:
        nodes = kube.get(api, "/api/v1/nodes", labelSelector="regokite.dev/kubelet-standin")["items"]
    if nodes and os.environ.get("REGOKITE_KUBECONFIG"):
        yield None
        return
    log = tmp_path_factory.mktemp("kubelet-standin") / "kubelet-standin.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(HERE.parents[1] / "scripts" / "kubelet_standin.py"),
                f"--kubeconfig={cluster.kubeconfig}",
                "--nodes=1",
                "--complete-after=1",
                "--interval=0.25",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=controlplane.die_with_parent,
        )
    try:
        yield log
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def api(cluster: kube.Cluster) -> Iterator[client.ApiClient]:
    """An admin ApiClient (system:masters) shared by the session."""
    with cluster.api_client() as c:
        yield c


@pytest.fixture(scope="session")
def dynamic(api: client.ApiClient) -> DynamicClient:
    """A DynamicClient (discovery happens on first use and is refreshed on a miss)."""
    return DynamicClient(api)


@pytest.fixture(scope="session")
def hello_crd(api: client.ApiClient) -> None:
    """Metacontroller's HelloWorld CRD (policies/controllers/hello_world), installed once and left:
    the garbage collector needs time to learn a new kind."""
    import yaml

    kube.install_crd(api, yaml.safe_load((HERE.parents[1] / "policies/controllers/hello_world/crd.yaml").read_text()))


@pytest.fixture(scope="session")
def definition_crds(api: client.ApiClient, hello_crd: None) -> None:
    """The HelloWorld CRD and regokite's definition CRDs (CompositeController, ..., Watch), for tests that
    apply definitions to the cluster."""
    from regokite.manifests.definition_crds import crds

    for crd in crds():
        kube.install_crd(api, crd)


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    """A fresh namespace, labelled with its own name so webhooks can select it."""
    name = kube.unique_name("t")
    kube.create(
        api,
        "/api/v1/namespaces",
        {"metadata": {"name": name, "labels": {kube.TEST_NAMESPACE_LABEL: name}}},
    )
    yield name
    try:
        kube.delete(api, f"/api/v1/namespaces/{name}")
    except client.ApiException as e:
        if e.status != 404:
            raise
