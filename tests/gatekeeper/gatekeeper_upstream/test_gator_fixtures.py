"""gator's own fixtures: `gator expand`'s (test/gator/expand) byte for byte, `gator verify`'s suite
(test/gator/verify/suite.yaml) case by case, each run by the regokite command that does gator's job.

An expand fixture's stdout must be its output/output.yaml exactly (gator prints the resources and a
newline); the one whose output.yaml is empty is held to its bats case's rule instead: exit 0 and the
file's text within the output. The bats file's `--outputfile` case writes the same text to a file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.gatekeeper.verify import run_suite
from tests.gatekeeper.gatekeeper_upstream.harness import gatekeeper, judge, material, regokite

ROOT = Path(__file__).resolve().parents[3]
EXPAND = "test/gator/expand/fixtures"
VERIFY_SUITE = "test/gator/verify/suite.yaml"


def expand_fixtures() -> list[str]:
    where = material(EXPAND)
    return sorted(p.name for p in where.iterdir()) if where is not None and where.is_dir() else []


@pytest.mark.parametrize("name", expand_fixtures())
def test_expand_fixture_byte_for_byte(name: str) -> None:
    fixture = gatekeeper() / EXPAND / name

    def run() -> str | None:
        done = regokite("expand", f"--filename={fixture / 'input'}", "--format=yaml")
        want = (fixture / "output" / "output.yaml").read_text(encoding="utf-8")
        if done.returncode != 0:
            return f"exit {done.returncode}: {done.stderr}"
        if not want.strip():  # an empty output.yaml: its bats case takes any output
            return None
        return None if done.stdout == want.rstrip("\n") + "\n\n" else f"stdout differs:\n{done.stdout}"

    judge(f"expand-fixtures/{name}", run)


def test_expand_into_a_file(tmp_path: Path) -> None:
    """bats: 'expand into 2 resultants and write to file' (--outputfile)."""
    fixture = gatekeeper() / EXPAND / "expand-cr"

    def run() -> str | None:
        out = tmp_path / "tmp.yaml"
        done = regokite("expand", f"--filename={fixture / 'input'}", "--format=yaml", f"--outputfile={out}")
        want = (fixture / "output" / "output.yaml").read_text(encoding="utf-8").rstrip("\n")
        if done.returncode != 0 or not out.is_file():
            return f"exit {done.returncode}: {done.stderr}"
        return None if want in out.read_text(encoding="utf-8") else f"wrote:\n{out.read_text()}"

    judge("expand-fixtures/expand into 2 resultants and write to file", run)


def verify_cases() -> list[str]:
    path = material(VERIFY_SUITE)
    if path is None or not path.is_file():
        return []
    import yaml

    suite = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [f"{t['name']}/{c['name']}" for t in suite["tests"] for c in t.get("cases") or []]


@pytest.fixture(scope="module")
def verified() -> dict[str, str | None]:
    """Every case of gator's suite: its error (None: it passed)."""
    result = run_suite(gatekeeper() / VERIFY_SUITE)
    found: dict[str, str | None] = {}
    for test in result.children:
        for case in test.children:
            found[f"{test.name}/{case.name}"] = test.error or case.error
    if result.error:
        return dict.fromkeys(verify_cases(), result.error)
    return found


@pytest.mark.parametrize("name", verify_cases())
def test_gator_verify_suite(name: str, verified: dict[str, str | None]) -> None:
    judge(f"verify-suite/{name}", lambda: verified.get(name, "not run"))
