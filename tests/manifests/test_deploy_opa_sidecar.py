"""The OPA-sidecar overlay, run as its pod would run it: regokite waits for OPA, pushes the policies, answers.

OPA itself is the REST stand-in (tests/opa_standin.py): no OPA binary installs
here. The pod's files are rebuilt from the rendered ConfigMap's `items`
(the same tree the kubelet would mount) and the container's args are used
verbatim, with only /etc/regokite, the port and the OPA address moved to
this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from opa_standin import OpaStandin

from regokite.ops.tls import self_signed
from tests.admission.reviews import deployment, review
from tests.manifests import kubectl
from tests.ports import free_port
from tests.processes import terminate

ROOT = Path(__file__).resolve().parents[2]


def pod_files(objects: list[dict], base: Path) -> tuple[dict, Path]:
    """Write what the pod's volumes would hold under `base`; return the regokite container and its CA."""
    dep = next(o for o in objects if o["kind"] == "Deployment")
    spec = dep["spec"]["template"]["spec"]
    container = spec["containers"][0]
    maps = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ConfigMap"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    ca = None
    for mount in container["volumeMounts"]:
        target = base / mount["mountPath"].lstrip("/")
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            data = maps[volume["configMap"]["name"]]["data"]
            for item in volume["configMap"]["items"]:
                path = target / item["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(data[item["key"]])
        elif "secret" in volume:  # the serving certificate (cert-manager or the user would make it)
            files = self_signed(base / "issuer", ["127.0.0.1", "localhost"])
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(files.cert, target / "tls.crt")
            shutil.copy(files.key, target / "tls.key")
            ca = files.ca
        else:
            target.mkdir(parents=True, exist_ok=True)
    assert ca is not None
    return container, ca


def localize(args: list[str], base: Path, port: int, opa_url: str) -> list[str]:
    out = []
    for a in args:
        a = a.replace("/etc/regokite/", f"{base}/etc/regokite/")
        out.append(a)
    out[out.index("--port") + 1] = str(port)
    out[out.index("--opa-url") + 1] = opa_url
    return [*out, "--host", "127.0.0.1"]


def test_regokite_waits_for_the_sidecar_pushes_the_policies_and_answers(tmp_path: Path) -> None:
    objects = kubectl.kustomize(ROOT / "deploy" / "overlays" / "admission-opa")
    container, ca = pod_files(objects, tmp_path)
    opa = next(c for c in objects if c["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][1]
    assert opa["name"] == "opa" and "--addr=127.0.0.1:8181" in opa["args"]
    assert "--v0-compatible" not in opa["args"]
    opa_port, port = free_port(), free_port()
    args = localize(container["args"], tmp_path, port, f"http://127.0.0.1:{opa_port}")
    log = tmp_path / "regokite.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path / "tmp"), "HOME": str(tmp_path / "tmp")}
    with log.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "regokite.cli", *args], stdout=sink, stderr=sink, env=env)
    try:
        time.sleep(1.5)  # the sidecar comes up after regokite: --opa-wait must bridge the gap
        assert proc.poll() is None, log.read_text()
        with OpaStandin(port=opa_port) as standin:
            client = httpx.Client(
                base_url=f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=ca), timeout=10
            )
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, log.read_text()
                try:
                    if client.get("/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            pushed = standin.policies
            assert any(p.endswith("required_labels/required_labels.rego") for p in pushed), sorted(pushed)
            assert any(p.endswith("kubernetes.rego") for p in pushed), sorted(pushed)
            assert not any(p.endswith("_test.rego") for p in pushed)
            assert client.get("/readyz").json()["engine"] == "opa"
            doc = review(deployment(replicas=1))
            answer = client.post("/validate", content=json.dumps(doc)).json()["response"]
            assert answer["uid"] == doc["request"]["uid"]
            assert answer["allowed"] is False  # required_labels: the bare Deployment has no owner label
            assert "admission.required_labels" in answer["status"]["message"]
            client.close()
    finally:
        terminate(proc)


@pytest.mark.parametrize("engine", ["opa"])
def test_without_the_sidecar_regokite_gives_up_with_a_clear_error(tmp_path: Path, engine: str) -> None:
    port = free_port()
    args = ["admission", "--policies", str(ROOT / "policies" / "lib"), "--self-signed", "--tls-dir", str(tmp_path)]
    args += ["--port", str(port), "--engine", engine, "--opa-url", f"http://127.0.0.1:{free_port()}", "--opa-wait", "1"]
    result = subprocess.run(
        [sys.executable, "-m", "regokite.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "did not answer /health within 1s" in result.stderr
