"""Builtin errors on every decision path, as OPA's default evaluation (and Gatekeeper's driver) answer
them: the erring call is undefined, reported (a log line, the listeners' count), and the decision goes
on; `strict_builtin_errors` (`--strict-builtin-errors`) makes them errors, as before. Each answer is
the OPA oracle's (tests/opa_oracle.py, OPA's default evaluation) on the same Rego and input.

A Gatekeeper constraint whose evaluation fails otherwise (a rule conflict) has that error as its one
violation, for every constraint of its kind, as frameworks' Rego driver answers it.

On the code before, every decision here was a policy error (fail closed) where OPA answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opa_oracle import OracleEngine

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from regokite.audit.scan import audit_object
from regokite.bundle import Bundle, Module
from regokite.check import Manifest, check
from regokite.clusterdata.store import ResourceRef
from regokite.engine import UNDEFINED, EngineSettings, builtin_errors
from regokite.gatekeeper import verify
from tests.admission.reviews import deployment, review
from tests.gatekeeper.suites import write_suite

STRICT = EngineSettings(strict_builtin_errors=True)

BUDGET = """package admission.budget

deny contains "replicas over budget" if {
	input.request.object.spec.replicas / to_number(input.request.object.metadata.annotations.budget) > 1
}

deny contains sprintf("name does not match %v", [p]) if {
	p := input.request.object.metadata.annotations.pattern
	not regex.match(p, input.request.object.metadata.name)
}
"""

SIZE_LABEL = """package admission.size_label

patch contains {"op": "add", "path": "/metadata/labels/size", "value": sprintf("%d", [n])} if {
	n := to_number(input.request.object.metadata.annotations.size)
}
"""

FORBIDDEN_NAMES = """package k8sforbiddennames

violation contains {"msg": msg} if {
	name := input.review.object.metadata.name
	regex.match(input.parameters.forbidden, name)
	msg := sprintf("name %v is forbidden", [name])
}
"""

CONFLICTING = """package k8sconflicting

mode := "a" if input.review.object.metadata.labels.x

mode := "b" if input.review.object.metadata.labels.x

violation contains {"msg": mode} if mode == "c"
"""


def template(kind: str, rego: str) -> dict[str, Any]:
    return {
        "apiVersion": "templates.gatekeeper.sh/v1",
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {
            "crd": {
                "spec": {
                    "names": {"kind": kind},
                    "validation": {
                        "openAPIV3Schema": {"type": "object", "properties": {"forbidden": {"type": "string"}}}
                    },
                }
            },
            "targets": [
                {
                    "target": "admission.k8s.gatekeeper.sh",
                    "code": [{"engine": "Rego", "source": {"version": "v1", "rego": rego}}],
                }
            ],
        },
    }


def constraint(kind: str, name: str, parameters: dict[str, Any], action: str = "deny") -> dict[str, Any]:
    match = {"kinds": [{"apiGroups": ["apps"], "kinds": ["Deployment"]}]}
    spec = {"match": match, "parameters": parameters, "enforcementAction": action}
    return {"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    (tmp_path / "budget.rego").write_text(BUDGET)
    (tmp_path / "size_label.rego").write_text(SIZE_LABEL)
    forbidden = [template("K8sForbiddenNames", FORBIDDEN_NAMES), constraint("K8sForbiddenNames", "no-brackets", {})]
    forbidden[1]["spec"]["parameters"] = {"forbidden": "["}
    (tmp_path / "forbidden.yaml").write_text(yaml.safe_dump_all(forbidden))
    conflicting = [
        template("K8sConflicting", CONFLICTING),
        constraint("K8sConflicting", "conflict-deny", {}),
        constraint("K8sConflicting", "conflict-dryrun", {}, "dryrun"),
    ]
    (tmp_path / "conflicting.yaml").write_text(yaml.safe_dump_all(conflicting))
    return tmp_path


@pytest.fixture
def heard() -> Iterator[list[builtin_errors.UndefinedCall]]:
    calls: list[builtin_errors.UndefinedCall] = []
    builtin_errors.listen(calls.append)
    yield calls
    builtin_errors.unlisten(calls.append)


def erring(**labels: str) -> dict[str, Any]:
    """A Deployment on which BUDGET divides by zero and matches an invalid pattern, SIZE_LABEL reads no number."""
    obj = deployment("web", labels=labels or None, replicas=3)
    obj["metadata"]["annotations"] = {"budget": "0", "pattern": "[", "size": "big"}
    return obj


def opa_default(rego: str, ref: str, input: Any) -> Any:
    """OPA's answer with its default (not strict) builtin errors."""
    return OracleEngine(Bundle((Module("p.rego", rego),)), strict_builtin_errors=False).evaluate(ref, input)


def decided(policy_set: PolicySet, obj: dict[str, Any], mode: str = "validate") -> Any:
    return decide(policy_set, parse_review(json.dumps(review(obj)).encode()), mode=mode)  # type: ignore[arg-type]


