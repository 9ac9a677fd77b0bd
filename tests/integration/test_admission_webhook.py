"""The API server calls an HTTPS admission webhook and enforces its answer.

This is the path regokite's admission server serves; here a minimal test server
stands in for it so the cluster side is proven on its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import kube
import pytest
from kube import HttpsJsonServer, Obj, admission_response, create, delete
from kubernetes import client
from kubernetes.client.rest import ApiException

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


def deny_forbidden_configmaps(path: str, review: Obj) -> Obj:
    obj = review["request"]["object"]
    if obj.get("data", {}).get("forbidden"):
        return admission_response(review, False, "configmaps may not carry `forbidden`")
    return admission_response(review, True)


@pytest.fixture
def webhook(api: client.ApiClient, namespace: str) -> Iterator[HttpsJsonServer]:
    """A validating webhook for configmaps in this test's namespace only."""
    with HttpsJsonServer(deny_forbidden_configmaps) as server:
        name = f"{kube.unique_name('deny')}.test.regokite.dev"
        url, ca = f"{server.url}/validate", server.ca_bundle
        config = kube.webhook_config(
            "ValidatingWebhookConfiguration", name, url, ca, namespace, resource=("", "configmaps")
        )
        create(api, WEBHOOKS, config)
        try:
            yield server
        finally:
            delete(api, f"{WEBHOOKS}/{name}")


def test_the_api_server_calls_a_validating_webhook_and_enforces_its_denial(
    api: client.ApiClient, namespace: str, webhook: HttpsJsonServer
) -> None:
    cms = f"/api/v1/namespaces/{namespace}/configmaps"

    # Webhook registration reaches the API server's admission chain asynchronously.
    kube.wait_for(
        lambda: create(api, cms, {"metadata": {"name": kube.unique_name("probe")}}),
        lambda _: bool(webhook.requests),
        what="the API server to start calling the webhook",
        timeout=30,
    )
    allowed = create(api, cms, {"metadata": {"name": "fine"}, "data": {"ok": "yes"}})
    assert allowed["metadata"]["name"] == "fine"

    with pytest.raises(ApiException) as denied:
        create(api, cms, {"metadata": {"name": "bad"}, "data": {"forbidden": "yes"}})

    assert denied.value.status == 403
    message = json.loads(denied.value.body)["message"]
    assert "denied the request" in message
    assert "configmaps may not carry `forbidden`" in message
    assert not kube.exists(api, f"{cms}/bad")

    path, review = webhook.requests[-1]
    assert path == "/validate?timeout=5s", "the API server passes timeoutSeconds along"
    assert review["kind"] == "AdmissionReview"
    assert review["request"]["operation"] == "CREATE"
    assert review["request"]["namespace"] == namespace
    assert review["request"]["object"]["metadata"]["name"] == "bad"
    assert review["request"]["userInfo"]["username"] == "regokite-admin"
