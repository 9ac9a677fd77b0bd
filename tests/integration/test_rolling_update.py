"""RollingInPlace on the real API server: one Worker at a time, gated on Ready, revisions recorded."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import kube
import yaml
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "controllers" / "rolling_set"


def set_ready(api: client.ApiClient, path: str, status: str) -> None:
    w = get(api, path)
    kube.request(
        api,
        "PATCH",
        f"{path}/status",
        {
            "status": {
                "observedGeneration": w["metadata"]["generation"],
                "conditions": [{"type": "Ready", "status": status}],
            }
        },
        content_type="application/merge-patch+json",
    )


def test_one_worker_at_a_time_gated_on_ready(cluster: Cluster, api: client.ApiClient, namespace: str) -> None:
    for crd in yaml.safe_load_all((EXAMPLE / "crd.yaml").read_text()):
        kube.install_crd(api, crd)
    parents = f"/apis/examples.regokite.dev/v1alpha1/namespaces/{namespace}/rollingsets"
    workers = f"/apis/examples.regokite.dev/v1alpha1/namespaces/{namespace}/workers"
    revisions = f"/apis/apps/v1/namespaces/{namespace}/controllerrevisions"
    names = [f"web-{i}" for i in range(3)]

    def versions() -> list[str]:
        return [get(api, f"{workers}/{n}")["spec"].get("version") for n in names]

    def rollout() -> dict | None:
        """The parent's `Updated` condition, as Metacontroller sets it during a rollout."""
        conditions = (get(api, f"{parents}/web").get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("type") == "Updated"), None)

    with ControllerProcess.running(cluster.kubeconfig, EXAMPLE, namespace=namespace) as ctl:
        create(
            api,
            parents,
            {
                "apiVersion": "examples.regokite.dev/v1alpha1",
                "kind": "RollingSet",
                "metadata": {"name": "web"},
                "spec": {"replicas": 3, "template": {"version": "v1"}},
            },
        )
        kube.wait_for(versions, lambda v: v == ["v1"] * 3, what="three v1 workers")
        for n in names:
            set_ready(api, f"{workers}/{n}", "True")

        merge_patch(api, f"{parents}/web", {"spec": {"template": {"version": "v2"}}})
        history: list[list[str]] = []

        def held_back() -> int:
            """Syncs in which the controller decided to hold the rollout (its own log of the decision)."""
            return sum(1 for r in ctl.log_records() if r.get("msg") == "rolling update" and r.get("paused_by"))

        def holds(expected_updated: int) -> None:
            """A sync after now decides to hold: no further worker moves while one is not Ready."""
            seen = held_back()
            merge_patch(api, f"{parents}/web", {"metadata": {"annotations": {"poke": str(seen)}}})
            kube.wait_for(held_back, lambda n: n > seen, what="a sync that holds the rollout", timeout=15)
            assert versions().count("v2") == expected_updated, versions()
            kube.wait_for(rollout, lambda c: (c or {}).get("reason") == "RolloutWaiting", what="RolloutWaiting")

        def step(expected_updated: int) -> None:
            v = kube.wait_for(
                versions, lambda v: v.count("v2") == expected_updated, what=f"{expected_updated} v2", timeout=15
            )
            history.append(v)
            if expected_updated < len(names):
                holds(expected_updated)  # and no further: the updated worker has not reported Ready yet

        step(1)
        updated = next(n for n, v in zip(names, versions(), strict=True) if v == "v2")
        set_ready(api, f"{workers}/{updated}", "True")
        step(2)

        # A failing status check on an updated worker stops the rollout.
        second = next(n for n, v in zip(names, versions(), strict=True) if v == "v2" and n != updated)
        set_ready(api, f"{workers}/{second}", "False")
        holds(2)
        set_ready(api, f"{workers}/{second}", "True")
        step(3)
        for n in names:
            set_ready(api, f"{workers}/{n}", "True")

        # Never more than one worker out of step between observations.
        for before, after in itertools.pairwise(history):
            assert after.count("v2") - before.count("v2") == 1

        # Revisions: the latest holds every worker; the old one is gone once empty.
        revs = kube.wait_for(
            lambda: get(api, revisions)["items"], lambda items: len(items) == 1, what="one revision left"
        )
        children = json.loads(revs[0]["metadata"]["annotations"]["regokite.dev/revision-children"])
        assert children == [{"apiGroup": "examples.regokite.dev", "kind": "Worker", "names": names}]
        assert revs[0]["data"]["parentPatch"] == {"spec": {"template": {"version": "v2"}}}
        assert revs[0]["metadata"]["ownerReferences"][0]["kind"] == "RollingSet"
        done = {"reason": "OnLatestRevision", "message": f"latest ControllerRevision: {revs[0]['metadata']['name']}"}
        kube.wait_for(
            rollout, lambda c: c == {"type": "Updated", "status": "True", **done}, what="the Updated condition"
        )

        # replicas is not in the revision: scaling applies at once, at the latest template.
        merge_patch(api, f"{parents}/web", {"spec": {"replicas": 4}})
        w = kube.wait_for(lambda: get(api, f"{workers}/web-3"), what="web-3")
        assert w["spec"] == {"version": "v2"}
