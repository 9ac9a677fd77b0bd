"""Gatekeeper's objects checked at /validate as Gatekeeper's webhook checks its own (pkg/webhook's
policy tests re-expressed): what would not load is refused with why, the rest goes on to the policies."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from regokite.admission.decide import POLICY_OBJECTS, decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review, response
from regokite.gatekeeper.policy_objects import PolicyObjects
from regokite.ops.tls import new_ca, pem
from tests.gatekeeper.mutators import assign

FIXTURES = Path(__file__).parent / "fixtures"
LONG_NAME = "abignameabignameabignameabignameabignameabignameabignameabigname"  # 64 characters
REQUIRED_LABELS = yaml.safe_load((FIXTURES / "library/requiredlabels/template.yaml").read_text())


def request(obj: dict[str, Any], operation: str = "CREATE", name: str | None = None) -> dict[str, Any]:
    group, _, version = obj["apiVersion"].rpartition("/")
    deleting = operation == "DELETE"
    return {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": obj["kind"].lower()},
        "name": obj.get("metadata", {}).get("name", "") if name is None else name,
        "operation": operation,
        "object": None if deleting else obj,
        "oldObject": obj if deleting else None,
    }


def constraint(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": "K8sRequiredLabels",
        "metadata": {"name": "must-have-owner"},
        "spec": {"match": {"kinds": [{"apiGroups": [""], "kinds": ["Namespace"]}]}, **spec},
    }


@pytest.fixture(scope="module")
def served():
    """A set serving the requiredlabels template, as `regokite admission --policies` would."""
    policy_set = load_policy_set([str(FIXTURES / "library/requiredlabels")])
    yield policy_set
    policy_set.close()


def refusal(served, obj: dict[str, Any], operation: str = "CREATE", name: str | None = None) -> str | None:
    refused = served.policy_objects.refusal(request(obj, operation, name))
    return None if refused is None else refused.message


def test_a_template_whose_rego_does_not_compile_is_refused_at_its_line(served) -> None:
    broken = next(d for d in yaml.safe_load_all((FIXTURES / "broken/templates.yaml").read_text()) if d)
    message = refusal(served, broken)
    assert message is not None and message.startswith("constrainttemplate/k8sbroken:4:10: unknown function"), message
    assert "no_such_function" in message and "(in rego, line 4)" in message
    assert refusal(served, REQUIRED_LABELS) is None


def test_a_template_gatekeeper_refuses_for_its_shape_is_refused_with_gatekeepers_words(served) -> None:
    doc = json.loads(json.dumps(REQUIRED_LABELS))
    doc["spec"]["targets"][0]["operations"] = ["*", "CREATE"]
    assert refusal(served, doc) == "if '*' is present, must not specify other operations"
    doc = json.loads(json.dumps(REQUIRED_LABELS))
    doc["spec"]["crd"]["spec"]["validation"]["openAPIV3Schema"]["properties"]["labels"].pop("type")
    assert "invalid ConstraintTemplate: spec.validation.openAPIV3Schema" in (refusal(served, doc) or "")
    doc = json.loads(json.dumps(REQUIRED_LABELS))
    doc["metadata"]["name"] = "other"
    assert "metadata.name must be the lowercased kind" in (refusal(served, doc) or "")


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({}, None),
        ({"parameters": {"labels": [{"key": "owner"}]}}, None),
        (
            {"parameters": {"labels": "owner"}},
            'schema validation failed: spec.parameters.labels: Invalid value: "string": '
            'spec.parameters.labels in body must be of type array: "string"',
        ),
        ({"parameters": {"labels": [{"key": "owner", "colour": "red"}]}}, "invalid Constraint: unknown fields:"),
        # pkg/webhook's bad label and namespace selectors: In with no values
        (
            {"match": {"labelSelector": {"matchExpressions": [{"operator": "In", "key": "something"}]}}},
            "invalid Constraint: spec.match.labelSelector.matchExpressions[0].values: Required value: "
            "must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            {"match": {"namespaceSelector": {"matchExpressions": [{"operator": "In", "key": "something"}]}}},
            "invalid Constraint: spec.match.namespaceSelector.matchExpressions[0].values: Required value:",
        ),
        ({"match": {"scope": "Everywhere"}}, "invalid Constraint: spec.match.scope must be"),
        (
            {"enforcementAction": "test"},
            'unrecognized enforcementAction: "test" is not within the supported list [deny dryrun warn scoped]',
        ),
    ],
)
def test_a_constraint_is_refused_as_gatekeepers_webhook_refuses_it(served, changed: dict, expected: str | None) -> None:
    doc = constraint()
    doc["spec"].update(changed)
    message = refusal(served, doc)
    assert (message is None) if expected is None else (message or "").startswith(expected), message


def test_a_constraint_of_a_kind_with_no_template_served_is_refused(served) -> None:
    doc = {**constraint(), "kind": "K8sNoSuchKind"}
    assert refusal(served, doc) == 'missing ConstraintTemplate: template "k8snosuchkind" not found'


def test_a_delete_is_checked_on_the_object_deleted_and_a_collection_delete_passes(served) -> None:
    bad = constraint()
    bad["spec"]["match"] = {"labelSelector": {"matchExpressions": [{"operator": "In", "key": "something"}]}}
    assert refusal(served, bad, "DELETE") is not None  # as Gatekeeper's "with delete operation" case
    assert refusal(served, constraint(), "DELETE") is None
    assert refusal(served, bad, "DELETE", name="") is None


def provider(ca: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": "https://localhost:8080/validate", "timeout": 1}
    if ca is not None:
        spec["caBundle"] = ca
    return {
        "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
        "kind": "Provider",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def test_every_gatekeeper_object_is_checked_by_its_loader(served) -> None:
    ca = base64.b64encode(pem(new_ca("provider CA")[0])).decode()
    assert refusal(served, provider(ca)) is None
    assert "caBundle should be set" in (refusal(served, provider(None)) or "")
    assert refusal(served, assign("a", "spec.dnsPolicy", {"value": "None"})) is None
    assert "assign/a" in (refusal(served, assign("a", "spec.[bad", {"value": "None"})) or "")
    expansion = {
        "apiVersion": "expansion.gatekeeper.sh/v1alpha1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": "e"},
        "spec": {"applyTo": [], "templateSource": "spec.template", "generatedGVK": {}},
    }
    assert refusal(served, expansion) is not None
    config = {"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config", "metadata": {"name": "config"}}
    assert refusal(served, config) is None
    assert refusal(served, {**config, "spec": {"sync": {"syncOnly": [{"group": ""}]}}}) is not None
    assert refusal(served, {**config, "metadata": {"name": "FooBar"}}) == "config resource must have name 'config'"
    assert refusal(served, config, "DELETE", name="abc") == "config resource must have name 'config'"
    assert refusal(served, config, "DELETE", name="") is None
    syncset = {"apiVersion": "syncset.gatekeeper.sh/v1alpha1", "kind": "SyncSet", "metadata": {"name": "s"}}
    assert refusal(served, {**syncset, "spec": {"gvks": [{"group": "", "version": "v1", "kind": "Pod"}]}}) is None
    assert refusal(served, {**syncset, "spec": {"gvks": "Pod"}}) is not None


def test_a_name_longer_than_63_characters_is_refused_but_for_status_objects_and_other_resources(served) -> None:
    for obj in (REQUIRED_LABELS, constraint(), provider("eA==")):
        long = {**obj, "metadata": {**obj["metadata"], "name": LONG_NAME}}
        assert refusal(served, long) == "resource cannot have metadata.name larger than 63 char; length: 64"
    status = {
        "apiVersion": "status.gatekeeper.sh/v1beta1",
        "kind": "ConstraintPodStatus",
        "metadata": {"name": LONG_NAME},
    }
    for operation in ("CREATE", "UPDATE", "DELETE"):
        assert refusal(served, status, operation) is None
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": LONG_NAME}}
    assert PolicyObjects().refusal(request(pod)) is None


def test_validate_answers_422_and_no_policy_runs_for_a_refused_object(served) -> None:
    doc = constraint(parameters={"labels": "owner"})
    review = parse_review(
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request(doc)}).encode()
    )
    decision = decide(served, review, mode="validate")
    assert [o.policy for o in decision.outcomes] == [POLICY_OBJECTS]
    status = response(review, decision.verdict)["response"]["status"]
    assert status["code"] == 422 and status["message"].startswith("schema validation failed: spec.parameters.labels")
    # /validate/<policy> judges only that policy; the objects are checked at /validate
    assert decide(served, review, mode="validate", only="k8srequiredlabels").verdict.allowed
