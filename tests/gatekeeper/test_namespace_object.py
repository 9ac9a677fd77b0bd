"""`input.review.namespaceObject` as Gatekeeper fills it, on every path a user meets it.

Gatekeeper's bats case "namespace object access - Rego engine test": a
template that reads the ConfigMap's Namespace labels through
`input.review.namespaceObject` (and says so when it is null). The admission
server and the audit read the Namespace from the replicated Namespaces;
`check` from the input's Namespace objects, `verify` from a case's inventory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from regokite.audit.scan import audit_object
from regokite.check import Manifest, check
from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.gatekeeper.match import namespace_object, review_namespace
from regokite.gatekeeper.verify import format_results, run_suite
from tests.admission.reviews import review
from tests.gatekeeper.suites import write_suite
from tests.gatekeeper.test_enforcement_points import bats, one

CONFIGMAPS = ResourceRef("", "v1", "configmaps", True)
LABELLED, UNLABELLED = "good/ns_with_env_label.yaml", "bad/ns_without_env_label.yaml"
CM_LABELLED, CM_UNLABELLED = "good/cm_in_labeled_ns.yaml", "bad/cm_in_unlabeled_ns.yaml"
MISSING_LABEL = (
    "[ns-must-have-env-label-rego] Namespace 'ns-without-env-label' does not have required label: environment"
)


def load(root: Path) -> PolicySet:
    for name in ("templates/k8snamespacelabelcheck_template_rego.yaml", "constraints/ns_must_have_env_label_rego.yaml"):
        shutil.copy(bats(name)[0], root / Path(name).name)
    return load_policy_set([str(root)])


@pytest.fixture
def policies(tmp_path: Path):
    ps = load(tmp_path)
    yield ps
    ps.close()


def replica(*namespaces: str) -> ReplicaStore:
    store = ReplicaStore()
    for name in namespaces:
        store.put("namespaces", one(bats(name)[0]), namespaced=False)
    return store


def webhook(ps: PolicySet, obj: dict):
    return decide(ps, parse_review(json.dumps(review(obj)).encode()), mode="validate").verdict


def test_the_webhook_fills_it_from_the_replicated_namespaces(policies) -> None:
    """The bats case: the ConfigMap in the labelled Namespace is admitted, the other refused."""
    policies.follow(replica(LABELLED, UNLABELLED))
    assert webhook(policies, one(bats(CM_LABELLED)[0])).allowed
    refused = webhook(policies, one(bats(CM_UNLABELLED)[0]))
    assert refused.messages == [MISSING_LABEL] and refused.code == 403


def test_a_namespace_not_replicated_refuses_in_gatekeepers_words(policies) -> None:
    """Gatekeeper's webhook reads a Namespace it has not cached from the API server, and fails the
    request when it is not there; regokite, reading only its replica, refuses (fail closed)."""
    policies.follow(replica(LABELLED))
    refused = webhook(policies, one(bats(CM_UNLABELLED)[0]))
    assert not refused.allowed and refused.code == 500
    assert refused.messages[0].startswith(
        "[ns-must-have-env-label-rego] policy error: failed to create augmentedReview:"
        ' namespaces "ns-without-env-label" not found'
    )


def test_the_constraint_replicates_namespaces_and_is_not_served_without_a_cluster(policies) -> None:
    assert NAMESPACES_REF in policies.replicate
    local = policies.without_cluster_data()
    assert local.not_served["ns-must-have-env-label-rego"] == "v1/namespaces (namespaceObject)"


NAMESPACES_REF = ResourceRef("", "v1", "namespaces", False)


def test_audit_fills_it_from_the_replicated_namespaces(policies) -> None:
    policies.follow(replica(LABELLED, UNLABELLED))
    assert audit_object(policies, one(bats(CM_LABELLED)[0]), CONFIGMAPS) == ()
    [found] = audit_object(policies, one(bats(CM_UNLABELLED)[0]), CONFIGMAPS)
    assert (found.result, f"[{found.policy}] {found.message}") == ("fail", MISSING_LABEL)


def test_check_fills_it_from_the_inputs_namespaces_and_leaves_it_null_without(policies, tmp_path: Path) -> None:
    """gator's point: a Namespace in the input is the object's; none given is `{}`, gator's always (the
    template's null branch never fires in Gatekeeper, nor its label one without a name to print)."""
    cm = Manifest("in.yaml", 1, one(bats(CM_UNLABELLED)[0]))
    check(policies, [Manifest("in.yaml", 0, one(bats(UNLABELLED)[0])), cm])
    assert cm.failures == [MISSING_LABEL]
    alone = Manifest("in.yaml", 0, one(bats(CM_UNLABELLED)[0]))
    (tmp_path / "again").mkdir()
    ps = load(tmp_path / "again")
    check(ps, [alone])
    ps.close()
    assert alone.failures == []


