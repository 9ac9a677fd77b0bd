"""Gatekeeper's enforcement points, actions and a template's operations, on every path a user meets them.

The webhook (`/validate`) is `validation.gatekeeper.sh`, `regokite audit`
`audit.gatekeeper.sh`, `regokite check` and `verify` `gator.gatekeeper.sh`.
The objects are Gatekeeper's own: its bats cases' templates, constraints and
ConfigMaps, its gator fixtures, its verify suite.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from regokite.audit.scan import audit_object
from regokite.check import Manifest, check
from regokite.cli import main
from regokite.clusterdata.store import ResourceRef
from regokite.gatekeeper import lastgood
from regokite.gatekeeper.enforcement import unrecognized_action
from regokite.gatekeeper.status import constraint_statuses
from regokite.gatekeeper.verify import counts, format_results, run_suite
from regokite.gatekeeper.violations import AuditedConstraint, audit_violations
from tests.admission.reviews import review
from tests.gatekeeper.suites import write_suite
from tests.gatekeeper.template_text import template_yaml
from tests.gatekeeper.upstream import upstream_dir

CONFIGMAPS = ResourceRef("", "v1", "configmaps", True)
NAMESPACES = ResourceRef("", "v1", "namespaces", False)
PODS = ResourceRef("", "v1", "pods", True)


def gatekeeper() -> Path:
    found = upstream_dir()
    if found is None or not (found / "gatekeeper").is_dir():
        pytest.skip("no copy of Gatekeeper's material (set REGOKITE_UPSTREAM to the upstream/ directory)")
    return found / "gatekeeper"


def bats(*names: str) -> list[Path]:
    return [gatekeeper() / "test/bats/tests" / n for n in names]


def policies(tmp_path: Path, files: list[Path]) -> PolicySet:
    for f in files:
        shutil.copy(f, tmp_path / f"{f.parent.name}-{f.name}")
    return load_policy_set([str(tmp_path)])


def one(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def webhook(ps: PolicySet, obj: dict, operation: str = "CREATE", old: dict | None = None):
    return decide(ps, parse_review(json.dumps(review(obj, operation=operation, old=old)).encode()), mode="validate")


def checked(ps: PolicySet, obj: dict) -> Manifest:
    manifest = Manifest("input.yaml", 0, obj)
    check(ps, [manifest])
    return manifest


SCOPED = (
    "templates/k8srequiredlabels_template.yaml",
    "constraints/all_cm_must_have_gatekeeper_scoped.yaml",  # deny at audit, warn at the webhook
    "constraints/all_cm_must_have_gatekeeper_scoped_audit.yaml",  # warn at audit only
    "constraints/all_cm_must_have_gatekeeper_scoped_webhook.yaml",  # deny at the webhook only
)


def test_scoped_constraints_act_at_the_webhook_as_gatekeepers_bats_case(tmp_path: Path) -> None:
    """bats "required labels warn and dryrun test": bad_cm_scoped is refused and warned at once."""
    ps = policies(tmp_path, bats(*SCOPED))
    bad = one(bats("bad/bad_cm_scoped.yaml")[0])
    decision = webhook(ps, bad)
    assert decision.verdict.messages == ['[cm-must-have-gk-scoped-webhook] you must provide labels: {"gatekeeper"}']
    assert decision.verdict.warnings == ['[cm-must-have-gk-scoped] you must provide labels: {"gatekeeper"}']
    assert "cm-must-have-gk-scoped-audit" not in {o.policy for o in decision.outcomes}  # not a webhook point
    ps.close()


def test_scoped_constraints_are_audited_with_their_audit_actions(tmp_path: Path) -> None:
    """bats "required labels audit test": status enforcementAction scoped, enforcementActions the audit's."""
    ps = policies(tmp_path, bats(*SCOPED))
    bad = one(bats("bad/bad_cm_scoped.yaml")[0])
    results = audit_object(ps, bad, CONFIGMAPS)
    assert {(r.policy, r.result, r.enforcement, r.actions) for r in results} == {
        ("cm-must-have-gk-scoped", "fail", "scoped", ("deny",)),
        ("cm-must-have-gk-scoped-audit", "warn", "scoped", ("warn",)),
    }
    subject = type("S", (), {"api_version": "v1", "kind": "ConfigMap", "namespace": "n", "name": "bad-cm-scoped"})
    names = [p.name for p in ps.policies]
    status = constraint_statuses(names, [(subject, results)])
    violations = status["cm-must-have-gk-scoped"]["violations"]
    assert [(v["enforcementAction"], v["enforcementActions"]) for v in violations] == [("scoped", ["deny"])]
    assert status["cm-must-have-gk-scoped-webhook"]["totalViolations"] == 0
    audited = {p.name: AuditedConstraint(p.constraint_kind or "", p.enforcement) for p in ps.policies}
    subject.uid, subject.labels = "", None
    [line] = audit_violations(audited, [(subject, results)])["cm-must-have-gk-scoped-audit"]
    fields = line.fields("audit")
    assert fields["constraint_action"] == "scoped" and fields["constraint_enforcement_actions"] == ["warn"]
    ps.close()


