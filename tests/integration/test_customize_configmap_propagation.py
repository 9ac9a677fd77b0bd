"""Related resources (the customize hook): ConfigMapPropagation on the real API server."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "controllers" / "configmap_propagation"
PARENTS = "/apis/examples.regokite.dev/v1alpha1/configmappropagations"


@pytest.fixture
def namespaces(api: client.ApiClient) -> Iterator[list[str]]:
    names = [kube.unique_name("cmp") for _ in range(3)]
    for n in names:
        create(api, "/api/v1/namespaces", {"metadata": {"name": n}})
    yield names
    for n in names:
        kube.delete(api, f"/api/v1/namespaces/{n}")


def configmap(namespace: str, name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def propagation(name: str, source_ns: str, source: str, targets: list[str]) -> dict:
    return {
        "apiVersion": "examples.regokite.dev/v1alpha1",
        "kind": "ConfigMapPropagation",
        "metadata": {"name": name},
        "spec": {"sourceName": source, "sourceNamespace": source_ns, "targetNamespaces": targets},
    }


def test_a_source_change_reaches_exactly_the_propagations_that_relate_it(
    cluster: Cluster, api: client.ApiClient, namespaces: list[str]
) -> None:
    kube.install_crd(api, yaml.safe_load((EXAMPLE / "crd.yaml").read_text()))
    src, a, b = namespaces
    cms = "/api/v1/namespaces/{}/configmaps/{}"
    one, two = kube.unique_name("p"), kube.unique_name("p")
    create(api, f"/api/v1/namespaces/{src}/configmaps", configmap(src, "red", {"color": "red"}))
    create(api, f"/api/v1/namespaces/{src}/configmaps", configmap(src, "blue", {"color": "blue"}))
    with ControllerProcess.running(
        cluster.kubeconfig, EXAMPLE
    ) as ctl:  # cluster-wide: the parent is cluster-scoped and copies go to other namespaces
        create(api, PARENTS, propagation(one, src, "red", [a, b]))
        create(api, PARENTS, propagation(two, src, "blue", [a]))
        for ns in (a, b):
            copy = kube.wait_for(lambda ns=ns: get(api, cms.format(ns, "red")), what=f"red copied to {ns}")
            assert copy["data"] == {"color": "red"}
        blue = kube.wait_for(lambda: get(api, cms.format(a, "blue")), what="blue copied")
        kube.wait_for(
            lambda: get(api, f"{PARENTS}/{one}"),
            lambda p: p.get("status", {}).get("actual_copies") == 2,
            what="status.actual_copies == 2",
        )
        blue_parent_rv = get(api, f"{PARENTS}/{two}")["metadata"]["resourceVersion"]
        syncs_before = _syncs(ctl.metrics())

        # Change the red source: both red copies follow within seconds.
        changed = time.monotonic()
        merge_patch(api, cms.format(src, "red"), {"data": {"color": "crimson"}})
        for ns in (a, b):
            kube.wait_for(
                lambda ns=ns: get(api, cms.format(ns, "red")),
                lambda c: c["data"] == {"color": "crimson"},
                what=f"the red copy in {ns} updated",
                timeout=10,
            )
        assert time.monotonic() - changed < 5
        # Only the red propagation was synced for it: its sync and one per copy's own event, plus at most
        # one each for the two status writes before `syncs_before`, whose events may still have been on
        # their way on a loaded machine (a CI run counted 4); the blue copy and parent stay untouched.
        # Its last copy is written before the sync is counted, hence the wait.
        kube.wait_for(lambda: _syncs(ctl.metrics()) - syncs_before, lambda n: n >= 1, what="the red sync counted")
        assert _syncs(ctl.metrics()) - syncs_before <= 5
        assert get(api, cms.format(a, "blue"))["metadata"]["resourceVersion"] == blue["metadata"]["resourceVersion"]
        assert get(api, f"{PARENTS}/{two}")["metadata"]["resourceVersion"] == blue_parent_rv

        # An unrelated ConfigMap in the source namespace re-queues no parent; the blue source's
        # change, which comes after it on the same watch, re-queues one.
        requeued = _related(ctl.metrics(), "requeued")
        create(api, f"/api/v1/namespaces/{src}/configmaps", configmap(src, "green", {"color": "green"}))
        merge_patch(api, cms.format(src, "blue"), {"data": {"color": "navy"}})
        kube.wait_for(
            lambda: get(api, cms.format(a, "blue")),
            lambda c: c["data"] == {"color": "navy"},
            what="the blue copy updated",
            timeout=10,
        )
        assert _related(ctl.metrics(), "requeued") - requeued == 1

        # The source disappears: no copies are wanted any more.
        kube.delete(api, cms.format(src, "red"))
        for ns in (a, b):
            kube.wait_for_deletion(api, cms.format(ns, "red"), timeout=10)
        kube.delete(api, f"{PARENTS}/{one}")
        kube.delete(api, f"{PARENTS}/{two}")
        assert ctl.stop() == 0


def _related(text: str, result: str) -> float:
    return _sum(text, "regokite_controller_related_events_total{", f'result="{result}"')


def _syncs(text: str) -> float:
    return _sum(text, "regokite_controller_reconciles_total{", "")


def _sum(text: str, series: str, label: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(series) and 'controller="configmap-propagation"' in line and label in line:
            total += float(line.rsplit(" ", 1)[1])
    return total
