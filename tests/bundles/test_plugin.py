"""The bundle plugin against a bundle service over HTTPS: new revisions within the polling delay, ETags,
long polling, credentials, signatures refused while the last good keeps serving, persistence, status."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from regokite.bundles.archive import LoadedBundle, combine
from regokite.bundles.config import BundleSource, ClientTls, OpaConfig, Polling, parse_config
from regokite.bundles.plugin import BundlePlugin, read_status, read_store
from regokite.engine import UNDEFINED
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import RegokiteError
from tests.bundles.bundle_service import BundleService
from tests.bundles.opa_build import build, make_key
from tests.waiting import wait_until

POLICY = "package authz\n\nallow if input.user in data.authz.admins\n"
KEY = make_key("ES256")


def authz(revision: str, admins: list[str], *, key: Any = KEY, policy: str = POLICY) -> bytes:
    manifest = {"revision": revision, "roots": ["authz"]}
    return build({"authz/policy.rego": policy}, {"authz": {"admins": admins}}, manifest, key=key)


def config(service: BundleService, **bundle: Any) -> OpaConfig:
    doc = {
        "services": {"acme": {"url": service.url, "tls": {"ca_cert": str(service.ca_file)}}},
        "bundles": {"authz": {"service": "acme", "resource": "bundles/authz", **bundle}},
        "keys": {"global": {"algorithm": "ES256", "key": KEY.public_pem}},
        "status": {"service": "acme"},
    }
    if service.token:
        doc["services"]["acme"]["credentials"] = {"bearer": {"token": service.token}}
    return parse_config(doc)


def loads(bundles: list[LoadedBundle]) -> None:
    """What the server does before it activates: build the engine the served set makes."""
    EmbeddedEngine(combine(bundles)).close()


def allowed(store: Path, user: str) -> Any:
    """The decision the workers would make on the active bundles."""
    engine = EmbeddedEngine(combine(read_store(store, ["authz"])))
    try:
        return engine.evaluate("data.authz.allow", {"user": user}) is True
    finally:
        engine.close()


@contextmanager
def following(plugin: BundlePlugin) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


SIGNED = {"signing": {"keyid": "global"}, "polling": {"min_delay_seconds": 1, "max_delay_seconds": 1}}


def test_a_new_revision_is_decided_on_within_the_delay_and_etags_spare_downloads(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        plugin = BundlePlugin(config(service, **SIGNED), tmp_path / "store", loads)
        plugin.activate_all(timeout=10)
        assert allowed(plugin.store, "alice") and not allowed(plugin.store, "bob")
        with following(plugin):
            wait_until(lambda: service.answered(304) >= 1, what="a poll answered not-modified (If-None-Match sent)")
            service.put("authz", authz("r2", ["bob"]))
            wait_until(lambda: allowed(plugin.store, "bob"), timeout=5, what="revision r2 decided on")
        assert not allowed(plugin.store, "alice")
        assert plugin.status["authz"].active_revision == "r2"
        assert service.answered(200) == 2  # r1 and r2 only: the polls between were 304s


def test_tampered_and_unsigned_bundles_are_refused_while_the_last_good_serves(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        plugin = BundlePlugin(config(service, **SIGNED), tmp_path / "store", loads)
        plugin.activate_all(timeout=10)
        signed = authz("r2", ["mallory"])
        with following(plugin):
            service.put("authz", signed.replace(b"", b"", 0)[:-1] + bytes([signed[-1] ^ 1]))  # a corrupt archive
            wait_until(lambda: "not a gzipped tarball" in plugin.status["authz"].message, what="corrupt refused")
            tampered = build({"authz/policy.rego": POLICY}, {"authz": {"admins": ["mallory"]}}, None)
            service.put("authz", tampered)  # unsigned
            wait_until(lambda: "bundle missing .signatures.json" in plugin.status["authz"].message, what="unsigned")
            assert allowed(plugin.store, "alice") and not allowed(plugin.store, "mallory")
            service.put("authz", authz("r3", ["mallory"], key=make_key("ES256")))  # signed by another key
            wait_until(lambda: "failed to verify the signature" in plugin.status["authz"].message, what="wrong key")
            assert allowed(plugin.store, "alice") and plugin.status["authz"].active_revision == "r1"
            document = read_status(plugin.store)
            assert document is not None and document["bundles"]["authz"]["code"] == "bundle_error"
            service.put("authz", authz("r4", ["carol"]))
            wait_until(lambda: allowed(plugin.store, "carol"), what="a good revision after the refused ones")
        assert plugin.status["authz"].code == ""


def test_a_bundle_that_does_not_load_keeps_the_last_good(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        plugin = BundlePlugin(config(service, **SIGNED), tmp_path / "store", loads)
        plugin.activate_all(timeout=10)
        with following(plugin):
            service.put("authz", authz("r2", ["bob"], policy="package authz\n\nallow if undefined_function(1)\n"))
            wait_until(lambda: plugin.status["authz"].code == "bundle_error", what="the uncompilable bundle refused")
            assert allowed(plugin.store, "alice") and plugin.status["authz"].active_revision == "r1"


def test_a_bundle_that_does_not_load_is_asked_for_again_after_the_polling_delay(tmp_path: Path) -> None:
    """As OPA: a bundle downloaded and verified but refused by the served set is asked for again (with the
    last good one's ETag, so it comes again) after the polling delay, not after a failed download's
    backoff from 0.1 s, which rebuilt the refused set several times a second."""
    polling = {**SIGNED, "polling": {"min_delay_seconds": 2, "max_delay_seconds": 2}}
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        plugin = BundlePlugin(config(service, **polling), tmp_path / "store", loads)
        plugin.activate_all(timeout=10)
        with following(plugin):
            service.put("authz", authz("r2", ["bob"], policy="package authz\n\nallow if undefined_function(1)\n"))
            wait_until(lambda: plugin.status["authz"].code == "bundle_error", timeout=6, what="the bundle refused")
            refused = service.answered(200)
            time.sleep(3.0)
            again = service.answered(200) - refused
        assert 1 <= again <= 2, f"{again} downloads of the refused bundle in 3 s (polling every 2 s)"
        assert allowed(plugin.store, "alice") and plugin.status["authz"].active_revision == "r1"


def test_a_restart_with_the_service_down_serves_the_persisted_bundle(tmp_path: Path) -> None:
    persisted = tmp_path / "opa"
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        settings = config(service, persist=True, **SIGNED)
        settings = replace(settings, persistence_directory=str(persisted))
        BundlePlugin(settings, tmp_path / "store1", loads).activate_all(timeout=10)
    assert (persisted / "bundles" / "authz" / "bundle.tar.gz").is_file()  # OPA's layout
    restarted = BundlePlugin(settings, tmp_path / "store2", loads)  # the service is gone
    restarted.start_from_disk()
    assert restarted.ready() and allowed(restarted.store, "alice")
    assert restarted.status["authz"].active_revision == "r1"
    restarted.poll("authz")  # the service down: an error in the status, the persisted one still serves
    assert restarted.status["authz"].code == "bundle_error" and allowed(restarted.store, "alice")


def test_a_tampered_persisted_bundle_is_not_served(tmp_path: Path) -> None:
    persisted = tmp_path / "opa" / "bundles" / "authz" / "bundle.tar.gz"
    persisted.parent.mkdir(parents=True)
    persisted.write_bytes(build({"authz/p.rego": POLICY}, {"authz": {"admins": ["mallory"]}}, None))
    with BundleService(tmp_path / "svc") as service:
        settings = config(service, persist=True, **SIGNED)
    plugin = BundlePlugin(replace(settings, persistence_directory=str(tmp_path / "opa")), tmp_path / "store", loads)
    plugin.start_from_disk()
    assert not plugin.ready()


def test_long_polling_picks_up_a_revision_before_the_polling_delay(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc", long_polling=True) as service:
        service.put("authz", authz("r1", ["alice"]))
        polling = {"min_delay_seconds": 60, "max_delay_seconds": 120, "long_polling_timeout_seconds": 30}
        plugin = BundlePlugin(config(service, signing={"keyid": "global"}, polling=polling), tmp_path / "s", loads)
        plugin.activate_all(timeout=10)
        with following(plugin):  # the next request would be 60-120 s away without long polling
            service.put("authz", authz("r2", ["bob"]))
            wait_until(lambda: allowed(plugin.store, "bob"), timeout=5, what="r2 through the held request")
            service.put("authz", authz("r3", ["carol"]))
            wait_until(lambda: allowed(plugin.store, "carol"), timeout=5, what="r3 through the next held request")
        assert service.answered(304) == 0  # each held request answered when the bundle changed


def test_bearer_token_and_client_certificate(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc", token="s3cret", client_ca=True) as service:
        service.put("authz", authz("r1", ["alice"]))
        cert, key = service.client_files()
        doc = config(service, **SIGNED)
        acme = doc.services["acme"]
        with_cert = replace(acme, client_tls=ClientTls(str(cert), str(key)))
        plugin = BundlePlugin(replace(doc, services={"acme": with_cert}), tmp_path / "s1", loads)
        plugin.activate_all(timeout=10)
        assert allowed(plugin.store, "alice")
        no_token = BundlePlugin(
            replace(doc, services={"acme": replace(with_cert, bearer_token="x")}), tmp_path / "s2", loads
        )
        no_token.poll("authz")
        assert "server replied with Unauthorized" in no_token.status["authz"].message
        no_cert = BundlePlugin(doc, tmp_path / "s3", loads)
        no_cert.poll("authz")
        assert no_cert.status["authz"].code == "bundle_error" and not no_cert.ready()


def test_status_reaches_the_status_service_in_opa_shape(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        plugin = BundlePlugin(config(service, **SIGNED), tmp_path / "store", loads)
        plugin.activate_all(timeout=10)
        document = service.statuses[-1]
    bundle = document["bundles"]["authz"]
    assert bundle["name"] == "authz" and bundle["active_revision"] == "r1"
    for key in ("last_request", "last_successful_request", "last_successful_download", "last_successful_activation"):
        assert bundle[key].endswith("Z")
    assert document["labels"]["id"] == plugin.instance_id and document["plugins"]["bundle"]["state"] == "OK"


def test_two_bundles_with_overlapping_roots_are_not_both_active(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc") as service:
        service.put("authz", authz("r1", ["alice"]))
        service.put("other", build({}, {"authz": {"x": 1}}, {"revision": "o1", "roots": ["authz/x"]}))
        doc = config(service, **SIGNED)
        bundles = {**doc.bundles, "other": BundleSource("other", "acme", "bundles/other")}
        plugin = BundlePlugin(replace(doc, bundles=bundles), tmp_path / "store", loads)
        with pytest.raises(RegokiteError, match="bundles not activated"):
            plugin.activate_all(timeout=1)
        assert "overlapping roots" in plugin.status["other"].message
        assert allowed(plugin.store, "alice")


def test_no_decision_before_the_bundles_are_in() -> None:
    assert EmbeddedEngine(combine([])).evaluate("data.authz.allow", {"user": "alice"}) is UNDEFINED


def test_delays_are_opas() -> None:
    """A draw between min and max after a success, none while the server long-polls, OPA's backoff from 100 ms
    after failures, never past max."""
    import random

    from regokite.bundles.download import next_delay

    source = BundleSource("b", "s", "r", Polling(10, 20, 30))
    rng = random.Random(1)
    draws = [next_delay(source, 0, False, rng) for _ in range(200)]
    assert all(10 <= d <= 20 for d in draws) and max(draws) - min(draws) > 5
    assert next_delay(source, 0, True, rng) == 0.0
    assert 0.08 <= next_delay(source, 1, False, rng) <= 0.12
    assert next_delay(source, 50, False, rng) <= 20


def test_bundles_pulled_from_an_oci_registry_with_its_token_flow(tmp_path: Path) -> None:
    """OPA's OCI downloader: the manifest's tar+gzip layer is the bundle, its digest the ETag (an unchanged
    digest is not pulled again), Docker's token flow asked with the service's credentials."""
    with BundleService(tmp_path / "svc", token="s3cret", registry_token="registry-token") as service:
        service.push("org/authz", "1.0", authz("r1", ["alice"]))
        doc = config(service, signing={"keyid": "global"})
        registry = replace(doc.services["acme"], type="oci")
        source = replace(doc.bundles["authz"], resource="127.0.0.1/org/authz:1.0")
        plugin = BundlePlugin(
            replace(doc, services={"acme": registry}, bundles={"authz": source}), tmp_path / "s", loads
        )
        plugin.activate_all(timeout=10)
        assert allowed(plugin.store, "alice") and plugin.status["authz"].active_revision == "r1"
        blobs = sum(1 for path, code in service.codes if "/blobs/" in path and code == 200)
        plugin.poll("authz")  # the same digest: the blob is not pulled again
        assert sum(1 for path, code in service.codes if "/blobs/" in path and code == 200) == blobs
        service.push("org/authz", "1.0", authz("r2", ["bob"]))
        plugin.poll("authz")
        assert allowed(plugin.store, "bob") and plugin.status["authz"].active_revision == "r2"
        service.push("org/authz", "1.0", authz("r3", ["mallory"], key=make_key("ES256")))
        plugin.poll("authz")
        assert "failed to verify" in plugin.status["authz"].message and allowed(plugin.store, "bob")


@pytest.mark.parametrize(
    ("resource", "parsed"),
    [
        ("ghcr.io/org/policy:1.0", ("org/policy", "1.0")),
        ("localhost:5000/policy", ("policy", "latest")),
        ("org/policy@sha256:abc", ("org/policy", "sha256:abc")),
        ("org/policy", ("org/policy", "latest")),
    ],
)
def test_image_references(resource: str, parsed: tuple[str, str]) -> None:
    from regokite.bundles.oci import parse_reference

    assert parse_reference(resource) == parsed


def test_a_token_file_gone_is_a_failed_poll_not_a_dead_poller(tmp_path: Path) -> None:
    with BundleService(tmp_path / "svc", token="s3cret") as service:
        service.put("authz", authz("r1", ["alice"]))
        doc = config(service, **SIGNED)
        token_file = tmp_path / "token"
        token_file.write_text("s3cret")
        acme = replace(doc.services["acme"], bearer_token=None, bearer_token_path=str(token_file))
        plugin = BundlePlugin(replace(doc, services={"acme": acme}), tmp_path / "store", loads)
        plugin.activate_all(timeout=10)
        token_file.unlink()
        plugin.poll("authz")
        assert "token_path" in plugin.status["authz"].message and allowed(plugin.store, "alice")
        token_file.write_text("s3cret")  # a rotated token is read at the next request
        service.put("authz", authz("r2", ["bob"]))
        plugin.poll("authz")
        assert allowed(plugin.store, "bob")
