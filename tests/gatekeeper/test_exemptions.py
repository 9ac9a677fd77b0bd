"""Gatekeeper's namespace exemptions (the ignore label and its webhook) and DELETE reviews of constraints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from regokite.admission.app import ServingState, create_app
from regokite.admission.decide import decide, label_verdict
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.gatekeeper.exempt import IGNORE_LABEL, Exemptions
from tests.admission.reviews import review
from tests.gatekeeper.template_text import template_yaml

PROTECTED = (
    template_yaml(
        "K8sProtected",
        """\
package k8sprotected

violation[{"msg": msg}] {
  input.review.object.metadata.labels.protected == "true"
  input.review.operation == "DELETE"
  msg := sprintf("%v is protected", [input.review.object.metadata.name])
}
""",
        "templates.gatekeeper.sh/v1beta1",
    )
    + """\
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sProtected
metadata:
  name: no-protected-deletes
spec:
  match:
    kinds:
      - apiGroups: [""]
        kinds: ["Namespace"]
    labelSelector:
      matchLabels:
        protected: "true"
"""
)


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def parsed(body: dict):
    return parse_review(json.dumps(body).encode())


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("kube-system", True), ("team-a", True), ("a-sandbox", True), ("payments", False), ("team", False)],
)
def test_only_exempt_namespaces_may_carry_the_ignore_label(name: str, allowed: bool) -> None:
    exemptions = Exemptions(("kube-system",), ("team-",), ("-sandbox",))
    verdict = label_verdict(parsed(review(namespace(name, **{IGNORE_LABEL: "why"}))), exemptions)
    assert verdict.allowed is allowed
    if not allowed:
        assert verdict.messages == [f"Only exempt namespace can have the {IGNORE_LABEL} label"]
    # without the label, or deleting, or not a Namespace: always allowed
    assert label_verdict(parsed(review(namespace(name))), exemptions).allowed
    labelled = namespace(name, **{IGNORE_LABEL: ""})
    assert label_verdict(parsed(review(None, operation="DELETE", old=labelled)), exemptions).allowed
    assert exemptions.patterns() == ["*-sandbox", "kube-system", "team-*"]


def test_the_label_webhook_is_served_at_gatekeepers_path(tmp_path: Path) -> None:
    policies = load_policy_set([str(tmp_path)])
    state = ServingState(policies, exemptions=Exemptions(("kube-system",)))
    with TestClient(create_app(state)) as http:
        refused = http.post("/v1/admitlabel", json=review(namespace("payments", **{IGNORE_LABEL: "x"}))).json()
        admitted = http.post("/v1/admitlabel", json=review(namespace("kube-system", **{IGNORE_LABEL: "x"}))).json()
    assert refused["response"]["allowed"] is False and IGNORE_LABEL in refused["response"]["status"]["message"]
    assert admitted["response"]["allowed"] is True


def test_a_delete_is_judged_on_the_object_being_deleted_as_gatekeeper_does(tmp_path: Path) -> None:
    (tmp_path / "protected.yaml").write_text(PROTECTED)
    policies = load_policy_set([str(tmp_path)])
    try:
        deleting = decide(
            policies,
            parsed(review(None, operation="DELETE", old=namespace("vault", protected="true"))),
            mode="validate",
        )
        assert deleting.verdict.messages == ["[no-protected-deletes] vault is protected"]
        other = namespace("scratch", protected="false")
        assert decide(policies, parsed(review(None, operation="DELETE", old=other)), mode="validate").verdict.allowed
    finally:
        policies.close()
