"""OPA's configuration file read as OPA reads it: its defaults, its checks, and refusals by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.bundles.config import ConfigError, Polling, load_config, parse_config

CONFIG = """
services:
  acmecorp:
    url: https://bundles.example.com/v1/
    credentials:
      bearer:
        token: "${BUNDLE_TOKEN}"
    tls:
      ca_cert: /etc/ca.pem
  mtls:
    url: https://mtls.example.com
    credentials:
      client_tls:
        cert: /c.pem
        private_key: /k.pem
bundles:
  authz:
    service: acmecorp
    resource: bundles/authz.tar.gz
    persist: true
    polling:
      min_delay_seconds: 10
      max_delay_seconds: 20
      long_polling_timeout_seconds: 30
    signing:
      keyid: global
      scope: write
  other:
    service: mtls
keys:
  global:
    algorithm: ES256
    key: "-----BEGIN PUBLIC KEY-----"
status:
  service: acmecorp
decision_logs:
  service: acmecorp
  reporting:
    min_delay_seconds: 5
labels:
  region: west
"""


def test_the_documented_keys_are_read_with_opa_defaults(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(CONFIG)
    config = load_config(file, environ={"BUNDLE_TOKEN": "s3cret"})
    acme = config.services["acmecorp"]
    assert acme.url == "https://bundles.example.com/v1" and acme.ca_cert == "/etc/ca.pem"
    assert acme.authorization() == "Bearer s3cret"
    assert config.services["mtls"].client_tls is not None and config.services["mtls"].authorization() is None
    authz = config.bundles["authz"]
    assert (authz.resource, authz.persist, authz.polling) == ("bundles/authz.tar.gz", True, Polling(10, 20, 30))
    assert authz.signing is not None and (authz.signing.keyid, authz.signing.scope) == ("global", "write")
    other = config.bundles["other"]  # OPA's defaults: resource bundles/<name>, 60-120 s
    assert (other.resource, other.polling, other.signing, other.persist) == (
        "bundles/other",
        Polling(60, 120),
        None,
        False,
    )
    assert config.keys["global"].algorithm == "ES256"
    assert config.status is not None and config.status.service == "acmecorp"
    # decision_logs is handed over as written (the decision logger parses it)
    assert config.decision_logs == {"service": "acmecorp", "reporting": {"min_delay_seconds": 5}}
    assert config.labels == {"region": "west"} and config.persistence_directory == ".opa"


def test_a_bundle_without_a_service_takes_the_only_one() -> None:
    config = parse_config({"services": [{"name": "s", "url": "http://x"}], "bundles": {"b": {}}})
    assert config.bundles["b"].service == "s"
    with pytest.raises(ConfigError, match=r"bundles.b.service: name the service \(there are 2\)"):
        parse_config({"services": {"s": {"url": "http://x"}, "t": {"url": "http://y"}}, "bundles": {"b": {}}})


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ({"discovery": {}}, "discovery: regokite does not serve discovery bundles"),
        ({"plugins": {}}, "plugins: regokite does not serve custom plugins"),
        ({"nonsense": 1}, "nonsense: not a key of OPA's configuration"),
        ({"services": {"s": {"url": "http://x", "type": "s3"}}}, "services.s.type: 's3': regokite knows http and oci"),
        (
            {"services": {"s": {"url": "http://x", "credentials": {"oauth2": {}}}}},
            "services.s.credentials.oauth2: regokite does not support OAuth2 credentials",
        ),
        ({"services": {"s": {"url": "ftp://x"}}}, "is not an http(s) URL"),
        ({"bundles": {"b": {"service": "nope"}}, "services": {"s": {"url": "http://x"}}}, "no service named 'nope'"),
        (
            {"services": {"s": {"url": "http://x"}}, "bundles": {"b": {"polling": {"min_delay_seconds": 5}}}},
            "missing 'max_delay_seconds'",
        ),
        (
            {
                "services": {"s": {"url": "http://x"}},
                "bundles": {"b": {"polling": {"min_delay_seconds": 5, "max_delay_seconds": 1}}},
            },
            "max polling delay must be >= min polling delay",
        ),
        (
            {"services": {"s": {"url": "http://x"}}, "bundles": {"b": {"signing": {"keyid": "k"}}}},
            "bundles.b.signing.keyid: no key named 'k'",
        ),
        ({"keys": {"k": {"algorithm": "EdDSA", "key": "x"}}}, "keys.k.algorithm: unsupported 'EdDSA'"),
        (
            {"services": {"s": {"url": "http://x"}}, "bundles": {"b": {"trigger": "manual"}}},
            "bundles.b.trigger: regokite polls",
        ),
        ({"status": {"plugin": "mine"}}, "status.plugin: regokite does not support status plugins"),
    ],
)
def test_what_regokite_does_not_serve_is_refused_by_name(doc: dict, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(doc)
    assert said in str(err.value)


def test_bundle_urls_become_bundles_of_their_own() -> None:
    config = parse_config({}).with_urls(["https://host:8443/bundles/a.tar.gz"])
    source = config.bundles["https://host:8443/bundles/a.tar.gz"]
    assert config.services[source.service].url == "https://host:8443"
    assert source.resource == "bundles/a.tar.gz"
