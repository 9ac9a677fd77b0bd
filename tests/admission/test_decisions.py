"""How policy documents become an admission verdict."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import jsonpatch
import pytest

from regokite.admission.decide import Decision, decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review, response
from regokite.errors import PolicyLoadError
from tests.admission.reviews import deployment, review


def policy_set(tmp_path: Path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return load_policy_set([str(tmp_path)])


def run(tmp_path: Path, files: dict[str, str], doc: dict, mode: str = "validate", **kw):
    ps = policy_set(tmp_path, files)
    r = parse_review(json.dumps(doc).encode())
    return decide(ps, r, mode=mode, **kw), r


def on_a_deployment(tmp_path: Path, rego: str) -> Decision:
    """The decision of the one policy `rego` (as p.rego) on a plain Deployment."""
    decision, _ = run(tmp_path, {"p.rego": rego}, review(deployment()))
    return decision


# an evaluation error (two values of a complete rule; a builtin's error would be undefined, as in OPA)
CONFLICTS = 'reason := "a" if input.request\n\nreason := "b" if input.request\n\ndeny contains reason if true\n'
REPLICAS = """package admission.replicas

deny contains msg if {
	input.request.object.spec.replicas > 3
	msg := sprintf("replicas %d is more than 3", [input.request.object.spec.replicas])
}

