"""kube-controller-manager's garbage collector runs: regokite's children rely on it."""

from __future__ import annotations

import kube
from kube import Obj, create, delete, get
from kubernetes import client


def owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_a_child_with_a_controller_owner_reference_is_garbage_collected_after_its_parent(
    api: client.ApiClient, namespace: str
) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"
    parent = create(api, cms, {"metadata": {"name": "parent"}})
    create(api, cms, {"metadata": {"name": "child", "ownerReferences": [owner_ref(parent)]}})

    delete(api, f"{cms}/parent")

    kube.wait_for_deletion(api, f"{cms}/child", timeout=30)


def test_a_child_owned_by_a_custom_resource_is_garbage_collected_after_its_parent(
    api: client.ApiClient, namespace: str
) -> None:
    """The regokite case (a CR parent). The GC learns new kinds by rediscovering the API
    every 30 s, so right after a CRD appears collection can lag by up to that long.
    """
    group = f"{kube.unique_name('gc')}.test.regokite.dev"
    crd = kube.crd_manifest(group, "Parent")
    kube.install_crd(api, crd)
    try:
        parents = f"/apis/{group}/v1/namespaces/{namespace}/parents"
        parent = create(api, parents, {"apiVersion": f"{group}/v1", "kind": "Parent", "metadata": {"name": "p"}})
        cms = f"/api/v1/namespaces/{namespace}/configmaps"
        create(api, cms, {"metadata": {"name": "child", "ownerReferences": [owner_ref(parent)]}})
        assert get(api, f"{cms}/child")["metadata"]["ownerReferences"][0]["uid"] == parent["metadata"]["uid"]

        delete(api, f"{parents}/p")

        kube.wait_for_deletion(api, f"{cms}/child", timeout=75)
    finally:
        kube.uninstall_crd(api, crd["metadata"]["name"])
