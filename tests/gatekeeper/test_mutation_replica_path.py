"""A mutator's namespaceSelector reads the Namespaces where the server replicates them (`--replicate-path`).

Gatekeeper's mutation webhook reads the request's Namespace from its cache;
regokite's generated match reads the replicated Namespaces, which sit under
`data.<replicate-path>.namespaces`, whatever the path is.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonpatch
import pytest

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.admission.settings import AdmissionSettings
from regokite.audit.scan import audit_object
from regokite.clusterdata.store import ReplicaStore, ResourceRef
from regokite.errors import RegokiteError
from tests.admission.reviews import deployment, review

MUTATOR = """
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: low-priority}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  match:
    namespaceSelector: {matchLabels: {tier: batch}}
  location: spec.priorityClassName
  parameters: {assign: {value: low}}
"""
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "jobs", "labels": {"tier": "batch"}}}
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "worker", "namespace": "jobs"},
    "spec": {"containers": [{"name": "a", "image": "busybox"}]},
}


def replica(path: str) -> ReplicaStore:
    store = ReplicaStore(path)
    store.put("namespaces", NAMESPACE, namespaced=False)
    return store


@pytest.mark.parametrize("path", ["kubernetes", "cluster", "cluster/replica"])
def test_the_namespace_selector_reads_the_replicate_path(tmp_path: Path, path: str) -> None:
    (tmp_path / "mutator.yaml").write_text(MUTATOR)
    settings = AdmissionSettings([str(tmp_path)], replicate_path=path)
    ps = settings.build(settings.read())
    try:
        ps.follow(replica(path))
        verdict = decide(ps, parse_review(json.dumps(review(POD)).encode()), mode="mutate").verdict
        assert verdict.allowed, verdict.messages
        assert jsonpatch.apply_patch(POD, verdict.patch or [])["spec"]["priorityClassName"] == "low"
    finally:
        ps.close()


EXPANSION_AND_CONSTRAINT = """
apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata: {name: expand-deployments}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  templateSource: spec.template
  generatedGVK: {kind: Pod, group: "", version: v1}
---
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8slowpriority}
spec:
  crd: {spec: {names: {kind: K8sLowPriority}}}
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8slowpriority
        violation[{"msg": "low priority"}] {
          input.review.object.spec.priorityClassName == "low"
        }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sLowPriority
metadata: {name: no-low-priority}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
"""


def test_the_audit_mutates_expanded_resources_with_the_namespaces_at_its_replicate_path(tmp_path: Path) -> None:
    """The audit judges a Deployment's Pod as the webhook would: mutated first (Source All)."""
    (tmp_path / "mutator.yaml").write_text(MUTATOR)
    (tmp_path / "policies.yaml").write_text(EXPANSION_AND_CONSTRAINT)
    ps = load_policy_set([str(tmp_path)], replicate_path="cluster")  # as the audit loads them
    try:
        ps.follow(replica("cluster"))
        workload = deployment(name="worker")
        workload["metadata"]["namespace"] = "jobs"
        found = audit_object(ps, workload, ResourceRef("apps", "v1", "deployments", True))
        assert [f.message for f in found] == ["[Implied by expand-deployments] low priority"], found
    finally:
        ps.close()


def test_a_replica_elsewhere_than_the_set_was_built_for_is_refused(tmp_path: Path) -> None:
    """Loudly, not a refusal of every Pod in a selected namespace for a Namespace it cannot see."""
    (tmp_path / "mutator.yaml").write_text(MUTATOR)
    ps = load_policy_set([str(tmp_path)])
    try:
        with pytest.raises(
            RegokiteError, match=r"the replica is at data\.cluster, the policies were built for data\.kubernetes"
        ):
            ps.follow(replica("cluster"))
    finally:
        ps.close()
