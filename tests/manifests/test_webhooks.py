"""Webhook configurations come from the policies' own declarations."""

from __future__ import annotations

from pathlib import Path

from regokite.admission.policies import load_policy_set
from regokite.manifests.webhooks import WebhookTarget, webhook_configurations

ROOT = Path(__file__).resolve().parents[2]
# The admission policies and their helpers (policies/ also holds controller and watch packages).
ADMISSION_ROOTS = [str(ROOT / "policies" / "admission"), str(ROOT / "policies" / "lib")]


def configs(target: WebhookTarget) -> dict[str, dict]:
    policy_set = load_policy_set(ADMISSION_ROOTS)
    return {c["kind"]: c for c in webhook_configurations(list(policy_set.policies), target)}


def test_each_policy_gets_its_own_webhook_with_its_rules_and_failure_policy() -> None:
    out = configs(WebhookTarget("regokite", "regokite-system", service="regokite-admission", ca_bundle="Q0E="))
    validating = {w["name"]: w for w in out["ValidatingWebhookConfiguration"]["webhooks"]}
    hook = validating["admission.max-replicas.validate.regokite.dev"]
    assert hook["clientConfig"]["service"] == {
        "name": "regokite-admission",
        "namespace": "regokite-system",
        "port": 443,
        "path": "/validate/admission.max-replicas",
    }
    assert hook["clientConfig"]["caBundle"] == "Q0E="
    assert any("deployments" in r["resources"] for r in hook["rules"])
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1", "v1beta1"]


def test_mutating_policies_get_a_mutating_configuration() -> None:
    out = configs(WebhookTarget("regokite", "regokite-system", service="svc"))
    mutating = out["MutatingWebhookConfiguration"]["webhooks"]
    assert [w["clientConfig"]["service"]["path"] for w in mutating] == ["/mutate/admission.default-labels"]
    assert mutating[0]["reinvocationPolicy"] == "IfNeeded"


def test_regokites_own_namespace_and_excluded_namespaces_are_never_sent() -> None:
    out = configs(WebhookTarget("regokite", "regokite-system", service="svc"))
    for hook in out["ValidatingWebhookConfiguration"]["webhooks"]:
        not_in = [
            e
            for e in hook["namespaceSelector"]["matchExpressions"]
            if e["operator"] == "NotIn" and e["key"] == "kubernetes.io/metadata.name"
        ]
        assert len(not_in) == 1
        assert "regokite-system" in not_in[0]["values"]
    registries = next(
        w
        for w in out["ValidatingWebhookConfiguration"]["webhooks"]
        if w["name"].startswith("admission.allowed-registries")
    )
    assert "kube-system" in registries["namespaceSelector"]["matchExpressions"][-1]["values"]


def test_cert_manager_injects_the_ca_instead_of_a_bundle() -> None:
    target = WebhookTarget(
        "regokite", "ns", service="svc", ca_bundle="Q0E=", cert_manager_certificate="ns/regokite-serving"
    )
    out = configs(target)
    config = out["ValidatingWebhookConfiguration"]
    assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "ns/regokite-serving"}
    assert all("caBundle" not in w["clientConfig"] for w in config["webhooks"])


def test_a_url_target_serves_out_of_cluster() -> None:
    out = configs(WebhookTarget("regokite", "ns", url="https://127.0.0.1:8443/", ca_bundle="Q0E="))
    hook = out["ValidatingWebhookConfiguration"]["webhooks"][0]
    assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:8443/validate/admission.")
