"""gatekeeper-library, unchanged, passes whole: every `src/` Rego suite and every gator suite.

The library is read where it lies (tests/gatekeeper/upstream.py), never copied:
the `src/` suites run as `regokite test --v0-compatible DIR` does, the gator
suites (`library/**/suite.yaml`) as `regokite verify` does. The whole library
takes a few seconds.
"""

from __future__ import annotations

from pathlib import Path

from regokite import testing
from regokite.engine import EngineSettings
from regokite.gatekeeper import verify
from tests.gatekeeper.upstream import gatekeeper_library


def src_suites(library: Path) -> list[Path]:
    return sorted(p.parent for p in (library / "src").rglob("src.rego"))


def test_every_src_rego_suite_passes() -> None:
    library = gatekeeper_library()
    suites = src_suites(library)
    failing = {}
    for suite in suites:
        results = testing.run_tests([str(suite)], engine=EngineSettings(v0_compatible=True))
        bad = [f"{r.ref}: {r.outcome.value} {r.error or ''}" for r in results if r.outcome.value in ("FAIL", "ERROR")]
        if bad or not results:
            failing[suite.relative_to(library).as_posix()] = bad or ["no tests"]
    assert not failing, failing
    assert len(suites) == 49


def test_every_gator_suite_passes() -> None:
    suites = verify.find_suites([str(gatekeeper_library() / "library")])
    results = [verify.run_suite(path) for path in suites]
    failed = [r for r in results if r.failed]
    assert not failed, verify.format_results(failed, verbose=False)
    assert len(suites) == 49