warn contains "one replica is not highly available" if input.request.object.spec.replicas == 1
"""


def test_denials_are_prefixed_by_the_policy_and_refuse_the_request(tmp_path: Path) -> None:
    decision, r = run(tmp_path, {"r.rego": REPLICAS}, review(deployment(replicas=5)))
    assert not decision.verdict.allowed
    assert decision.verdict.messages == ["[admission.replicas] replicas 5 is more than 3"]
    answer = response(r, decision.verdict)["response"]
    assert answer["uid"] == r.uid
    assert answer["status"]["code"] == 403


def test_warnings_reach_the_response_of_an_allowed_request(tmp_path: Path) -> None:
    decision, r = run(tmp_path, {"r.rego": REPLICAS}, review(deployment(replicas=1)))
    answer = response(r, decision.verdict)["response"]
    assert answer["allowed"] is True
    assert answer["warnings"] == ["[admission.replicas] one replica is not highly available"]


def test_deny_messages_may_be_objects_with_msg(tmp_path: Path) -> None:
    rego = 'package admission.p\n\ndeny contains {"msg": "no", "details": {"x": 1}} if true\n'
    decision = on_a_deployment(tmp_path, rego)
    assert decision.verdict.messages == ["[admission.p] no"]


def test_a_message_of_the_wrong_shape_fails_closed_naming_policy_rule_and_value(tmp_path: Path) -> None:
    decision = on_a_deployment(tmp_path, "package admission.p\n\ndeny contains 42 if true\n")
    assert not decision.verdict.allowed
    (message,) = decision.verdict.messages
    assert message.startswith("[admission.p] policy error: data.admission.p.deny:")
    assert "42" in message
    assert decision.verdict.code == 500


def test_an_evaluation_error_denies_with_the_error_text(tmp_path: Path) -> None:
    decision = on_a_deployment(tmp_path, "package admission.p\n\n" + CONFLICTS)
    assert not decision.verdict.allowed
    assert "conflicts" in decision.verdict.messages[0] and "p.rego:" in decision.verdict.messages[0]
    assert decision.outcomes[0].decision == "error"


def test_a_fail_open_policy_allows_on_error_with_a_warning(tmp_path: Path) -> None:
    decision = on_a_deployment(tmp_path, 'package admission.p\n\nfailure_policy := "Ignore"\n\n' + CONFLICTS)
    assert decision.verdict.allowed
    assert "policy error ignored" in decision.verdict.warnings[0]


def test_allow_that_is_not_true_denies(tmp_path: Path) -> None:
    decision = on_a_deployment(tmp_path, 'package admission.p\n\nallow if input.request.userInfo.username == "admin"\n')
    assert not decision.verdict.allowed
    assert decision.verdict.messages == ["[admission.p] request not allowed by policy (allow is not true)"]


def test_allow_true_with_no_denials_allows(tmp_path: Path) -> None:
    decision = on_a_deployment(tmp_path, 'package admission.p\n\nallow if input.request.userInfo.username == "alice"\n')
    assert decision.verdict.allowed


def nine_replicas_under(tmp_path: Path, enforcement: str) -> Decision:
    """The replicas policy (more than 3 is denied) with `enforcement`, on a Deployment of 9."""
    text = REPLICAS.replace(
        "package admission.replicas\n", f'package admission.replicas\n\nenforcement := "{enforcement}"\n'
    )
    decision, _ = run(tmp_path, {"r.rego": text}, review(deployment(replicas=9)))
    return decision


def test_warn_enforcement_turns_denials_into_warnings(tmp_path: Path) -> None:
    decision = nine_replicas_under(tmp_path, "warn")
    assert decision.verdict.allowed
    assert "[admission.replicas] replicas 9 is more than 3" in decision.verdict.warnings
    assert decision.outcomes[0].decision == "warned"


def test_dryrun_enforcement_only_records(tmp_path: Path) -> None:
    decision = nine_replicas_under(tmp_path, "dryrun")
    assert decision.verdict.allowed
    assert decision.verdict.warnings == []
    assert decision.outcomes[0].decision == "dryrun"
    assert decision.outcomes[0].messages == ["replicas 9 is more than 3"]


def test_policies_outside_their_match_are_not_evaluated(tmp_path: Path) -> None:
    rego = (
        'package admission.p\n\nmatch := {"rules": [{"operations": ["CREATE"], "resources": ["pods"]}]}\n\n'
        'deny contains "pods only" if true\n'
    )
    decision = on_a_deployment(tmp_path, rego)
    assert decision.verdict.allowed
    assert decision.outcomes == []


def test_delete_requests_carry_the_old_object(tmp_path: Path) -> None:
    files = {
        "p.rego": 'package admission.p\n\ndeny contains msg if {\n\tinput.request.operation == "DELETE"\n'
        "\tinput.request.object == null\n"
        '\tmsg := sprintf("keep %s", [input.request.oldObject.metadata.name])\n}\n'
    }
    decision, _ = run(tmp_path, files, review(None, operation="DELETE", old=deployment("db")))
    assert decision.verdict.messages == ["[admission.p] keep db"]


def test_dry_run_is_visible_to_policies(tmp_path: Path) -> None:
    files = {"p.rego": 'package admission.p\n\nwarn contains "dry run" if input.request.dryRun\n'}
    decision, _ = run(tmp_path, files, review(deployment(), dry_run=True))
    assert decision.verdict.warnings == ["[admission.p] dry run"]


ADD_LABEL = """package admission.a_label

patch contains {"op": "add", "path": "/metadata/labels", "value": {"team": "core"}} if {
	not input.request.object.metadata.labels
}

patch contains {"op": "add", "path": "/metadata/labels/team", "value": "core"} if {
	input.request.object.metadata.labels
	not input.request.object.metadata.labels.team
}
"""

SCALE = """package admission.b_scale

