"""DecoratorController, pure parts: definitions, selection, response translation, label/annotation applies."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.controllers.children import decorate_child
from regokite.controllers.decorator import decisions as decorator
from regokite.controllers.definitions import DefinitionError, load_definitions
from regokite.controllers.hooks import ChildType
from regokite.errors import HookError

EXAMPLES = Path(__file__).resolve().parents[3] / "policies" / "controllers"
SERVICE = ChildType("v1", "services", "Service", namespaced=True)
STS = ChildType("apps/v1", "statefulsets", "StatefulSet", namespaced=True)

DECO = """
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: d}
spec:
  resources:
    - apiVersion: apps/v1
      resource: statefulsets
      labelSelector: {matchLabels: {tier: web}}
      annotationSelector:
        matchAnnotations: {decorate: "yes"}
        matchExpressions: [{key: ports, operator: Exists}]
  attachments:
    - {apiVersion: v1, resource: services, updateStrategy: {method: %s}}
  resyncPeriodSeconds: 5
  hooks:
    sync: {rego: {package: a.b}}
    customize: {webhook: {url: "http://opa:8181/v1/data/a/c"}}
"""


def load(tmp_path: Path, text: str) -> list:
    path = tmp_path / "d.yaml"
    path.write_text(text)
    return load_definitions([path])


def obj(labels=None, annotations=None) -> dict:
    return {"metadata": {"name": "x", "labels": labels or {}, "annotations": annotations or {}}}


def test_the_service_per_pod_example_loads_as_two_decorators() -> None:
    a, b = load_definitions([EXAMPLES / "service_per_pod" / "controller.yaml"])
    assert isinstance(a, decorator.DecoratorController)
    assert (a.name, b.name) == ("service-per-pod", "pod-name-label")
    assert a.attachments[0].update_method == "InPlace"
    assert a.hooks.finalize.package == "controllers.service_per_pod"
    assert a.finalizer == "metacontroller.io/decoratorcontroller-service-per-pod"


def test_a_decorator_definition_with_selectors_and_customize(tmp_path: Path) -> None:
    [d] = load(tmp_path, DECO % "Recreate")
    rule = d.resources[0]
    assert rule.selects(obj({"tier": "web"}, {"decorate": "yes", "ports": "80"}))
    assert not rule.selects(obj({"tier": "web"}, {"decorate": "yes"}))  # annotation expression
    assert not rule.selects(obj({"tier": "db"}, {"decorate": "yes", "ports": "80"}))  # label selector
    assert d.hooks.customize.package == "a.c"
    assert d.resync_period_seconds == 5
    assert d.field_manager == "regokite-decorator-d"


def test_attachments_have_no_rolling_updates(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as info:
        load(tmp_path, DECO % "RollingInPlace")
    assert "spec.attachments[0].updateStrategy.method: must be one of OnDelete, Recreate, InPlace" in str(info.value)


def test_bad_annotation_selector_is_reported_with_its_path(tmp_path: Path) -> None:
    text = (DECO % "InPlace").replace("operator: Exists", "operator: Near")
    with pytest.raises(DefinitionError) as info:
        load(tmp_path, text)
    assert "spec.resources[0].annotationSelector.matchExpressions[0].operator" in str(info.value)


def test_response_translation_validates_labels_and_attachments() -> None:
    target = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "web"}}
    raw = {
        "labels": {"a": "1", "gone": None},
        "attachments": [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s-0"}}],
        "status": {"x": 1},
        "resyncAfterSeconds": 2,
    }
    r = decorator.translate_response("p", raw, types=[SERVICE], parent=target, parent_namespaced=True)
    assert r.labels == {"a": "1", "gone": None}
    assert r.children[0]["metadata"]["namespace"] == "web"
    assert (r.status, r.resync_after_seconds) == ({"x": 1}, 2.0)
    with pytest.raises(HookError, match=r"labels\['a'\] must be a string or null"):
        decorator.translate_response("p", {"labels": {"a": 1}}, types=[SERVICE], parent=target, parent_namespaced=True)
    with pytest.raises(HookError, match=r"attachments\[0\] is a Pod.v1, not a declared attachment type"):
        bad = {"attachments": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}
        decorator.translate_response("p", bad, types=[SERVICE], parent=target, parent_namespaced=True)


def test_the_metadata_apply_holds_exactly_the_non_null_entries() -> None:
    target = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s", "namespace": "web", "resourceVersion": "7", "labels": {"keep": "x", "old": "1"}},
    }
    body = decorator.metadata_apply(STS, target, {"new": "2", "old": None}, {})
    assert body == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "s",
            "namespace": "web",
            "resourceVersion": "7",
            "labels": {"new": "2"},
            "annotations": {},
        },
    }
    assert not decorator.metadata_settled(target, {"new": "2", "old": None}, {})
    target["metadata"]["labels"] = {"keep": "x", "new": "2"}
    assert decorator.metadata_settled(target, {"new": "2", "old": None}, {})


def test_only_attachments_this_decorator_made_for_this_target_are_observed() -> None:
    [d] = load_definitions([EXAMPLES / "service_per_pod" / "controller.yaml"])[:1]
    target = {"metadata": {"uid": "u1"}}

    def svc(uid: str, by: str) -> dict:
        return {
            "metadata": {
                "name": f"{uid}-{by}",
                "ownerReferences": [{"uid": uid, "controller": True}],
                "annotations": {decorator.DECORATOR_ANNOTATION: by},
            }
        }

    mine = svc("u1", "service-per-pod")
    found = decorator.owned_attachments(d, target, [mine, svc("u1", "other"), svc("u2", "service-per-pod")])
    assert found == [mine]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u1"}}
    marked = decorate_child(d, pod, {"metadata": {"name": "a"}})
    assert marked["metadata"]["annotations"][decorator.DECORATOR_ANNOTATION] == "service-per-pod"
