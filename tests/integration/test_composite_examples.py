"""The example controllers in policies/controllers, and bad policy output, on the real API server."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import kube
import pytest
import yaml
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.definitions_text import composite_controller
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "policies" / "controllers"


@contextmanager
def example_running(
    cluster: Cluster, api: client.ApiClient, namespace: str, example: str, *extra: str
) -> Iterator[None]:
    """The example's CRD installed and its controller running on its definitions and policies as shipped."""
    kube.install_crd(api, yaml.safe_load((EXAMPLES / example / "crd.yaml").read_text()))
    with ControllerProcess.running(cluster.kubeconfig, EXAMPLES / example, namespace=namespace, extra=list(extra)):
        yield


def rfc3339(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_temporary_access_rolebinding_exists_only_inside_its_window(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    """Definition (OPA v0 webhook URL) and v0-compatible policy used verbatim."""
    parents = f"/apis/access.example.com/v1/namespaces/{namespace}/temporaryaccesses"
    binding = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/alice"
    with example_running(cluster, api, namespace, "temporary_access", "--v0-compatible"):
        start = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=3)
        create(
            api,
            parents,
            {
                "apiVersion": "access.example.com/v1",
                "kind": "TemporaryAccess",
                "metadata": {"name": "alice"},
                "spec": {
                    "user": "alice",
                    "role": "view",
                    "validFrom": rfc3339(start),
                    "validUntil": rfc3339(start + dt.timedelta(seconds=4)),
                },
            },
        )
        pending = kube.wait_for(
            lambda: get(api, f"{parents}/alice"),
            lambda p: p.get("status", {}).get("phase") == "Pending",
            what="phase Pending",
        )
        assert not kube.exists(api, binding)
        assert dt.datetime.now(dt.UTC) < start, "the test machine is too slow for a 3 s window"
        assert pending["status"]["bindings"] == 0

        rb = kube.wait_for(lambda: get(api, binding), what="the RoleBinding inside the window", timeout=15)
        assert dt.datetime.now(dt.UTC) >= start - dt.timedelta(seconds=1)
        assert rb["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
        assert rb["roleRef"]["name"] == "view"

        kube.wait_for_deletion(api, binding, timeout=15)
        assert dt.datetime.now(dt.UTC) >= start + dt.timedelta(seconds=3)
        kube.wait_for(
            lambda: get(api, f"{parents}/alice"),
            lambda p: p.get("status", {}).get("phase") == "Expired",
            what="phase Expired",
        )


def test_finalize_tears_children_down_in_order_then_releases_the_parent(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    parents = f"/apis/example.com/v1/namespaces/{namespace}/configbundles"
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    with example_running(cluster, api, namespace, "config_bundle"):
        create(
            api,
            parents,
            {
                "apiVersion": "example.com/v1",
                "kind": "ConfigBundle",
                "metadata": {"name": "b"},
                "spec": {"configs": [{"a": "1"}, {"b": "2"}, {"c": "3"}]},
            },
        )
        for i in range(3):
            kube.wait_for(lambda i=i: get(api, f"{cms}/b-{i}"), what=f"configmap b-{i}")
        parent = kube.wait_for(
            lambda: get(api, f"{parents}/b"),
            lambda p: p.get("status", {}).get("configMaps") == 3,
            what="status.configMaps == 3",
        )
        assert parent["metadata"]["finalizers"] == ["metacontroller.io/compositecontroller-config-bundle"]

        seen_order: list[list[str]] = []

        def remaining() -> list[str]:
            names = sorted(
                c["metadata"]["name"]
                for c in get(api, cms)["items"]
                if c["metadata"]["name"].startswith("b-") and not c["metadata"].get("deletionTimestamp")
            )
            if not seen_order or seen_order[-1] != names:
                seen_order.append(names)
            return names

        kube.delete(api, f"{parents}/b")
        kube.wait_for_deletion(api, f"{parents}/b", timeout=30)
        kube.wait_for(remaining, lambda r: r == [], what="every configmap gone", interval=0.02)
        # Last entry first: any intermediate state observed is a prefix of b-0, b-1, b-2.
        for names in seen_order:
            assert names == ["b-0", "b-1", "b-2"][: len(names)], seen_order
        events = get(api, f"/api/v1/namespaces/{namespace}/events")["items"]
        assert any(e["reason"] == "TearingDown" and e["involvedObject"]["name"] == "b" for e in events)


BROKEN_POLICY = """package controllers.sometimes_broken

cm := {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}, "data": {"v": input.parent.spec.value}}

children := [cm] if not input.parent.spec.broken

children := [cm, {"apiVersion": "v1", "metadata": {"name": "no-kind"}}] if input.parent.spec.broken

status := {"value": input.parent.spec.value}
"""

BROKEN_CONTROLLER = composite_controller(
    "sometimes-broken", "brokens", "configmaps", "rego: {package: controllers.sometimes_broken}"
)


@pytest.fixture
def broken_policy(tmp_path: Path) -> Path:
    (tmp_path / "broken.rego").write_text(BROKEN_POLICY)
    (tmp_path / "controller.yaml").write_text(BROKEN_CONTROLLER)
    return tmp_path


def test_invalid_policy_output_leaves_children_untouched_and_records_an_event(
    cluster: Cluster, api: client.ApiClient, namespace: str, broken_policy: Path
) -> None:
    kube.install_crd(api, kube.crd_manifest("example.com", "Broken"))
    parents = f"/apis/example.com/v1/namespaces/{namespace}/brokens"
    cm = f"/api/v1/namespaces/{namespace}/configmaps/keep"
    with ControllerProcess.running(cluster.kubeconfig, broken_policy, namespace=namespace):
        create(
            api,
            parents,
            {"apiVersion": "example.com/v1", "kind": "Broken", "metadata": {"name": "x"}, "spec": {"value": "1"}},
        )
        kube.wait_for(lambda: get(api, cm), lambda c: c["data"] == {"v": "1"}, what="configmap v=1")
        merge_patch(api, f"{parents}/x", {"spec": {"value": "2", "broken": True}})

        def warning() -> list[dict]:
            items = get(api, f"/api/v1/namespaces/{namespace}/events")["items"]
            return [e for e in items if e["reason"] == "InvalidHookOutput" and e["involvedObject"]["name"] == "x"]

        [event] = kube.wait_for(warning, what="an InvalidHookOutput event on the parent")
        assert event["type"] == "Warning"
        assert "policy controllers.sometimes_broken, rule children: children[1] has no kind" in event["message"]
        # The Warning is recorded once the response was refused, before any write of that sync.
        assert get(api, cm)["data"] == {"v": "1"}, "a bad response must not be half-applied"
        assert get(api, f"{parents}/x")["status"]["value"] == "1"

        merge_patch(api, f"{parents}/x", {"spec": {"broken": False}})
        kube.wait_for(lambda: get(api, cm), lambda c: c["data"] == {"v": "2"}, what="configmap v=2 once fixed")
