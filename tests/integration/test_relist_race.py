"""No child is created for a parent deleted while the controller was away (issue 27).

The controller is stopped (SIGSTOP) and the API server killed, so its watch streams die before any
event could be buffered for it; the API server comes back, the parents are deleted with their Pods,
and the API server is killed again and started with etcd's history compacted; then the controller
resumes. Its watches break, resume from a resourceVersion older than the new API server's history
and get 410 Gone, and its informers relist, not all at once: custom resources are served after core
ones, so the child informer can relist first, see the Pods gone and re-queue their parents while
the parent cache still holds them. The controller recreated their Pods. Here the parent informer is
held back deterministically (its version unserved across the second restart: its relists fail)
until every re-queued parent was synced. Counted by the API server itself, from its audit log of
creates: 0 Pods created for the deleted parents (20 before the fix), and the one parent made
afterwards gets its Pod exactly once.

(A SIGSTOP alone is not enough: the kernel keeps receiving the watch events of the stopped
controller, which reads them all on SIGCONT and resumes at the head of history, without a 410 and
without having missed anything.)
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import controlplane
import kube
import pytest
import yaml
from kube import create, delete, get
from kubernetes.client.rest import ApiException

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "controllers" / "hello_world"
PARENTS = kube.helloworlds("default")
PARENTS_ALPHA = "/apis/example.com/v1alpha1/namespaces/default/helloworlds"
PODS = "/api/v1/namespaces/default/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
COUNT = 20


@pytest.fixture
def audited_plane(tmp_path: Path) -> Iterator[controlplane.ControlPlane]:
    """A control plane of the test's own whose API server logs every write it answers."""
    cp = controlplane.start(tmp_path / "cp", audit=True)
    try:
        yield cp
    finally:
        cp.stop()


def hello(name: str) -> dict:
    return kube.hello_world(name, name)


def pod_exists(api: object, name: str) -> bool:
    try:
        get(api, f"{PODS}/{name}")  # type: ignore[arg-type]
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def pods_created(cp: controlplane.ControlPlane, since: int) -> list[str]:
    """The Pods the API server created in `default` after its `since`-th audited write, by name: its
    answers 201 Created, to a POST or to a server-side apply (a PATCH) that made the object."""
    return [
        e["objectRef"].get("name", "")
        for e in controlplane.audit_writes(cp)[since:]
        if e["objectRef"].get("resource") == "pods"
        and e["objectRef"].get("namespace") == "default"
        and e.get("responseStatus", {}).get("code") == 201
    ]


def two_versions(crd: dict) -> dict:
    """The CRD served as v1 and v1alpha1 too, so v1 alone can stop being served for a while."""
    (v1,) = crd["spec"]["versions"]
    crd["spec"]["versions"] = [v1, {**v1, "name": "v1alpha1", "storage": False}]
    return crd


def served(api: object, name: str, on: bool) -> None:
    patch = [{"op": "replace", "path": "/spec/versions/0/served", "value": on}]
    kube.request(api, "PATCH", f"{CRDS}/{name}", patch, content_type="application/json-patch+json")  # type: ignore[arg-type]


def test_no_child_is_created_for_a_parent_deleted_while_the_controller_and_the_api_server_were_away(
    audited_plane: controlplane.ControlPlane,
) -> None:
    cp = audited_plane
    cluster = kube.Cluster.of(cp)
    with cluster.api_client() as api:
        crd = kube.install_crd(api, two_versions(yaml.safe_load((EXAMPLE / "crd.yaml").read_text())))
        crd_name = crd["metadata"]["name"]
        with ControllerProcess(cp.kubeconfig, policies=[EXAMPLE], controllers=[EXAMPLE / "controller.yaml"]) as ctl:
            names = {f"gone-{i}" for i in range(COUNT)}
            for name in sorted(names):
                create(api, PARENTS, hello(name))
            kube.wait_for(lambda: all(pod_exists(api, n) for n in names), what="every Pod", timeout=60)
            assert ctl.proc is not None
            ctl.proc.send_signal(signal.SIGSTOP)  # the controller away
            try:
                controlplane.restart(cp, "kube-apiserver")  # its watch streams gone with nothing buffered
                since = len(controlplane.audit_writes(cp))
                served(api, crd_name, False)  # holds the parent informer back once the controller resumes
                for name in names:
                    delete(api, f"{PARENTS_ALPHA}/{name}")
                    with contextlib.suppress(ApiException):  # the garbage collector may be first
                        delete(api, f"{PODS}/{name}")
                controlplane.restart(cp, "kube-apiserver", 1.0, lambda: kube.compact_etcd(cp.etcd_url))
            finally:
                ctl.proc.send_signal(signal.SIGCONT)
            before = len(ctl.log_records())
            # the Pod informer relists (410 Gone), sees the Pods gone and re-queues their parents, which
            # the parent cache still holds: each is either given a Pod or found gone
            kube.wait_for(
                lambda: len(set(pods_created(cp, since)) & names) + len(gone_logged(ctl.log_records()[before:])),
                lambda handled: handled >= COUNT,
                what="the parents of the deleted Pods to be synced",
                timeout=90,
            )
            served(api, crd_name, True)
            # a parent created now gets its Pod: the controller is back and its caches are current
            kube.wait_for(lambda: try_create(api, hello("after")), what="v1 served again")
            kube.wait_for(lambda: pod_exists(api, "after"), what="the Pod of a parent made after", timeout=60)
        created = pods_created(cp, since)
        assert created.count("after") == 1, created  # the audit counts the controller's creates
        spurious = sorted(set(created) & names)
        assert not spurious, f"{len(spurious)} Pods created for deleted parents: {spurious}"
        assert gone_logged(ctl.log_records()[before:]) == names


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
    return {
        r["object"].rsplit("/", 1)[-1] for r in records if r.get("msg") == "not creating children: the object is gone"
    }
