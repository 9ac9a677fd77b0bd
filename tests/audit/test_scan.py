"""Audit's pure parts: what it lists, the findings of one object, the reports they make."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.admission.policies import load_policy_set
from regokite.audit import reports
from regokite.audit.scan import Subject, audit_object, audited_resources, violations
from regokite.cli import build_parser
from regokite.clusterdata.store import ResourceRef
from regokite.commands.audit import audit_writes_reports
from regokite.manifests import generate

POLICIES = {
    "owner.rego": """package admission.owner

match := {"rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["", "apps"], "apiVersions": ["*"],
	"resources": ["configmaps", "deployments", "deployments/scale"]}]}

deny contains "no owner label" if not input.request.object.metadata.labels.owner

warn contains "no description" if not input.request.object.metadata.annotations.description
""",
    "soft.rego": """package admission.soft

match := {"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}

enforcement := "warn"

deny contains "empty ConfigMap" if count(object.get(input.request.object, "data", {})) == 0
""",
    "broken.rego": """package admission.broken

match := {"rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]}

# a conflict when the ConfigMap has no data: an evaluation error (a builtin's would be undefined, as in OPA)
reason := "a" if not input.request.object.data

reason := "b" if not input.request.object.data

deny contains reason if reason == "c"
""",
    "updates.rego": """package admission.updates

match := {"rules": [{"operations": ["UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}]}

deny contains "never on audit"
""",
    "everything.rego": """package admission.everything

deny contains "x" if false
""",
    "wild.rego": """package admission.wild

match := {"rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]}

deny contains "x" if false
""",
}

CONFIGMAPS = ResourceRef("", "v1", "configmaps")


@pytest.fixture(scope="module")
def policy_set(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("policies")
    for name, text in POLICIES.items():
        (root / name).write_text(text)
    loaded = load_policy_set([str(root)])
    yield loaded
    loaded.close()


def test_audited_resources_are_what_match_names_for_create(policy_set) -> None:
    found, skipped = audited_resources(policy_set, {"": "v1", "apps": "v1"}.__getitem__)
    # every group with every resource, as webhook rules mean; audit keeps those the API server serves
    assert [str(r) for r in found] == ["v1/configmaps", "v1/deployments", "apps/v1/configmaps", "apps/v1/deployments"]
    assert skipped == [
        "admission.everything: no match declaration (it would have to list every resource)",
        "admission.wild: a rule with a * group or resource",
    ]


def test_findings_of_one_object(policy_set) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "a", "uid": "u1"}}
    found = audit_object(policy_set, cm, CONFIGMAPS)
    assert {(r.policy, r.result, r.enforcement) for r in found} == {
        ("admission.owner", "fail", "deny"),
        ("admission.owner", "warn", "deny"),  # its `warn` document
        ("admission.soft", "warn", "warn"),
        ("admission.broken", "error", "deny"),
    }
    assert violations([found]) == {("admission.owner", "deny"): 2, ("admission.soft", "warn"): 1}
    clean = {**cm, "metadata": {**cm["metadata"], "labels": {"owner": "x"}, "annotations": {"description": "d"}}}
    assert audit_object(policy_set, {**clean, "data": {"k": "v"}}, CONFIGMAPS) == ()


def test_reports_per_namespace_with_results_and_summary(policy_set) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "a", "uid": "u1"},
        "data": {"k": "v"},
    }
    subject = Subject.of(cm)
    found = audit_object(policy_set, cm, CONFIGMAPS)
    grouped = reports.by_namespace({subject: found})
    report = reports.report("a", grouped["a"], 1700000000)
    assert report["kind"] == "PolicyReport" and report["metadata"]["name"] == "regokite-audit"
    assert report["metadata"]["namespace"] == "a"
    assert report["summary"] == {"pass": 0, "fail": 1, "warn": 1, "error": 0, "skip": 0}
    first = report["results"][0]
    assert first["resources"] == [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u1", "namespace": "a"}]
    assert first["timestamp"] == {"seconds": 1700000000, "nanos": 0} and first["source"] == "regokite"
    cluster = reports.report("", [], 1)
    assert cluster["kind"] == "ClusterPolicyReport" and "namespace" not in cluster["metadata"]
    assert cluster["results"] == []


def test_audit_manifests_grant_reads_of_audited_and_replicated_and_report_writes(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "policies"
    objects = generate.audit_manifests(
        generate.AuditOptions(policies=[str(root / "admission" / "unique_ingress_host")])
    )
    kinds = [o["kind"] for o in objects]
    assert kinds.count("CustomResourceDefinition") == 2
    [role] = [o for o in objects if o["kind"] == "ClusterRole"]
    assert role["rules"] == [
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["wgpolicyk8s.io"],
            "resources": ["clusterpolicyreports", "policyreports"],
            "verbs": ["get", "list", "create", "patch"],
        },
    ]
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"][0] == "audit"


@pytest.mark.parametrize(
    ("flags", "writes"),
    [
        (["--once"], False),  # a CI check: prints, needs no report CRDs
        (["--once", "--reports"], True),
        (["--once", "--no-reports"], False),  # still accepted
        ([], True),  # continuous: reports kept current
        (["--no-reports"], False),
    ],
)
def test_audit_once_writes_reports_only_when_asked(flags: list[str], writes: bool) -> None:
    args = build_parser().parse_args(["audit", "--policies", "policies", *flags])
    assert audit_writes_reports(args) is writes


def test_audit_reports_and_no_reports_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "--policies", "p", "--reports", "--no-reports"])
    assert "not allowed with argument" in capsys.readouterr().err
