"""No child is created for a parent deleted while its cache was away (issue 27).

After an API server restart the child informer can relist before the parent informer (custom
resources are served after core ones): it sees the children the garbage collector removed and
re-queues their parents while the parent cache still holds them, and the controller recreated
their Pods. Here the parent informer is held away deterministically: its version is unserved
(its watch ends and its relists fail) while the parents are deleted and their Pods removed.
Before the fix every parent got a new Pod; now none does, counted from the controller's write
counter (writes the API server accepted) and its log of each parent found gone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import kube
import yaml
from kube import create, delete, get
from kubernetes.client.rest import ApiException

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "controllers" / "hello_world"
PARENTS = "/apis/example.com/v1/namespaces/default/helloworlds"
PARENTS_ALPHA = "/apis/example.com/v1alpha1/namespaces/default/helloworlds"
PODS = "/api/v1/namespaces/default/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
COUNT = 20


def hello(name: str) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "HelloWorld", "metadata": {"name": name}, "spec": {"who": name}}


def pod_exists(api: object, name: str) -> bool:
    try:
        get(api, f"{PODS}/{name}")  # type: ignore[arg-type]
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def pod_creates(ctl: ControllerProcess) -> float:
    """Pods the controller created (its write counter: only writes the API server accepted)."""
    for line in ctl.metrics().splitlines():
        if line.startswith("regokite_controller_writes_total{") and 'kind="Pod"' in line and 'verb="create"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def two_versions(crd: dict) -> dict:
    """The CRD served as v1 and v1alpha1 too, so v1 alone can stop being served for a while."""
    (v1,) = crd["spec"]["versions"]
    crd["spec"]["versions"] = [v1, {**v1, "name": "v1alpha1", "storage": False}]
    return crd


def served(api: object, name: str, on: bool) -> None:
    patch = [{"op": "replace", "path": "/spec/versions/0/served", "value": on}]
    kube.request(api, "PATCH", f"{CRDS}/{name}", patch, content_type="application/json-patch+json")  # type: ignore[arg-type]


def test_no_child_is_created_for_a_parent_deleted_while_its_cache_was_away(
    private_plane,  # the conftest's fixture
) -> None:
    cp = private_plane
    cluster = kube.Cluster.of(cp)
    with cluster.api_client() as api:
        crd = kube.install_crd(api, two_versions(yaml.safe_load((EXAMPLE / "crd.yaml").read_text())))
        crd_name = crd["metadata"]["name"]
        with ControllerProcess(cp.kubeconfig, policies=[EXAMPLE], controllers=[EXAMPLE / "controller.yaml"]) as ctl:
            names = {f"gone-{i}" for i in range(COUNT)}
            for name in sorted(names):
                create(api, PARENTS, hello(name))
            kube.wait_for(lambda: all(pod_exists(api, n) for n in names), what="every Pod", timeout=60)
            creates = pod_creates(ctl)
            before = len(ctl.log_records())
            # the parent informer away (its version unserved: its watch ends, its relists fail) while
            # the parents are deleted and their Pods removed, as the garbage collector would
            served(api, crd_name, False)
            kube.wait_for(
                lambda: ctl.log_records()[before:],
                lambda records: any("helloworlds" in r.get("informer", "") for r in records),
                what="the parent informer's watch to fail",
            )
            for name in names:
                delete(api, f"{PARENTS_ALPHA}/{name}")
                with contextlib.suppress(ApiException):  # the garbage collector may be first
                    delete(api, f"{PODS}/{name}")
            kube.wait_for(
                lambda: pod_creates(ctl) - creates + len(gone_logged(ctl.log_records()[before:])),
                lambda handled: handled >= COUNT,
                what="the parents of the deleted Pods to be synced",
                timeout=60,
            )
            served(api, crd_name, True)
            # a parent created now gets its Pod: the controller is back and its caches are current
            kube.wait_for(lambda: try_create(api, hello("after")), what="v1 served again")
            kube.wait_for(lambda: pod_exists(api, "after"), what="the Pod of a parent made after", timeout=60)
            created = pod_creates(ctl) - creates - 1
            assert created == 0, f"{created:g} Pods created for deleted parents"
            assert len(gone_logged(ctl.log_records()[before:])) == COUNT


def try_create(api: object, parent: dict) -> bool:
    try:
        create(api, PARENTS, parent)  # type: ignore[arg-type]
    except ApiException as exc:
        if exc.status != 404:
            raise
        return False
    return True


def gone_logged(records: list[dict]) -> set[str]:
    """The parents the controller found gone before creating their children."""
    return {r["object"] for r in records if r.get("msg") == "not creating children: the object is gone"}
