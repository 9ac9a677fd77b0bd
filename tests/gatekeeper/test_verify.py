"""`regokite verify`: gator Suites, their output and exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "unexpected number of violations: got 0 violations but want exactly 2: got messages []" in text
    assert text.splitlines()[-1] == "FAIL"


def test_run_selects_cases_by_regex() -> None:
    (result,) = [run_suite(p, run="bad-value") for p in find_suites([str(FIXTURES / "library/requiredlabels")])]
    assert [c.name for t in result.children for c in t.children if not c.skipped] == ["bad-value"]


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


def suite_dir(tmp_path: Path, suite: str, name: str = "suite.yaml") -> Path:
    """The requiredlabels fixture's files beside a suite of the test's own."""
    tmp_path.mkdir(exist_ok=True)
    for f in (FIXTURES / "library/requiredlabels").glob("*.yaml"):
        if f.name != "suite.yaml":
            (tmp_path / f.name).write_text(f.read_text())
    (tmp_path / name).write_text(suite)
    return tmp_path / name


HEAD = "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\n"
TEST = "- name: t\n  template: template.yaml\n  constraint: constraint.yaml\n"


def case_error(path: Path) -> str | None:
    (test,) = run_suite(path).children
    assert test.error is None, test.error
    (case,) = test.children
    return case.error


def test_gator_verify_parity_in_suites(tmp_path: Path) -> None:
    """As gator's verify runner: each of these was ignored or crashed before."""
    skipped = run_suite(suite_dir(tmp_path, HEAD + "skip: true\ntests:\n" + TEST + "  cases: []\n"))
    assert skipped.skipped and not skipped.children and "ok\t" in format_results([skipped])

    no_assertions = suite_dir(
        tmp_path, HEAD + "tests:\n" + TEST + "  cases:\n  - name: c\n    object: ns_allowed.yaml\n"
    )
    assert case_error(no_assertions) == "invalid Case: assertions must be non-empty"

    bad_regex = HEAD + "tests:\n" + TEST + "  cases:\n  - name: c\n    object: ns_missing.yaml\n"
    bad_regex += "    assertions:\n    - message: '([a-z'\n"
    error = case_error(suite_dir(tmp_path, bad_regex))
    assert error is not None and error.startswith("message contains invalid regular expression: ")

    invalid = run_suite(suite_dir(tmp_path, HEAD + "tests:\n" + TEST + "  invalid: true\n"))
    (test,) = invalid.children
    assert test.error is not None and test.error.startswith("constraint should have failed schema validation")


def test_gator_verify_parity_in_finding_suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quoted = suite_dir(tmp_path / "a", 'kind: "Suite"\napiVersion: "test.gatekeeper.sh/v1alpha1"\ntests: []\n')
    as_json = tmp_path / "b" / "suite.yaml"
    as_json.parent.mkdir()
    as_json.write_text('{"kind": "Suite", "apiVersion": "test.gatekeeper.sh/v1alpha1", "tests": []}')
    other = tmp_path / "c" / "suite.yaml"
    other.parent.mkdir()
    other.write_text("kind: Suite\napiVersion: example.com/v1\n")  # another group's Suite: not gator's
    monkeypatch.chdir(tmp_path)
    assert find_suites(["./..."]) == [Path("a/suite.yaml"), Path("b/suite.yaml")]
    assert find_suites([str(tmp_path) + "/..."]) == [quoted, as_json]


def test_run_filters_as_gator_with_test_and_case_parts(tmp_path: Path) -> None:
    (result,) = [
        run_suite(p, run="^ns-must//^missing$") for p in find_suites([str(FIXTURES / "library/requiredlabels")])
    ]
    ran = [(t.name, c.name) for t in result.children for c in t.children if not c.skipped]
    assert ran == [("ns-must-have-owner", "missing")]
