"""Per class of Gatekeeper's cases: pass / listed / unexpected, at the end of the session."""

from __future__ import annotations

from typing import Any

from tests.gatekeeper.gatekeeper_upstream.harness import TALLY


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not TALLY:
        return
    terminalreporter.section("Gatekeeper's own cases")
    for kind, counts in sorted(TALLY.items()):
        terminalreporter.write_line(
            f"{kind}: {counts['pass']} pass / {counts['listed']} listed / {counts['unexpected']} unexpected"
        )
