"""The ledger of Gatekeeper's own test cases: which pass, which are listed (with why), which surprise.

Each case of Gatekeeper's material (../shared/upstream/gatekeeper, read where
it lies) has an id `<class>/<name>`. `listed.yaml` names the cases regokite
does not pass: `not_applicable` (never will: CEL / ValidatingAdmissionPolicy,
OCI `--image`) and `pending` (a feature being built, with its owner). A case
fails its test when it fails unlisted, or when it passes while listed (take
it off the list); the session's summary counts pass / listed / unexpected per
class (conftest.py).
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gatekeeper.upstream import upstream_dir

LISTED_FILE = Path(__file__).with_name("listed.yaml")
ALLOWED_REASONS = ("CEL / ValidatingAdmissionPolicy", "OCI --image")
TALLY: dict[str, Counter[str]] = defaultdict(Counter)


def gatekeeper() -> Path:
    """Gatekeeper's material; the test is skipped (with why) when the copy is absent."""
    found = upstream_dir()
    if found is None or not (found / "gatekeeper").is_dir():
        pytest.skip("no copy of Gatekeeper's material (set REGOKITE_UPSTREAM to the upstream/ directory)")
    return found / "gatekeeper"


def material(relative: str) -> Path | None:
    """A path of Gatekeeper's material, for listing cases at collection (None: no copy here)."""
    found = upstream_dir()
    return found / "gatekeeper" / relative if found is not None else None


def bats_names(relative: str) -> list[str]:
    """The @test names of a bats file of Gatekeeper's material (none without the copy)."""
    path = material(relative)
    if path is None or not path.is_file():
        return []
    return re.findall(r'^@test "(.*)"\s*\{', path.read_text(encoding="utf-8"), re.MULTILINE)


def listed() -> dict[str, dict[str, Any]]:
    """Every listed case id -> {"why": ..., "owner": ...} (owner: None for not_applicable)."""
    doc = yaml.safe_load(LISTED_FILE.read_text(encoding="utf-8")) or {}
    found = {case: {"why": why, "owner": None} for case, why in (doc.get("not_applicable") or {}).items()}
    for case, entry in (doc.get("pending") or {}).items():
        found[case] = {"why": entry["feature"], "owner": entry["owner"]}
    return found


def judge(case: str, run: Callable[[], str | None]) -> None:
    """Run one case (`run` answers why it failed, or None) and hold it to the ledger."""
    entry = listed().get(case)
    try:
        failure = run()
    except Exception as exc:  # a case that crashes regokite fails as any other
        failure = f"{type(exc).__name__}: {exc}"
    kind = case.split("/", 1)[0]
    if entry is None:
        TALLY[kind]["unexpected" if failure else "pass"] += 1
        assert failure is None, f"{case}: {failure}"
        return
    TALLY[kind]["listed" if failure else "unexpected"] += 1
    assert failure is not None, f"{case} passes now: take it off listed.yaml (was: {entry['why']})"


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def regokite(*args: str, stdin: str = "", cwd: Path | None = None) -> Ran:
    """`regokite ARGS` run in this process (as its command line does: main()), stdin given, output kept."""
    from regokite.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(cwd or Path.cwd()):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's refusals
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        sys.stdin = saved
    return Ran(code, out.getvalue(), err.getvalue())