def test_verify_fills_it_from_a_cases_inventory(tmp_path: Path) -> None:
    for name in (
        "templates/k8snamespacelabelcheck_template_rego.yaml",
        "constraints/ns_must_have_env_label_rego.yaml",
        LABELLED,
        UNLABELLED,
        CM_LABELLED,
        CM_UNLABELLED,
    ):
        shutil.copy(bats(name)[0], tmp_path / Path(name).name)
    case = {"object": "cm_in_unlabeled_ns.yaml"}
    cases = [
        {**case, "name": "labelled", "object": "cm_in_labeled_ns.yaml", "inventory": ["ns_with_env_label.yaml"],
         "assertions": [{"violations": "no"}]},
        {**case, "name": "unlabelled", "inventory": ["ns_without_env_label.yaml"],
         "assertions": [{"violations": 1, "message": "does not have required label"}]},
        {**case, "name": "no-namespace", "assertions": [{"violations": 0}]},
    ]  # fmt: skip
    suite = write_suite(
        tmp_path,
        cases,
        name="namespace-object",
        template="k8snamespacelabelcheck_template_rego.yaml",
        constraint="ns_must_have_env_label_rego.yaml",
    )
    result = run_suite(suite)
    assert not result.failed, format_results([result])


def test_it_is_empty_for_cluster_scoped_objects_and_namespaces() -> None:
    """Gatekeeper's driver passes no Namespace as a nil map, which OPA's input holds as `{}`."""
    namespaces = {"a": {"metadata": {"name": "a"}}}.get
    pod = {"kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "a"}
    assert namespace_object(pod, namespaces) == ("a", {"metadata": {"name": "a"}})
    namespace = {"kind": {"group": "", "version": "v1", "kind": "Namespace"}, "namespace": "a", "name": "a"}
    assert namespace_object(namespace, namespaces) == ("", None)
    assert namespace_object({"kind": {"group": "", "version": "v1", "kind": "Node"}}, namespaces) == ("", None)
    assert review_namespace(None) == {}


def test_other_policies_keep_the_review_as_the_api_server_sent_it(tmp_path: Path) -> None:
    """Only a constraint's input.review gains namespaceObject: a Rego policy's input.request does not."""
    for name in ("templates/k8snamespacelabelcheck_template_rego.yaml", "constraints/ns_must_have_env_label_rego.yaml"):
        shutil.copy(bats(name)[0], tmp_path / Path(name).name)
    (tmp_path / "plain.rego").write_text(
        "package plain\n\n"
        'deny contains "namespaceObject in input.request" if "namespaceObject" in object.keys(input.request)\n'
    )
    ps = load_policy_set([str(tmp_path)])
    ps.follow(replica(LABELLED))
    decision = decide(ps, parse_review(json.dumps(review(one(bats(CM_LABELLED)[0]))).encode()), mode="validate")
    ps.close()
    assert {o.policy: o.decision for o in decision.outcomes} == {
        "plain": "allowed",
        "ns-must-have-env-label-rego": "allowed",
    }
