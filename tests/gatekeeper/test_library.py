"""gatekeeper-library, unchanged, passes whole: every `src/` Rego suite and every gator suite.

The library is read where it lies (`../shared/upstream/gatekeeper-library`
beside the checkout, or $REGOKITE_UPSTREAM/gatekeeper-library), never copied:
the `src/` suites run as `regokite test --v0-compatible DIR` does, the gator
suites (`library/**/suite.yaml`) as `regokite verify` does. The whole library
takes a few seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from regokite import testing
from regokite.gatekeeper import verify

ROOT = Path(__file__).resolve().parents[2]


def upstream() -> Path | None:
    """gatekeeper-library beside the checkout (or a worktree's checkout), or where the environment says."""
    candidates = [Path(os.environ["REGOKITE_UPSTREAM"])] if os.environ.get("REGOKITE_UPSTREAM") else []
    candidates += [ROOT.parent / "shared" / "upstream", ROOT.parent.parent / "shared" / "upstream"]
    for candidate in candidates:
        if (candidate / "gatekeeper-library" / "src").is_dir():
            return candidate / "gatekeeper-library"
    return None


LIBRARY = upstream()
pytestmark = pytest.mark.skipif(
    LIBRARY is None and not os.environ.get("CI"), reason="gatekeeper-library is not beside this checkout"
)


def src_suites() -> list[Path]:
    assert LIBRARY is not None, "gatekeeper-library not found: set REGOKITE_UPSTREAM"
    return sorted(p.parent for p in (LIBRARY / "src").rglob("src.rego"))


def test_every_src_rego_suite_passes() -> None:
    suites = src_suites()
    failing = {}
    for suite in suites:
        results = testing.run_tests([str(suite)], v0_compatible=True)
        bad = [f"{r.ref}: {r.outcome.value} {r.error or ''}" for r in results if r.outcome.value in ("FAIL", "ERROR")]
        if bad or not results:
            failing[suite.relative_to(LIBRARY).as_posix()] = bad or ["no tests"]
    assert not failing, failing
    assert len(suites) == 49


def test_every_gator_suite_passes() -> None:
    assert LIBRARY is not None, "gatekeeper-library not found: set REGOKITE_UPSTREAM"
    suites = verify.find_suites([str(LIBRARY / "library")])
    results = [verify.run_suite(path) for path in suites]
    failed = [r for r in results if r.failed]
    assert not failed, verify.format_results(failed, verbose=False)
    assert len(suites) == 49