mutated := object.union(input.request.object, {"spec": {"replicas": 2}}) if {
	input.request.object.metadata.labels.team == "core"
}
"""


def _patched(decision, original):
    return jsonpatch.apply_patch(original, decision.verdict.patch)


def test_mutating_policies_run_in_name_order_each_seeing_the_last_result(tmp_path: Path) -> None:
    obj = deployment()
    decision, r = run(tmp_path, {"a.rego": ADD_LABEL, "b.rego": SCALE}, review(obj), mode="mutate")
    assert decision.verdict.allowed
    result = _patched(decision, obj)
    assert result["metadata"]["labels"] == {"team": "core"}
    assert result["spec"]["replicas"] == 2
    answer = response(r, decision.verdict)["response"]
    assert answer["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(answer["patch"])) == decision.verdict.patch


def test_validate_ignores_patches(tmp_path: Path) -> None:
    decision, _ = run(tmp_path, {"a.rego": ADD_LABEL + '\ndeny contains "x" if false\n'}, review(deployment()))
    assert decision.verdict.patch == []


def test_a_patch_that_does_not_apply_fails_closed(tmp_path: Path) -> None:
    files = {"p.rego": 'package admission.p\n\npatch := [{"op": "remove", "path": "/spec/nothing"}]\n'}
    decision, _ = run(tmp_path, files, review(deployment()), mode="mutate")
    assert not decision.verdict.allowed
    assert "does not apply" in decision.verdict.messages[0]


def test_a_patch_that_is_not_rfc6902_is_an_error_naming_the_rule(tmp_path: Path) -> None:
    files = {"p.rego": 'package admission.p\n\npatch := [{"op": "upsert", "path": "/x"}]\n'}
    decision, _ = run(tmp_path, files, review(deployment()), mode="mutate")
    assert "data.admission.p.patch" in decision.verdict.messages[0]


SYSTEM_MAIN = """package system

main := {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}

default uid := ""

uid := input.request.uid

response := {"uid": uid, "allowed": false, "status": {"message": "no latest tags"}} if {
	some c in input.request.object.spec.template.spec.containers
	endswith(c.image, ":latest")
} else := {"uid": uid, "allowed": true}
"""


def test_a_whole_admission_review_policy_is_passed_through(tmp_path: Path) -> None:
    bad = deployment()
    bad["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:latest"
    decision, _ = run(tmp_path, {"main.rego": SYSTEM_MAIN}, review(bad))
    assert decision.verdict.messages == ["[system] no latest tags"]
    decision, _ = run(tmp_path, {"main.rego": SYSTEM_MAIN}, review(deployment()))
    assert decision.verdict.allowed


def test_a_whole_response_with_another_uid_is_refused(tmp_path: Path) -> None:
    files = {"m.rego": 'package system\n\nmain := {"response": {"uid": "forged", "allowed": true}}\n'}
    decision, _ = run(tmp_path, files, review(deployment()))
    assert not decision.verdict.allowed
    assert "uid must echo" in decision.verdict.messages[0]


def test_audit_annotations_are_collected(tmp_path: Path) -> None:
    decision = on_a_deployment(tmp_path, 'package admission.p\n\naudit_annotations := {"checked-by": "p"}\n')
    assert decision.verdict.audit_annotations == {"checked-by": "p"}


def test_no_policy_starts_after_the_deadline(tmp_path: Path) -> None:
    decision, _ = run(tmp_path, {"r.rego": REPLICAS}, review(deployment()), deadline=time.monotonic() - 1)
    assert not decision.verdict.allowed
    assert "deadline" in decision.verdict.messages[0]


def test_only_selects_a_single_policy(tmp_path: Path) -> None:
    files = {"r.rego": REPLICAS, "p.rego": 'package admission.p\n\ndeny contains "always" if true\n'}
    decision, _ = run(tmp_path, files, review(deployment(replicas=1)), only="admission.replicas")
    assert decision.verdict.allowed


def test_helper_packages_are_not_policies(tmp_path: Path) -> None:
    ps = policy_set(tmp_path, {"lib.rego": "package lib.k8s\n\nname(o) := o.metadata.name\n", "r.rego": REPLICAS})
    assert [p.name for p in ps.policies] == ["admission.replicas"]


@pytest.mark.parametrize(
    ("declaration", "complaint"),
    [
        ('match := {"rule": []}', r"unknown field\(s\) rule"),
        ('match := {"rules": [{"operations": ["CREAT"]}]}', r"unknown operation\(s\) CREAT"),
        ('enforcement := "block"', "enforcement must be one of"),
        ("match := input.x", "undefined without input"),
    ],
)
def test_a_bad_declaration_fails_the_load_naming_it(tmp_path: Path, declaration: str, complaint: str) -> None:
    with pytest.raises(PolicyLoadError, match=complaint):
        policy_set(tmp_path, {"p.rego": f"package admission.p\n\n{declaration}\n\ndeny contains 1 if false\n"})
