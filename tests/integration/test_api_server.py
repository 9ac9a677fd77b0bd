"""The API server behaves as regokite's controllers will rely on: CRDs, apply, status, watch."""

from __future__ import annotations

import json
from collections.abc import Iterator

import kube
import pytest
from kube import Obj, apply, create, delete, get, merge_patch, request, watch
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

GROUP = "test.regokite.dev"
WIDGETS = f"/apis/{GROUP}/v1"


@pytest.fixture(scope="module")
def widget_crd(api: client.ApiClient) -> Iterator[Obj]:
    crd = kube.crd_manifest(GROUP, "Widget")
    yield kube.install_crd(api, crd)
    kube.uninstall_crd(api, crd["metadata"]["name"])


def widgets(namespace: str) -> str:
    return f"{WIDGETS}/namespaces/{namespace}/widgets"


def widget(name: str, **spec: object) -> Obj:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def test_a_crd_can_be_installed_and_its_custom_resources_created_read_updated_and_deleted(
    api: client.ApiClient, dynamic: DynamicClient, widget_crd: Obj, namespace: str
) -> None:
    assert kube.condition(widget_crd, "Established")["status"] == "True"

    created = create(api, widgets(namespace), widget("w1", size=1))
    assert created["metadata"]["uid"]
    assert created["metadata"]["generation"] == 1

    path = f"{widgets(namespace)}/w1"
    assert get(api, path)["spec"] == {"size": 1}

    replaced = request(api, "PUT", path, {**created, "spec": {"size": 2}})
    assert replaced["metadata"]["generation"] == 2
    assert int(replaced["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    stale = {**created, "spec": {"size": 3}}  # carries the old resourceVersion
    with pytest.raises(ApiException) as conflict:
        request(api, "PUT", path, stale)
    assert conflict.value.status == 409

    listed = get(api, widgets(namespace))
    assert [w["metadata"]["name"] for w in listed["items"]] == ["w1"]
    via_dynamic = dynamic.resources.get(api_version=f"{GROUP}/v1", kind="Widget").get(namespace=namespace)
    assert [w.metadata.name for w in via_dynamic.items] == ["w1"]

    delete(api, path)
    kube.wait_for_deletion(api, path, timeout=10)


def test_server_side_apply_records_each_field_manager_in_managed_fields(
    api: client.ApiClient, widget_crd: Obj, namespace: str
) -> None:
    path = f"{widgets(namespace)}/w"
    apply(api, path, widget("w", color="red"), manager="alice")
    both = apply(api, path, widget("w", shape="round"), manager="bob")

    assert both["spec"] == {"color": "red", "shape": "round"}
    owners = {
        m["manager"]: set(m["fieldsV1"]["f:spec"])
        for m in both["metadata"]["managedFields"]
        if m["operation"] == "Apply"
    }
    assert owners == {"alice": {"f:color"}, "bob": {"f:shape"}}

    with pytest.raises(ApiException) as conflict:
        apply(api, path, widget("w", color="blue"), manager="bob")
    assert conflict.value.status == 409
    assert "conflict" in json.loads(conflict.value.body)["message"].lower()

    forced = apply(api, path, widget("w", color="blue", shape="round"), manager="bob", force=True)
    assert forced["spec"]["color"] == "blue"
    managers = {m["manager"] for m in forced["metadata"]["managedFields"]}
    assert managers == {"bob"}, "forcing takes color from alice, who then owns nothing"


def test_the_status_subresource_changes_status_but_never_spec(
    api: client.ApiClient, widget_crd: Obj, namespace: str
) -> None:
    path = f"{widgets(namespace)}/w"
    create(api, widgets(namespace), widget("w", size=1))

    updated = merge_patch(api, f"{path}/status", {"spec": {"size": 99}, "status": {"phase": "Ready"}})
    assert updated["status"] == {"phase": "Ready"}
    assert updated["spec"] == {"size": 1}, "spec changes through /status are ignored"
    assert updated["metadata"]["generation"] == 1, "status writes do not bump generation"

    main = merge_patch(api, path, {"status": {"phase": "Hacked"}, "spec": {"size": 2}})
    assert main["status"] == {"phase": "Ready"}, "status changes through the main resource are ignored"
    assert main["metadata"]["generation"] == 2


def test_a_watch_resumed_from_a_resource_version_sees_the_changes_made_meanwhile(
    api: client.ApiClient, namespace: str
) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    mine = {"labels": {"test": "watch"}}  # KCM adds kube-root-ca.crt at its own pace
    first = create(api, cms, {"metadata": {"name": "a", **mine}, "data": {"v": "1"}})
    resume_from = first["metadata"]["resourceVersion"]

    merge_patch(api, f"{cms}/a", {"data": {"v": "2"}})
    create(api, cms, {"metadata": {"name": "b", **mine}})
    delete(api, f"{cms}/a")

    seen = []
    events = watch(api, cms, resource_version=resume_from, timeout_seconds=5, labelSelector="test=watch")
    for event in events:
        seen.append((event["type"], event["object"]["metadata"]["name"]))
        if len(seen) == 3:
            break
    assert seen == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]


def test_a_watch_from_a_resource_version_the_server_no_longer_remembers_gets_410_gone(
    api: client.ApiClient, namespace: str
) -> None:
    """Informers must relist on 410. The API server answers watches from its watch cache,
    whose history for a kind begins when it starts serving that kind (as after an API
    server restart), so an older resourceVersion is gone: in 1.20 the stream opens with
    200 and its first event is an ERROR carrying a 410 Status.
    """
    before = get(api, f"/api/v1/namespaces/{namespace}")["metadata"]["resourceVersion"]
    group = f"{kube.unique_name('w')}.test.regokite.dev"  # a kind the server never served
    crd = kube.crd_manifest(group, "Gadget")
    kube.install_crd(api, crd)
    try:
        gadgets = f"/apis/{group}/v1/namespaces/{namespace}/gadgets"
        create(api, gadgets, {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"}})

        events = list(watch(api, gadgets, resource_version=before, timeout_seconds=3))

        assert events, "the watch ended without any event"
        first = events[0]
        assert first["type"] == "ERROR", events
        assert first["object"]["code"] == 410
        assert first["object"]["reason"] == "Expired"
        assert "too old resource version" in first["object"]["message"]
    finally:
        kube.uninstall_crd(api, crd["metadata"]["name"])


def test_a_list_at_a_resource_version_compacted_away_in_etcd_gets_410_gone(
    api: client.ApiClient, cluster: kube.Cluster, namespace: str
) -> None:
    """An exact-resourceVersion list bypasses the watch cache and reads etcd's history;
    once etcd compacts that revision the API server must answer 410 Expired.
    """
    if cluster.etcd_url is None:
        pytest.skip("needs direct etcd access to compact (external cluster)")
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    old = create(api, cms, {"metadata": {"name": "c"}})["metadata"]["resourceVersion"]
    merge_patch(api, f"{cms}/c", {"data": {"v": "1"}})
    assert get(api, cms, resourceVersion=old, resourceVersionMatch="Exact")["items"]

    compacted_to = kube.compact_etcd(cluster.etcd_url)
    assert compacted_to > int(old)

    with pytest.raises(ApiException) as gone:
        get(api, cms, resourceVersion=old, resourceVersionMatch="Exact")
    assert gone.value.status == 410
    assert json.loads(gone.value.body)["reason"] == "Expired"
