"""`regokite admission --config-file` serving signed bundles from an HTTPS bundle service: the first revision
before it is ready, a new one within the polling delay, a tampered one refused while the last good decides
(/readyz says why), a restart with the service down serving the persisted bundle; `--bundle FILE` too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.admission.reviews import deployment, review
from tests.admission.server import RunningServer, admission_server
from tests.bundles.bundle_service import BundleService
from tests.bundles.opa_build import build, make_key
from tests.waiting import wait_until

KEY = make_key("RS256")


def replicas_policy(limit: int) -> str:
    return f"""package admission.replicas

deny contains msg if {{
\tinput.request.object.spec.replicas > {limit}
\tmsg := sprintf("replicas %d is more than {limit}", [input.request.object.spec.replicas])
}}
"""


def bundle(revision: str, limit: int, key: Any = KEY) -> bytes:
    manifest = {"revision": revision, "roots": ["admission/replicas"]}
    return build({"admission/replicas/policy.rego": replicas_policy(limit)}, None, manifest, key=key)


def run_dir(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name


def allowed(server: RunningServer, replicas: int) -> bool:
    with server.client() as client:
        answer = client.post("/validate", json=review(deployment(replicas=replicas))).json()
    return answer["response"]["allowed"]


def readyz(server: RunningServer) -> dict[str, Any]:
    with server.client() as client:
        return client.get("/readyz").json()


def write_config(path: Path, service_url: str, ca: Path, persisted: Path) -> Path:
    config = {
        "services": {"acme": {"url": service_url, "tls": {"ca_cert": str(ca)}}},
        "bundles": {
            "replicas": {
                "service": "acme",
                "resource": "bundles/replicas",
                "persist": True,
                "polling": {"min_delay_seconds": 1, "max_delay_seconds": 1},
                "signing": {"keyid": "release"},
            }
        },
        "keys": {"release": {"algorithm": "RS256", "key": KEY.public_pem}},
        "persistence_directory": str(persisted),
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_admission_server_follows_a_signed_bundle_service(tmp_path: Path) -> None:
    persisted = tmp_path / "opa"
    with BundleService(tmp_path / "svc") as service:
        service.put("replicas", bundle("r1", 3))
        config = write_config(tmp_path / "config.yaml", service.url, service.ca_file, persisted)
        with admission_server([], run_dir(tmp_path, "run1"), "--config-file", str(config)) as server:
            assert not allowed(server, 4) and allowed(server, 3)
            assert readyz(server)["bundles"]["replicas"]["active_revision"] == "r1"
            service.put("replicas", bundle("r2", 5))
            wait_until(lambda: allowed(server, 4), timeout=8, what="revision r2 (limit 5) deciding")
            assert not allowed(server, 6)
            service.put("replicas", bundle("r3", 100, key=make_key("RS256")))  # signed by someone else
            wait_until(
                lambda: "failed to verify" in readyz(server)["bundles"]["replicas"].get("message", ""),
                what="the tampered revision refused, in /readyz",
            )
            assert not allowed(server, 6) and readyz(server)["bundles"]["replicas"]["active_revision"] == "r2"
            with server.client() as client:
                metrics = client.get("/metrics").text
            assert 'regokite_bundle_active_revision{name="replicas",revision="r2"} 1.0' in metrics
            assert 'regokite_bundle_failed_load_total{name="replicas"}' in metrics
    # the service is gone: a restart serves the persisted r2
    with admission_server([], run_dir(tmp_path, "run2"), "--config-file", str(config)) as server:
        assert allowed(server, 4) and not allowed(server, 6)
        assert readyz(server)["bundles"]["replicas"]["active_revision"] == "r2"


def test_a_bundle_file_is_served_and_reloaded(tmp_path: Path) -> None:
    file = tmp_path / "bundle.tar.gz"
    file.write_bytes(bundle("r1", 3, key=None))
    with admission_server([], run_dir(tmp_path, "run"), "--bundle", str(file)) as server:
        assert not allowed(server, 4)
        file.write_bytes(bundle("r2", 5, key=None))
        wait_until(lambda: allowed(server, 4), what="the rewritten bundle file deciding")