def test_a_validating_policys_builtin_errors_are_undefined_as_in_opa(policies: Path, heard: list) -> None:
    policy_set = load_policy_set([str(policies)])
    decision = decided(policy_set, erring())
    wanted = opa_default(BUDGET, "data.admission.budget.deny", review(erring()))
    assert wanted == ["name does not match ["]  # `not` of an undefined call is true; the division is undefined
    assert [m for m in decision.verdict.messages if m.startswith("[admission.budget]")] == [
        f"[admission.budget] {m}" for m in wanted
    ]
    outcome = next(o for o in decision.outcomes if o.policy == "admission.budget")
    assert outcome.decision == "denied"
    places = {c.place.rsplit(":", 2)[0].rsplit("/", 1)[-1] + ":" + c.place.split(":")[-2] for c in heard}
    assert {"budget.rego:4", "budget.rego:9"} <= places, heard
    assert all(c.policy == "admission.budget" for c in heard if "budget.rego" in c.place)


def test_strict_builtin_errors_fail_the_policy_closed(policies: Path) -> None:
    decision = decided(load_policy_set([str(policies)], STRICT), erring())
    outcome = next(o for o in decision.outcomes if o.policy == "admission.budget")
    assert outcome.decision == "error" and not decision.verdict.allowed
    assert "budget.rego:4" in (outcome.error or "")


def test_a_mutating_policys_builtin_error_leaves_the_object_as_opa_would(policies: Path) -> None:
    wanted = opa_default(SIZE_LABEL, "data.admission.size_label.patch", review(erring()))
    assert wanted in ([], UNDEFINED)
    decision = decided(load_policy_set([str(policies)]), erring(), "mutate")
    assert decision.verdict.allowed and not decision.verdict.patch
    strict = decided(load_policy_set([str(policies)], STRICT), erring(), "mutate")
    assert not strict.verdict.allowed and strict.outcomes[0].decision == "error"


def test_a_gatekeeper_templates_builtin_error_is_no_violation_as_in_gatekeeper(policies: Path, heard: list) -> None:
    request = review(erring())["request"]
    wanted = opa_default(
        FORBIDDEN_NAMES, "data.k8sforbiddennames.violation", {"review": request, "parameters": {"forbidden": "["}}
    )
    assert wanted in ([], UNDEFINED)
    decision = decided(load_policy_set([str(policies)]), erring())
    outcome = next(o for o in decision.outcomes if o.policy.endswith("no-brackets"))
    assert (outcome.decision, outcome.messages) == ("allowed", [])
    assert any(c.builtin == "regex.match" and "forbidden.yaml" in c.place for c in heard), heard
    strict = decided(load_policy_set([str(policies)], STRICT), erring())
    assert next(o for o in strict.outcomes if o.policy.endswith("no-brackets")).decision == "error"


def test_a_gatekeeper_templates_other_error_is_its_kinds_violation(policies: Path) -> None:
    """frameworks' Driver.Query: an evaluation error of a kind is a violation whose msg is the error, for
    each constraint of the kind that matched, under its enforcementAction (dryrun: reported, not denied)."""
    decision = decided(load_policy_set([str(policies)]), erring(x="1"))
    by_name = {o.policy.rsplit(".", 1)[-1]: o for o in decision.outcomes if "conflict" in o.policy}
    assert {n: o.decision for n, o in by_name.items()} == {"conflict-deny": "denied", "conflict-dryrun": "dryrun"}
    [message] = by_name["conflict-deny"].messages
    assert by_name["conflict-dryrun"].messages == [message]
    assert "conflicting.yaml" in message and "conflict" in message
    assert [m for m in decision.verdict.messages if "conflict" in m] == [f"[conflict-deny] {message}"]
    assert decided(load_policy_set([str(policies)]), erring()).verdict.messages == [
        "[admission.budget] name does not match ["
    ]


def test_audit_finds_what_opa_would(policies: Path) -> None:
    ref = ResourceRef("apps", "v1", "deployments")
    found = audit_object(load_policy_set([str(policies)]), erring(), ref)
    assert sorted((r.policy, r.result, r.message) for r in found if "budget" in r.policy or "brackets" in r.policy) == [
        ("admission.budget", "fail", "name does not match [")
    ]
    strict = audit_object(load_policy_set([str(policies)], STRICT), erring(), ref)
    assert {r.policy: r.result for r in strict if "budget" in r.policy or "brackets" in r.policy} == {
        "admission.budget": "error",
        "no-brackets": "error",
    }


def test_check_refuses_what_opa_would(policies: Path) -> None:
    manifests = [Manifest("web.yaml", 0, erring())]
    check(load_policy_set([str(policies)]), manifests)
    assert [m for m in manifests[0].failures if "budget" in m or "brackets" in m] == [
        "[admission.budget] name does not match ["
    ]
    strict = [Manifest("web.yaml", 0, erring())]
    check(load_policy_set([str(policies)], STRICT), strict)
    assert any("policy error" in m for m in strict[0].failures)


def test_verify_sees_what_gator_would(tmp_path: Path) -> None:
    (tmp_path / "template.yaml").write_text(yaml.safe_dump(template("K8sForbiddenNames", FORBIDDEN_NAMES)))
    (tmp_path / "constraint.yaml").write_text(yaml.safe_dump(constraint("K8sForbiddenNames", "c", {"forbidden": "["})))
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(erring()))
    write_suite(tmp_path, [{"name": "undefined", "object": "web.yaml", "assertions": [{"violations": "no"}]}])
    result = verify.run_suite(tmp_path / "suite.yaml")
    assert not result.failed, result
    assert verify.run_suite(tmp_path / "suite.yaml", engine=STRICT).failed
