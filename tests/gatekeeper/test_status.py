"""Constraint status from audit findings, as Gatekeeper's audit writes it; constraint kinds to audit."""

from __future__ import annotations

import datetime as dt

from regokite.audit.scan import Result, Subject, constraint_resources
from regokite.clusterdata.store import ResourceRef
from regokite.gatekeeper.match import parse_constraint_match
from regokite.gatekeeper.status import constraint_statuses, same_findings

NOW = dt.datetime(2026, 11, 24, 1, 2, 3, tzinfo=dt.UTC)


def pod(name: str, ns: str = "team") -> Subject:
    return Subject("v1", "Pod", ns, name, f"uid-{name}")


def test_every_fail_and_warn_counts_and_the_list_is_capped() -> None:
    findings = [
        (pod(f"p{i}"), (Result("must-label", "fail", f"missing {i}", "deny"), Result("other", "warn", "x", "warn")))
        for i in range(25)
    ]
    findings.append(
        (Subject("apps/v1", "Deployment", "team", "d", "u"), (Result("must-label", "error", "boom", "deny"),))
    )
    statuses = constraint_statuses(["must-label", "other", "clean"], findings, limit=20, now=NOW)
    assert statuses["must-label"]["totalViolations"] == 25 and len(statuses["must-label"]["violations"]) == 20
    assert statuses["must-label"]["violations"][0] == {
        "enforcementAction": "deny",
        "group": "",
        "version": "v1",
        "kind": "Pod",
        "namespace": "team",
        "name": "p0",
        "message": "missing 0",
    }
    assert statuses["other"]["totalViolations"] == 25
    assert statuses["clean"] == {"auditTimestamp": "2026-11-24T01:02:03Z", "totalViolations": 0, "violations": []}


def test_a_cluster_scoped_violation_has_no_namespace_and_a_group() -> None:
    subject = Subject("rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin", "u")
    [entry] = constraint_statuses(["c"], [(subject, (Result("c", "warn", "m", "dryrun"),))], now=NOW)["c"]["violations"]
    assert entry["group"] == "rbac.authorization.k8s.io" and entry["version"] == "v1" and "namespace" not in entry


def test_a_status_differing_only_by_its_timestamp_needs_no_write() -> None:
    a = constraint_statuses(["c"], [], now=NOW)["c"]
    b = constraint_statuses(["c"], [], now=NOW + dt.timedelta(minutes=1))["c"]
    assert same_findings(a, b) and not same_findings(None, b)


def test_constraint_kinds_resolve_to_the_resources_audit_lists() -> None:
    served = {
        ("", "Pod"): ResourceRef("", "v1", "pods"),
        ("apps", "Deployment"): ResourceRef("apps", "v1", "deployments"),
    }
    match = parse_constraint_match(
        {"kinds": [{"apiGroups": ["", "apps"], "kinds": ["Pod", "Deployment"]}]}, "spec.match"
    )
    refs, reason = constraint_resources(match, lambda g, k: served.get((g, k)))
    assert refs == set(served.values()) and reason == ""
    wild = parse_constraint_match({"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}]}, "spec.match")
    assert "needs discovery" in constraint_resources(wild, lambda g, k: None)[1]
    assert "discovery" in constraint_resources(match, None)[1]
    # with discovery's list of every kind, as Gatekeeper's audit: `*` and no kinds audit what fits
    every = [
        ("", "Pod", ResourceRef("", "v1", "pods")),
        ("batch", "Pod", ResourceRef("batch", "v1", "pods")),
        ("", "Secret", ResourceRef("", "v1", "secrets")),
    ]
    assert constraint_resources(wild, lambda g, k: None, lambda: every) == ({every[0][2], every[1][2]}, "")
    everything = parse_constraint_match({}, "spec.match")
    assert constraint_resources(everything, lambda g, k: None, lambda: every) == ({e[2] for e in every}, "")
