"""The Dockerfile builds, and the built image's entrypoint runs (`scripts/image smoke`, see its docstring).

Slow the first time on a machine (a Debian base with mmdebstrap, then the
build: minutes); cached after that. `-m "not image"` leaves it out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.image
def test_the_image_builds_and_its_entrypoint_runs_as_user_10001_on_a_read_only_root() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "image"), "smoke"],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-8000:]
    for step in (
        "regokite --version: regokite ",
        "PASS: ",
        "HTTPS review answered",
        "stopped cleanly",
        "smoke test passed",
    ):
        assert step in result.stderr, result.stderr[-8000:]
