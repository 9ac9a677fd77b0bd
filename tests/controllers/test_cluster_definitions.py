"""Definitions read from the (fake) API server: parsed as files are, each given an Accepted status."""

from __future__ import annotations

import copy
from pathlib import Path

from regokite import yamldoc
from regokite.controllers.cluster_definitions import read, report
from regokite.kube.actuator import Actuator
from regokite.kube.discovery import Discovery
from tests.kube_api.fake import FakeKube

ROOT = Path(__file__).resolve().parents[2]
HELLO = next(yamldoc.load_all((ROOT / "policies/controllers/hello_world/controller.yaml").read_text()))
COLLECTION = "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers"


def served() -> FakeKube:
    fake = FakeKube()
    fake.serve(
        "metacontroller.k8s.io/v1alpha1", "compositecontrollers", "CompositeController", namespaced=False, status=True
    )
    fake.serve("metacontroller.k8s.io/v1alpha1", "decoratorcontrollers", "DecoratorController", namespaced=False)
    return fake


def accepted(fake: FakeKube, name: str) -> dict:
    return fake.stored(f"{COLLECTION}/{name}")["status"]["conditions"][0]


def test_a_definition_on_the_server_is_accepted_and_says_so() -> None:
    fake = served()
    fake.put(COLLECTION, {**HELLO, "metadata": {**HELLO["metadata"], "generation": 3, "uid": "u1"}})
    found = read(fake, Discovery(fake))
    assert [d.name for d in found.controllers] == ["hello-controller"]
    assert found.controllers[0].hooks.sync.package == "controllers.hello_world"
    report(found, Actuator(fake))
    assert accepted(fake, "hello-controller") == {
        "type": "Accepted",
        "status": "True",
        "reason": "Accepted",
        "message": "running",
    }
    assert fake.stored(f"{COLLECTION}/hello-controller")["status"]["observedGeneration"] == 3
    writes = len(fake.writes())
    report(read(fake, Discovery(fake)), Actuator(fake))
    assert len(fake.writes()) == writes, "an unchanged status is not written again"


def test_an_invalid_definition_is_refused_with_field_paths_and_the_others_run() -> None:
    fake = served()
    fake.put(COLLECTION, HELLO)
    broken = copy.deepcopy(HELLO)
    broken["metadata"]["name"] = "broken"
    broken["spec"]["childResources"][0]["updateStrategy"]["method"] = "Sideways"
    broken["spec"]["hooks"]["sync"] = {"rego": {"package": "controllers.hello_world", "timout": "1s"}}
    fake.put(COLLECTION, broken)
    found = read(fake, Discovery(fake))
    assert [d.name for d in found.controllers] == ["hello-controller"]
    report(found, Actuator(fake))
    condition = accepted(fake, "broken")
    assert condition["status"] == "False" and condition["reason"] == "InvalidDefinition"
    assert (
        "compositecontroller/broken: CompositeController broken: spec.childResources[0].updateStrategy.method"
        in (condition["message"])
    )
    assert "spec.hooks.sync.rego" in condition["message"] and "timout" in condition["message"]
    assert accepted(fake, "hello-controller")["status"] == "True"


def test_no_crd_installed_means_no_definitions_and_a_crd_installed_later_is_found() -> None:
    fake = FakeKube()
    discovery = Discovery(fake)
    assert read(fake, discovery).controllers == []
    fake.serve("metacontroller.k8s.io/v1alpha1", "compositecontrollers", "CompositeController", namespaced=False)
    fake.put(COLLECTION, HELLO)
    assert [d.name for d in read(fake, discovery).controllers] == ["hello-controller"]


def test_the_fingerprint_changes_with_a_spec_and_not_with_status_or_metadata() -> None:
    fake = served()
    fake.put(COLLECTION, HELLO)
    first = read(fake, Discovery(fake))
    report(first, Actuator(fake))
    again = read(fake, Discovery(fake))
    assert again.fingerprint() == first.fingerprint()
    changed = copy.deepcopy(HELLO)
    changed["spec"]["resyncPeriodSeconds"] = 5
    fake.put(COLLECTION, changed)
    assert read(fake, Discovery(fake)).fingerprint() != first.fingerprint()


def test_a_status_that_cannot_be_written_is_logged_not_fatal() -> None:
    fake = served()
    fake.put(COLLECTION, HELLO)
    fake.fail("PATCH", f"{COLLECTION}/hello-controller/status", 403, "Forbidden")
    found = read(fake, Discovery(fake))
    report(found, Actuator(fake))
    assert [d.name for d in found.controllers] == ["hello-controller"]
    assert "status" not in fake.stored(f"{COLLECTION}/hello-controller")


def test_a_refused_edit_keeps_the_last_accepted_version_running() -> None:
    fake = served()
    fake.put(COLLECTION, HELLO)
    before = read(fake, Discovery(fake))
    broken = copy.deepcopy(HELLO)
    broken["spec"]["childResources"][0]["updateStrategy"]["method"] = "Sideways"
    fake.put(COLLECTION, broken)
    found = read(fake, Discovery(fake), before)
    assert found.controllers == before.controllers and found.kept == {"hello-controller"}
    report(found, Actuator(fake))
    condition = accepted(fake, "hello-controller")
    assert condition["status"] == "False" and "the last accepted version keeps running" in condition["message"]
    assert read(fake, Discovery(fake)).controllers == []  # with nothing accepted before, nothing runs
