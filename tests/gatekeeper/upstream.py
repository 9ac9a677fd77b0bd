"""Where the unchanged upstream material is: $REGOKITE_UPSTREAM, or `shared/upstream` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def upstream_dir() -> Path | None:
    if "REGOKITE_UPSTREAM" in os.environ:
        return Path(os.environ["REGOKITE_UPSTREAM"])
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "upstream").is_dir():
            return parent / "shared" / "upstream"
    return None


def gatekeeper_library() -> Path:
    """gatekeeper-library's root; the test is skipped (with why) when the copy is absent."""
    found = upstream_dir()
    if found is None or not (found / "gatekeeper-library").is_dir():
        pytest.skip("no copy of gatekeeper-library (set REGOKITE_UPSTREAM to the upstream/ directory)")
    return found / "gatekeeper-library"
