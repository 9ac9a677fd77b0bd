"""The ClusterRole generated for HelloWorld is enough and no more.

The controller runs with a ServiceAccount token (TokenRequest API) bound only
to the generated roles: the HelloWorld flow works (a Pod appears, status.pods
is updated), and the same token is refused (403) on Secrets, ConfigMaps and
on deleting the parents it only reads.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import Cluster, create, get
from kubernetes import client

from regokite.manifests import generate
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
HELLO = ROOT / "policies" / "controllers" / "hello_world"


def leader_election_supported() -> bool:
    out = subprocess.run(
        [sys.executable, "-m", "regokite.cli", "controller", "--help"], capture_output=True, text=True, cwd=ROOT
    ).stdout
    return "--leader-elect" in out


@pytest.fixture(params=["leader-elect", "shards"])
def installed(
    api: client.ApiClient, namespace: str, request: pytest.FixtureRequest
) -> Iterator[tuple[list[dict], str]]:
    """The generated ServiceAccount and RBAC objects (leader election, or --shards), created for real in `namespace`."""
    name = kube.unique_name("rk")
    opts = generate.ControllerOptions(
        policies=[str(HELLO)],
        controllers=[str(HELLO)],
        namespace=namespace,
        name=name,
        include_namespace=False,
        shards=request.param == "shards",
    )
    objects = generate.controller_manifests(opts)
    kube.install_crd(api, yaml.safe_load((HELLO / "crd.yaml").read_text()))
    rbac = [
        o
        for o in objects
        if o["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    cluster_scoped = []
    for obj in rbac:
        group_version = obj["apiVersion"]
        prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        plural = {"ServiceAccount": "serviceaccounts"}.get(obj["kind"], obj["kind"].lower() + "s")
        ns = obj["metadata"].get("namespace")
        path = f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"
        create(api, path, obj)
        if not ns:
            cluster_scoped.append(f"{path}/{obj['metadata']['name']}")
    yield objects, name
    for path in cluster_scoped:
        kube.delete(api, path)


def sa_kubeconfig(cluster: Cluster, api: client.ApiClient, namespace: str, name: str, tmp: Path) -> Path:
    token = kube.request(
        api,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": cluster.server, "certificate-authority": str(cluster.ca_file)}}
        ],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": name, "namespace": namespace}}],
        "current-context": "c",
    }
    path = tmp / "sa.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def status_of(sa_api: client.ApiClient, method: str, path: str) -> int:
    try:
        kube.request(sa_api, method, path, query={"dryRun": "All"} if method == "DELETE" else None)
    except client.ApiException as e:
        return e.status
    return 200


def test_hello_world_runs_on_exactly_the_generated_role(
    cluster: Cluster, api: client.ApiClient, namespace: str, installed: tuple[list[dict], str], tmp_path: Path
) -> None:
    objects, name = installed
    kubeconfig = sa_kubeconfig(cluster, api, namespace, name, tmp_path)
    sa_cluster = kube.cluster_from_kubeconfig(kubeconfig)
    deployment_args = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    args = deployment_args["containers"][0]["args"]
    extra: list[str] = []
    if "--shards" in args:
        extra = ["--shards", "--leader-election-namespace", namespace]
        extra += args[args.index("--leader-election-name") : args.index("--leader-election-name") + 2]
    elif "--leader-elect" in args and leader_election_supported():
        extra = ["--leader-elect", "--leader-election-namespace", namespace]
        extra += args[args.index("--leader-election-name") : args.index("--leader-election-name") + 2]
    else:
        print("\n`regokite controller --leader-elect` is not available yet: running without leader election")

    with sa_cluster.api_client() as sa_api:
        # Refused: what the policies never asked for.
        assert status_of(sa_api, "GET", f"/api/v1/namespaces/{namespace}/secrets") == 403
        assert status_of(sa_api, "GET", "/api/v1/secrets") == 403
        assert status_of(sa_api, "GET", f"/api/v1/namespaces/{namespace}/configmaps") == 403
        parents = kube.helloworlds(namespace)
        assert status_of(sa_api, "DELETE", f"{parents}/nope") == 403
        assert status_of(sa_api, "GET", parents) == 200

        with ControllerProcess.running(kubeconfig, HELLO, extra=extra) as ctl:
            create(api, parents, kube.hello_world("rbac", "RBAC", namespace=namespace))
            pod = kube.wait_for(
                lambda: get(api, f"/api/v1/namespaces/{namespace}/pods/rbac"), what="the hello pod", timeout=60
            )
            assert pod["spec"]["containers"][0]["command"] == ["echo", "Hello, RBAC!"]
            kube.wait_for(
                lambda: get(api, f"{parents}/rbac"),
                lambda p: p.get("status", {}).get("pods") == 1,
                what="status.pods == 1 written with the ServiceAccount's token",
                timeout=60,
            )
            logs = ctl.logs()
            assert " 403" not in logs and "forbidden" not in logs.lower(), logs[-3000:]
