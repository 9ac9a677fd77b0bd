"""The CRDs and status regokite writes for Gatekeeper's objects."""

from __future__ import annotations

from pathlib import Path

from regokite.gatekeeper.crds import (
    constraint_crd,
    constraint_pod_status,
    template_crd,
    template_status,
    with_pod_entry,
)
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


def test_template_status_in_gatekeepers_shape() -> None:
    assert template_status(3, []) == {
        "created": True,
        "byPod": [{"id": "regokite", "observedGeneration": 3, "operations": ["webhook"]}],
    }
    failed = template_status(1, ["t:4:3: unknown function"])
    assert failed["created"] is False
    assert failed["byPod"][0]["errors"] == [{"code": "ingest_error", "message": "t:4:3: unknown function"}]
    assert template_crd()["spec"]["names"]["kind"] == "ConstraintTemplate"


def test_a_process_replaces_only_its_own_by_pod_entry_and_the_list_stays_sorted_by_id() -> None:
    audit = constraint_pod_status(4, None, enforced=True, pod_id="regokite-audit", operations=("audit",))
    webhook = constraint_pod_status(3, "bad match", enforced=True)
    assert webhook == {
        "id": "regokite",
        "observedGeneration": 3,
        "enforced": True,
        "operations": ["webhook"],
        "errors": [{"code": "ingest_error", "message": "bad match"}],
    }
    merged = with_pod_entry([audit, {"id": "gatekeeper-audit-1"}], webhook)
    assert [p["id"] for p in merged] == ["gatekeeper-audit-1", "regokite", "regokite-audit"]
    fixed = constraint_pod_status(4, None, enforced=True)
    assert with_pod_entry(merged, fixed)[1] == fixed and len(with_pod_entry(merged, fixed)) == 3
    assert with_pod_entry(None, fixed) == [fixed]