def test_scoped_constraints_without_gator_are_not_applied_by_check(tmp_path: Path) -> None:
    ps = policies(tmp_path, bats(*SCOPED))
    manifest = checked(ps, one(bats("bad/bad_cm_scoped.yaml")[0]))
    assert manifest.failures == [] and manifest.warnings == []
    ps.close()
    gator = tmp_path / "gator"
    gator.mkdir()
    (gator / "deny-in-gator.yaml").write_text(
        bats("constraints/all_cm_must_have_gatekeeper_scoped_webhook.yaml")[0]
        .read_text()
        .replace("validation.gatekeeper.sh", "gator.gatekeeper.sh")
    )
    ps = policies(gator, bats("templates/k8srequiredlabels_template.yaml"))
    manifest = checked(ps, one(bats("bad/bad_cm_scoped.yaml")[0]))
    assert manifest.failures == ['[cm-must-have-gk-scoped-webhook] you must provide labels: {"gatekeeper"}']
    assert webhook(ps, one(bats("bad/bad_cm_scoped.yaml")[0])).verdict.allowed  # gator only
    ps.close()


def test_gators_verify_suite_leaves_out_a_constraint_scoped_away_from_gator() -> None:
    """test/gator/verify/suite.yaml: `foo-is-bar-with-scopedEA-without-gator-EP` expects no violation."""
    result = run_suite(gatekeeper() / "test/gator/verify/suite.yaml")
    assert not result.failed, format_results([result])
    assert counts([result])["cases"] == 9


UPDATE_ONLY = "templates/k8srequiredlabels_template_with_update_operations.yaml"
ALL_OPERATIONS = "templates/k8srequiredlabels_template_with_all_operations.yaml"
ALL_NS = "constraints/all_ns_must_have_label_provided.yaml"


def test_an_update_only_template_does_not_judge_a_create_at_the_webhook(tmp_path: Path) -> None:
    """bats "constraint template operations test": good_ns is created, its relabelling refused."""
    ps = policies(tmp_path, bats(UPDATE_ONLY, ALL_NS))
    ns = one(bats("good/good_ns.yaml")[0])
    assert webhook(ps, ns).verdict.allowed
    relabelled = {**ns, "metadata": {**ns["metadata"], "labels": {**ns["metadata"]["labels"], "test": "label"}}}
    refused = webhook(ps, relabelled, "UPDATE", old=ns).verdict
    assert not refused.allowed and refused.messages[0].startswith("[all-must-have-label] you must provide labels")
    # audit and gator judge every operation, as Gatekeeper's (operations are the webhook's only)
    assert [r.policy for r in audit_object(ps, ns, NAMESPACES)] == ["all-must-have-label"]
    assert checked(ps, ns).failures[0].startswith("[all-must-have-label] you must provide labels")
    ps.close()


def test_a_template_for_every_operation_judges_a_create(tmp_path: Path) -> None:
    ps = policies(tmp_path, bats(ALL_OPERATIONS, ALL_NS))
    assert not webhook(ps, one(bats("good/good_ns.yaml")[0])).verdict.allowed
    ps.close()


def test_a_template_naming_no_operation_judges_them_all(tmp_path: Path) -> None:
    """No `operations`: every operation, Gatekeeper's default (its templates before the field)."""
    text = bats(UPDATE_ONLY)[0].read_text().replace('      operations: ["UPDATE"]\n', "")
    (tmp_path / "template.yaml").write_text(text)
    ps = policies(tmp_path, bats(ALL_NS))
    ns = one(bats("good/good_ns.yaml")[0])
    assert not webhook(ps, ns).verdict.allowed and not webhook(ps, ns, "UPDATE", old=ns).verdict.allowed
    ps.close()


def probes() -> list[Path]:
    base = gatekeeper() / "test/gator/test/fixtures/policies"
    return [base / "default/template_k8srequiredprobes.yaml", base / "enforcement_action/k8srequiredprobes/foo.yaml"]


