"""The CRDs and status regokite writes for Gatekeeper's objects."""

from __future__ import annotations

from pathlib import Path

from regokite.gatekeeper.crds import constraint_crd, template_crd, template_status
from regokite.gatekeeper.resources import parse_template
from regokite.yamldoc import load

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_constraint_crd_validates_parameters_with_the_template_schema() -> None:
    doc = load((FIXTURES / "library/requiredlabels/template.yaml").read_text())
    crd = constraint_crd(parse_template(doc, None, "constrainttemplate/k8srequiredlabels"))
    assert crd["metadata"]["name"] == "k8srequiredlabels.constraints.gatekeeper.sh"
    assert crd["spec"]["names"]["kind"] == "K8sRequiredLabels" and crd["spec"]["scope"] == "Cluster"
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1beta1", True), ("v1alpha1", False)]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["parameters"]["properties"]["labels"]["type"] == "array"


def test_a_template_without_schema_takes_any_parameters() -> None:
    doc = load((FIXTURES / "library/uniqueingresshost/template.yaml").read_text())
    crd = constraint_crd(parse_template(doc, None, "t"))
    parameters = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "parameters"
    ]
    assert parameters == {"x-kubernetes-preserve-unknown-fields": True}


def test_template_status_in_gatekeepers_shape() -> None:
    assert template_status(3, []) == {
        "created": True,
        "byPod": [{"id": "regokite", "observedGeneration": 3, "operations": ["webhook"]}],
    }
    failed = template_status(1, ["t:4:3: unknown function"])
    assert failed["created"] is False
    assert failed["byPod"][0]["errors"] == [{"code": "ingest_error", "message": "t:4:3: unknown function"}]
    assert template_crd()["spec"]["names"]["kind"] == "ConstraintTemplate"
