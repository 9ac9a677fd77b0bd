"""`regokite verify`: gator Suites, their output and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from regokite.gatekeeper.inventory import inventory
from regokite.gatekeeper.verify import counts, find_suites, format_results, run_suite

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parents[2]


def test_the_fixture_suites_pass_case_by_case() -> None:
    results = [run_suite(p) for p in find_suites([str(FIXTURES / "library")])]
    assert counts(results) == {
        "suites": 3,
        "suites_passed": 3,
        "tests": 3,
        "tests_passed": 3,
        "cases": 12,
        "cases_passed": 12,
    }


def test_a_wrong_assertion_fails_with_what_was_found(tmp_path: Path) -> None:
    base = FIXTURES / "library/requiredlabels"
    suite = (
        (base / "suite.yaml")
        .read_text()
        .replace("    - violations: no\n  - name: missing", "    - violations: 2\n  - name: missing")
    )
    for name in (
        "template.yaml",
        "constraint.yaml",
        "ns_allowed.yaml",
        "ns_missing.yaml",
        "ns_bad_value.yaml",
        "ns_excluded.yaml",
    ):
        (tmp_path / name).write_text((base / name).read_text())
    (tmp_path / "suite.yaml").write_text(suite)
    result = run_suite(tmp_path / "suite.yaml")
    text = format_results([result])
    assert "--- FAIL: ns-must-have-owner" in text and "    --- FAIL: allowed" in text
    assert "assertion 0: got 0 violations, want 2" in text
    assert text.splitlines()[-1] == "FAIL"


def test_run_selects_cases_by_regex() -> None:
    (result,) = [run_suite(p, run="bad-value") for p in find_suites([str(FIXTURES / "library/requiredlabels")])]
    assert [c.name for t in result.children for c in t.children] == ["bad-value"]


def test_inventory_layout() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    ing = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i", "namespace": "a"}}
    assert inventory([ns, ing]) == {
        "cluster": {"v1": {"Namespace": {"a": ns}}},
        "namespace": {"a": {"networking.k8s.io/v1": {"Ingress": {"i": ing}}}},
    }


def test_the_command_prints_gator_lines_and_exits_by_outcome(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run([sys.executable, "-m", "regokite.cli", "verify", str(FIXTURES / "library"), "-v"],
                        capture_output=True, text=True, env=env, cwd=ROOT)  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "--- PASS: duplicate-host" in ok.stdout and ok.stdout.rstrip().endswith("PASS")
    (tmp_path / "suite.yaml").write_text(
        "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\n"
        "tests:\n- name: t\n  template: missing.yaml\n  constraint: c.yaml\n"
    )
    bad = subprocess.run([sys.executable, "-m", "regokite.cli", "verify", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=ROOT)  # fmt: skip
    assert bad.returncode == 1 and "--- FAIL: t" in bad.stdout and "missing.yaml" in bad.stdout