def pod_without_probes() -> dict:
    text = (gatekeeper() / "test/gator/test/fixtures/manifests/no-policies/with-violations.yaml").read_text()
    return next(d for d in yaml.safe_load_all(text) if d and d.get("kind") == "Pod")


UNRECOGNIZED = (
    'could not validate enforcement actions: unrecognized enforcementAction: "foo" is not within the supported'
    " list [deny dryrun warn scoped]"
)


def test_an_unknown_enforcement_action_is_not_enforced_by_the_webhook_nor_audited(tmp_path: Path) -> None:
    """Gatekeeper's constraint controller refuses it (the status message); gator reports its violations
    without failing (bats: "enforcementAction=[anything else] causes 0 exit status")."""
    ps = policies(tmp_path, probes())
    assert any(p.endswith(f"K8sRequiredProbes must-have-probes: {UNRECOGNIZED}") for p in ps.problems)
    pod = pod_without_probes()
    decision = webhook(ps, pod)
    assert decision.verdict.allowed and decision.outcomes == []
    assert audit_object(ps, pod, PODS) == ()
    manifest = checked(ps, pod)
    assert manifest.failures == [] and manifest.warnings == []  # gator: exit 0
    assert manifest.reported[0].startswith("[must-have-probes] Container <tomcat> in your <Pod> <test-pod1> has no")
    assert manifest.reported[0].endswith("(foo)")  # gator prints every violation
    ps.close()
    (tmp_path / "again").mkdir()
    ps = policies(tmp_path / "again", probes())
    constraint = Manifest("foo.yaml", 0, one(probes()[1]))  # a policy object is the webhook's to refuse
    check(ps, [constraint])
    assert constraint.failures == []
    ps.close()
    assert lastgood.constraint_error(one(probes()[1])) == UNRECOGNIZED


def test_an_unknown_enforcement_action_is_quoted_as_go_quotes_it() -> None:
    """Gatekeeper prints the action with %q: control and invisible characters escaped (were written raw)."""
    quoted = unrecognized_action('a"\n\u200bé')
    assert quoted.startswith('unrecognized enforcementAction: "a\\"\\n\\u200bé" is not within the supported list')


def test_check_prints_an_unknown_actions_violations_and_exits_zero(tmp_path: Path, capsys) -> None:
    """bats "enforcementAction=[anything else] causes 0 exit status and violations output", pretty."""
    template, constraint = probes()
    pod = tmp_path / "pod.yaml"
    pod.write_text(yaml.safe_dump(pod_without_probes()))
    code = main(["check", "--policies", str(template), "--policies", str(constraint), "-f", str(pod)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].startswith(f"NOTE - {pod}[0] - Pod/default/test-pod1 - [must-have-probes] Container <tomcat>")
    assert out[0].endswith("(foo)")
    assert out[-1] == "1 objects, 1 allowed, 0 refused (0 failures, 0 warnings)"


def test_verify_counts_an_unknown_actions_violations_as_gator_does(tmp_path: Path) -> None:
    template, constraint = probes()
    shutil.copy(template, tmp_path / "template.yaml")
    shutil.copy(constraint, tmp_path / "constraint.yaml")
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod_without_probes()))
    cases = [{"name": "pod", "object": "pod.yaml", "assertions": [{"violations": "yes"}]}]
    result = run_suite(write_suite(tmp_path, cases, name="foo"))
    assert not result.failed, format_results([result])


@pytest.mark.parametrize(
    ("scoped", "refusal"),
    [
        (
            [{"action": "block", "enforcementPoints": [{"name": "validation.gatekeeper.sh"}]}],
            "unrecognized enforcementAction: [block] is not within the supported list [deny dryrun warn]",
        ),
        (
            [{"action": "deny", "enforcementPoints": [{"name": "kubectl"}]}],
            "unrecognized enforcement points: constraint will not be enforced for enforcement points [kubectl],"
            " supported enforcement points are [validation.gatekeeper.sh audit.gatekeeper.sh gator.gatekeeper.sh"
            " vap.k8s.io]",
        ),
    ],
)
def test_unknown_scoped_actions_or_points_are_refused_with_gatekeepers_words(scoped: list, refusal: str) -> None:
    doc = one(bats("constraints/all_cm_must_have_gatekeeper_scoped.yaml")[0])
    doc["spec"]["scopedEnforcementActions"] = scoped
    assert lastgood.constraint_error(doc) == f"could not validate enforcement actions: {refusal}"


