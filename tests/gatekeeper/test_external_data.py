"""Gatekeeper's external_data: Providers from YAML, the request and answer shapes, the cache, mTLS, failures.

Each test talks HTTPS on loopback to tests/gatekeeper/signature_provider.py;
nothing is mocked between the builtin and the provider.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.engine import EngineSettings
from regokite.engine.extensions import ExtensionOptions
from regokite.engine.extensions.external_data import ExternalData, Provider, ProviderError, call_deadline
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.compile import compile_template
from regokite.gatekeeper.resources import parse_template, read_documents
from regokite.ops.tls import issue, new_ca, pem
from tests.admission.reviews import review
from tests.gatekeeper.signature_provider import CONSTRAINT, SIGNED_PREFIX, TEMPLATE, SignatureProvider

SIGNED = f"{SIGNED_PREFIX}web:1"
UNSIGNED = "docker.io/library/nginx:1"


def provider_of(sp: SignatureProvider, timeout: int = 2, name: str = "image-signatures") -> Provider:
    return Provider(name, sp.url, timeout, sp.ca_pem)


@pytest.fixture
def signer(tmp_path: Path):
    with SignatureProvider(tmp_path).running() as sp:
        yield sp


def test_request_and_answer_have_gatekeepers_shapes(signer: SignatureProvider) -> None:
    data = ExternalData()
    data.set_providers([provider_of(signer)])
    answer = data({"provider": "image-signatures", "keys": [SIGNED, UNSIGNED, "bad-error"]})
    assert signer.requests == [
        {
            "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
            "kind": "ProviderRequest",
            "request": {"keys": [SIGNED, UNSIGNED, "bad-error"]},
        }
    ]
    assert answer == {
        "responses": [[SIGNED, "signed"], [UNSIGNED, "unsigned"]],
        "errors": [["bad-error", "bad-error_invalid"]],
        "status_code": 200,
        "system_error": "",
    }


def test_cached_keys_are_not_asked_again_until_the_ttl_passes(signer: SignatureProvider) -> None:
    data = ExternalData(cache_ttl=0.5)
    data.set_providers([provider_of(signer)])
    data({"provider": "image-signatures", "keys": [SIGNED]})
    answer = data({"provider": "image-signatures", "keys": [SIGNED, UNSIGNED]})
    assert [r["request"]["keys"] for r in signer.requests] == [[SIGNED], [UNSIGNED]]  # only the missing key
    assert answer["responses"] == [[SIGNED, "signed"], [UNSIGNED, "unsigned"]]  # cached first, as Gatekeeper
    assert answer["status_code"] == 200
    # everything cached: no call, and no status code (Gatekeeper's 0)
    assert data({"provider": "image-signatures", "keys": [UNSIGNED]})["status_code"] == 0
    assert len(signer.requests) == 2
    time.sleep(0.6)
    data({"provider": "image-signatures", "keys": [SIGNED]})
    assert len(signer.requests) == 3


def test_ttl_zero_disables_the_cache(signer: SignatureProvider) -> None:
    data = ExternalData(cache_ttl=0)
    data.set_providers([provider_of(signer)])
    for _ in range(2):
        data({"provider": "image-signatures", "keys": [SIGNED]})
    assert len(signer.requests) == 2


def test_failures_are_system_errors_the_template_can_test(tmp_path: Path, signer: SignatureProvider) -> None:
    data = ExternalData()
    unknown = data({"provider": "nope", "keys": ["a"]})
    assert unknown["status_code"] == 400 and "not found in provider cache" in unknown["system_error"]
    assert unknown["responses"] == [] and unknown["errors"] == []

    down = SignatureProvider(tmp_path)  # never started: connection refused
    data.set_providers([provider_of(down)])
    refused = data({"provider": "image-signatures", "keys": ["a"]})
    assert refused["status_code"] == 500 and "failed to send external data request" in refused["system_error"]

    signer.garbage = True
    data.set_providers([provider_of(signer)])
    garbled = data({"provider": "image-signatures", "keys": ["b"]})
    assert "failed to unmarshal external data response" in garbled["system_error"]
    assert data({"provider": "image-signatures", "keys": []})["system_error"] == ""  # no keys: no call


def test_a_call_ends_at_the_provider_timeout_and_within_the_webhook_deadline(signer: SignatureProvider) -> None:
    signer.delay = 3.0
    data = ExternalData(cache_ttl=0)
    data.set_providers([provider_of(signer, timeout=1)])
    started = time.monotonic()
    slow = data({"provider": "image-signatures", "keys": ["a"]})
    assert "timed out" in slow["system_error"] and time.monotonic() - started < 2.9
    data.set_providers([provider_of(signer, timeout=10)])
    started = time.monotonic()
    with call_deadline(time.monotonic() + 0.5):
        cut = data({"provider": "image-signatures", "keys": ["b"]})
    assert "timed out" in cut["system_error"] and time.monotonic() - started < 2.9
    calls = len(signer.requests)
    with call_deadline(time.monotonic() - 1):
        late = data({"provider": "image-signatures", "keys": ["c"]})
    assert "deadline has passed" in late["system_error"] and len(signer.requests) == calls


def test_mutual_tls_presents_the_client_certificate(tmp_path: Path) -> None:
    client_ca = new_ca("admission CA")
    cert, key = issue(client_ca, ["regokite-admission"])
    (tmp_path / "ca.crt").write_bytes(pem(client_ca[0]))
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    with SignatureProvider(tmp_path, client_ca=tmp_path / "ca.crt").running() as sp:
        without = ExternalData()
        without.set_providers([provider_of(sp)])
        assert without({"provider": "image-signatures", "keys": ["a"]})["system_error"]
        assert sp.requests == []
        with_cert = ExternalData(client_cert=(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key")))
        with_cert.set_providers([provider_of(sp)])
        answer = with_cert({"provider": "image-signatures", "keys": [SIGNED]})
        assert answer["responses"] == [[SIGNED, "signed"]] and answer["system_error"] == ""
        assert sp.client_subjects == ["regokite-admission"]


def test_the_server_is_verified_with_the_providers_ca_bundle(signer: SignatureProvider) -> None:
    other_ca = pem(new_ca("someone else")[0])
    data = ExternalData()
    data.set_providers([Provider("image-signatures", signer.url, 2, other_ca)])
    assert "CERTIFICATE_VERIFY_FAILED" in data({"provider": "image-signatures", "keys": ["a"]})["system_error"]
    assert signer.requests == []


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"url": "http://127.0.0.1:1/x", "caBundle": "eA=="}, "only HTTPS scheme"),
        ({"url": "https://127.0.0.1:1/x"}, "caBundle should be set"),
        ({"url": "https://127.0.0.1:1/x", "caBundle": "not base64!"}, "failed to parse caBundle"),
        ({"url": "https://127.0.0.1:1/x", "caBundle": base64.b64encode(b"junk").decode()}, "failed to parse"),
        ({"url": "https://127.0.0.1:1/x", "caBundle": "eA==", "timeout": -1}, "positive integer"),
        ({"caBundle": "eA=="}, "invalid provider url"),
    ],
)
def test_providers_gatekeeper_would_refuse_are_refused(spec: dict, error: str) -> None:
    with pytest.raises(ProviderError, match=error):
        Provider.from_spec("p", spec)


def test_keys_must_be_strings() -> None:
    from regokite.engine.extensions.common import BuiltinError

    with pytest.raises(BuiltinError, match="keys must be an array of strings"):
        ExternalData()({"provider": "p", "keys": [1]})


def write_policies(directory: Path, sp: SignatureProvider) -> Path:
    directory.mkdir(exist_ok=True)
    (directory / "template.yaml").write_text(TEMPLATE)
    (directory / "constraint.yaml").write_text(CONSTRAINT)
    (directory / "provider.yaml").write_text(sp.provider_yaml())
    return directory


def pod(*images: str) -> dict:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": containers},
    }


def test_a_template_refuses_unsigned_images_through_a_provider_read_from_yaml(
    tmp_path: Path, signer: SignatureProvider
) -> None:
    options = ExtensionOptions()
    policies = load_policy_set([str(write_policies(tmp_path / "p", signer))], EngineSettings(extensions=options))
    try:
        judge = lambda obj: decide(policies, parse_review(json.dumps(review(obj)).encode()), mode="validate").verdict  # noqa: E731
        assert judge(pod(SIGNED)).allowed
        refused = judge(pod(SIGNED, UNSIGNED))
        assert refused.messages == [f"[signed-images] image {UNSIGNED} is unsigned"]
        signer.stop()
        options.external_data.cache_ttl = 0  # the provider is down, and nothing is cached
        down = judge(pod(SIGNED))
        assert not down.allowed
        assert down.messages[0].startswith("[signed-images] image signatures could not be checked: failed to send")
    finally:
        policies.close()


def test_a_provider_gatekeeper_would_refuse_is_a_load_problem(tmp_path: Path, signer: SignatureProvider) -> None:
    directory = write_policies(tmp_path / "p", signer)
    (directory / "provider.yaml").write_text(signer.provider_yaml().replace("https://", "http://"))
    policies = load_policy_set([str(directory)])
    try:
        assert any("Provider image-signatures: only HTTPS scheme" in p for p in policies.problems)
    finally:
        policies.close()


def test_external_data_is_refused_at_load_for_the_opa_engine(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(TEMPLATE)
    ((doc, node),) = read_documents(tmp_path / "t.yaml", "t.yaml")
    template = parse_template(doc, node, "t.yaml")
    compile_template(template)  # the embedded engine has it
    with pytest.raises(PolicyLoadError, match="embedded engine only") as refused:
        compile_template(template, EngineSettings("opa"))
    assert refused.value.location is not None and refused.value.location.line == 18  # the call, in the template file


def test_a_worker_process_starts_from_the_settings_and_providers_with_a_cache_of_its_own(
    signer: SignatureProvider,
) -> None:
    """Hook and admission workers receive the extension options pickled (the lock and cache stay behind)."""
    import pickle

    data = ExternalData(cache_ttl=7)
    data.set_providers([provider_of(signer)])
    data({"provider": "image-signatures", "keys": [SIGNED]})
    copy = pickle.loads(pickle.dumps(ExtensionOptions(external_data=data))).external_data
    assert copy.cache_ttl == 7 and copy.providers == data.providers
    copy({"provider": "image-signatures", "keys": [SIGNED]})
    assert len(signer.requests) == 2  # the copy's cache started empty: it asked the provider itself
