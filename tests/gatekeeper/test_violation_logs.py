"""Gatekeeper's violation log fields and Event annotations, from a library template's real verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.audit.scan import Subject, audit_object
from regokite.clusterdata.store import ResourceRef
from regokite.gatekeeper.violations import (
    AuditedConstraint,
    admission_violations,
    audit_violations,
    event,
    go_duration,
    truncate,
)
from tests.admission.reviews import review

LIBRARY = Path(__file__).parent / "fixtures" / "library" / "requiredlabels"
NAMESPACES = ResourceRef("", "v1", "namespaces", False)
ANNOTATIONS = {
    "team.example/owner": "platform",
    "kubectl.kubernetes.io/last-applied-configuration": "{}",
}


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("policies")
    (root / "template.yaml").write_text((LIBRARY / "template.yaml").read_text())
    constraint = yaml.safe_load((LIBRARY / "constraint.yaml").read_text())
    constraint["metadata"]["annotations"] = ANNOTATIONS
    (root / "constraint.yaml").write_text(yaml.safe_dump(constraint))
    ps = load_policy_set([str(root)])
    yield ps
    ps.close()


def namespace(name: str, labels: dict[str, str] | None) -> dict:
    meta: dict = {"name": name, "uid": "u1", "resourceVersion": "7"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def audited(policies, obj: dict) -> dict:
    results = audit_object(policies, obj, NAMESPACES)
    [constraint] = [p for p in policies.policies if p.constraint_kind]
    info = AuditedConstraint(constraint.constraint_kind, constraint.enforcement, constraint.constraint_annotations)
    [v] = audit_violations({constraint.name: info}, [(Subject.of(obj), results)])[constraint.name]
    return v.fields("audit")


def test_an_audit_line_carries_details_the_constraints_annotations_and_the_resources_labels(policies) -> None:
    fields = audited(policies, namespace("team-a", {"tier": "web"}))
    assert fields["details"] == {"missing_labels": ["owner"]}  # the template's violation details
    assert fields["constraint_annotations"] == {"team.example/owner": "platform"}  # kubectl's copy left out
    assert fields["resource_labels"] == {"tier": "web"}
    assert fields["event_type"] == "violation_audited" and fields["semantic"] is True
    assert fields["constraint_namespace"] == "" and fields["constraint_enforcement_actions"] == []
    assert list(fields)[:4] == ["process", "details", "event_type", "semantic"]


def test_a_resource_without_labels_logs_null_labels(policies) -> None:
    assert audited(policies, namespace("team-b", None))["resource_labels"] is None


def test_a_denial_line_carries_details_and_no_audit_only_fields(policies) -> None:
    obj = namespace("team-c", {"tier": "web"})
    decision = decide(policies, parse_review(json.dumps(review(obj)).encode()), mode="validate")
    constraints = {p.name: p.constraint_kind for p in policies.policies if p.constraint_kind}
    [v] = admission_violations(review(obj)["request"], constraints, decision.outcomes)
    fields = v.fields("admission")
    assert fields["details"] == {"missing_labels": ["owner"]} and fields["semantic"] is True
    assert fields["event_type"] == "violation" and "request_username" in fields
    for absent in ("constraint_namespace", "constraint_annotations", "resource_labels"):
        assert absent not in fields  # Gatekeeper's --log-denies line has none of these
    annotations = event(v, "admission", "gatekeeper-system", False)["metadata"]["annotations"]
    assert "details" not in annotations and "semantic" not in annotations
    assert annotations["constraint_enforcement_actions"] == ""


def test_audit_event_annotations_are_gatekeepers_and_not_the_log_only_fields(policies) -> None:
    results = audit_object(policies, namespace("team-d", {"tier": "web"}), NAMESPACES)
    [constraint] = [p for p in policies.policies if p.constraint_kind]
    info = AuditedConstraint(constraint.constraint_kind, "deny", constraint.constraint_annotations)
    [v] = audit_violations({constraint.name: info}, [(Subject.of(namespace("team-d", {"a": "b"})), results)])[
        constraint.name
    ]
    annotations = event(v, "audit", "gatekeeper-system", False, "2026-01-01T00:00:00Z")["metadata"]["annotations"]
    assert set(annotations) == {
        "process",
        "auditTimestamp",
        "event_type",
        "constraint_group",
        "constraint_api_version",
        "constraint_kind",
        "constraint_name",
        "constraint_namespace",
        "constraint_action",
        "constraint_enforcement_actions",
        "resource_group",
        "resource_api_version",
        "resource_kind",
        "resource_namespace",
        "resource_name",
    }


def test_messages_are_cut_at_256_characters_as_gatekeepers_audit_does() -> None:
    assert truncate("x" * 256) == "x" * 256
    assert truncate("x" * 300) == "x" * 253 + "..."
    assert truncate("é" * 128) == "é" * 128  # 256 bytes: kept whole
    assert truncate("é" * 129) == "é" * 126 + "..."  # bytes, as Go's len: 253 cuts the 127th in two


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(1.5, "1.5s"), (0.0125, "12.5ms"), (62.25, "1m2.25s"), (3723.0, "1h2m3s"), (0.0000015, "1.5µs")],
)
def test_durations_print_as_go_prints_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text