def test_verify_counts_gatekeepers_autorejection_when_the_namespace_is_missing(tmp_path: Path) -> None:
    """gator's verify runner table "namespace selector": no Namespace in the inventory is a violation
    whose message says the Namespace is missing (a constraint it cannot match, autorejected)."""
    base = Path(__file__).parent / "fixtures/library/requiredlabels"
    shutil.copy(base / "template.yaml", tmp_path / "template.yaml")
    constraint = one(base / "constraint.yaml")
    constraint["spec"]["match"] = {
        "kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}],
        "namespaceSelector": {"matchLabels": {"strict": "true"}},
    }
    (tmp_path / "constraint.yaml").write_text(yaml.safe_dump(constraint))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team"}}
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(cm))
    cases = [
        {
            "name": "missing-namespace",
            "object": "cm.yaml",
            "assertions": [{"violations": "yes", "message": "missing Namespace"}, {"violations": 1}],
        }
    ]
    write_suite(tmp_path, cases, name="namespace selected Constraint")
    result = run_suite(tmp_path / "suite.yaml")
    assert not result.failed, format_results([result])


def test_check_judges_at_another_point_when_asked(tmp_path: Path) -> None:
    """`--enforcement-point validation.gatekeeper.sh` replays the admission server (the bats steps as the
    cluster decided them): the scoped webhook actions, the template's operations, the Config's exclusions."""
    from regokite.cli import main

    for i, f in enumerate(bats(*SCOPED, UPDATE_ONLY, ALL_NS)):
        shutil.copy(f, tmp_path / f"{i}-{f.name}")
    cm, ns = bats("bad/bad_cm_scoped.yaml", "good/good_ns.yaml")

    def check(*args: str) -> int:
        return main(["check", "--policies", str(tmp_path), "-f", str(cm), "-f", str(ns), *args])

    assert check() == 1  # gator: the UPDATE-only template judges the Namespace's CREATE; no scoped one applies
    assert check("--enforcement-point", "validation.gatekeeper.sh") == 1  # the scoped webhook deny
    gatekeeper_config = {
        "apiVersion": "config.gatekeeper.sh/v1alpha1",
        "kind": "Config",
        "metadata": {"name": "config", "namespace": "gatekeeper-system"},
        "spec": {"match": [{"excludedNamespaces": ["gatekeeper-test-playground-scoped"], "processes": ["webhook"]}]},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(gatekeeper_config))
    assert check("--enforcement-point", "validation.gatekeeper.sh") == 0  # excluded ConfigMap; CREATE admitted
    assert check() == 1  # gator reads no Config


NEVER_VALIDATE = template_yaml(
    "NeverValidate",
    """\
package k8snevervalidate
violation[{"msg": msg}] {
  true
  msg := "never validate"
}
""",
    "templates.gatekeeper.sh/v1beta1",
)


def test_gators_runner_table_namespace_selector(tmp_path: Path) -> None:
    """pkg/gator/verify's runner table "namespace selector" (its fixtures re-typed here): the inventory's
    Namespaces are written `apiVersion: /v1` (the core group spelt out), which Gatekeeper's namespace
    cache takes by group and kind; with none, Gatekeeper's autorejection is the violation."""
    (tmp_path / "template.yaml").write_text(NEVER_VALIDATE)
    constraint = {
        "kind": "NeverValidate",
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "metadata": {"name": "never-validate-namespace"},
        "spec": {"match": {"namespaceSelector": {"matchLabels": {"bar": "qux"}}}},
    }
    (tmp_path / "constraint.yaml").write_text(yaml.safe_dump(constraint))
    obj = {"kind": "Object", "apiVersion": "group.sh/v1", "metadata": {"name": "object", "namespace": "foo"}}
    (tmp_path / "object.yaml").write_text(yaml.safe_dump(obj))
    for name, label in (("inventory.yaml", "qux"), ("inventory-2.yaml", "bar")):
        ns = {"kind": "Namespace", "apiVersion": "/v1", "metadata": {"name": "foo", "labels": {"bar": label}}}
        (tmp_path / name).write_text(yaml.safe_dump(ns))
    cases = [
        {"name": "selected", "object": "object.yaml", "inventory": ["inventory.yaml"],
         "assertions": [{"violations": "yes", "message": "never validate"}]},
        {"name": "not-selected", "object": "object.yaml", "inventory": ["inventory-2.yaml"],
         "assertions": [{"violations": "no"}]},
        {"name": "missing-namespace", "object": "object.yaml",
         "assertions": [{"violations": "yes", "message": "missing Namespace"}]},
    ]  # fmt: skip
    result = run_suite(write_suite(tmp_path, cases, name="namespace selected Constraint"))
    assert not result.failed, format_results([result])
