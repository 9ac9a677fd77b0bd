"""`regokite test` runs Rego tests and reports them the way `opa test` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regokite.cli import main

POLICY = """package demo

deny contains msg if {
	some c in input.containers
	not c.limits
	msg := sprintf("container %s has no limits", [c.name])
}

default allow := false

allow if count(deny) == 0
"""

TESTS = """package demo_test

import data.demo

test_container_without_limits_is_denied if {
	demo.deny == {"container a has no limits"} with input as {"containers": [{"name": "a"}]}
}

test_container_with_limits_is_allowed if {
	demo.allow with input as {"containers": [{"name": "a", "limits": {"cpu": 1}}]}
}

test_data_mocks_work if {
	data.settings.mode == "strict" with data.settings as {"mode": "strict"}
}

todo_think_about_init_containers if true
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "demo.rego").write_text(POLICY)
    (tmp_path / "demo_test.rego").write_text(TESTS)
    return tmp_path


def test_a_passing_suite_exits_zero_and_counts_skips(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "PASS: 3/4" in out
    assert "SKIPPED: 1/4" in out


def test_verbose_lists_every_test_by_file(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "-v", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "demo_test.rego:" in out
    assert "data.demo_test.test_container_with_limits_is_allowed: PASS" in out
    assert "data.demo_test.todo_think_about_init_containers: SKIPPED" in out


def test_a_broken_assertion_exits_one_and_names_test_and_file(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = TESTS.replace('{"container a has no limits"}', '{"something else"}')
    (suite / "demo_test.rego").write_text(broken)
    assert main(["test", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "data.demo_test.test_container_without_limits_is_denied: FAIL" in out
    assert "demo_test.rego:5" in out
    assert "FAIL: 1/4" in out


def run_with(suite: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, code: int) -> tuple[str, str]:
    """`regokite test` on the suite with file `name` (re)written; its exit code must be `code`; (stdout, stderr)."""
    (suite / name).write_text(text)
    assert main(["test", str(suite)]) == code
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_an_evaluation_error_is_reported_as_error_with_location(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (suite / "more_test.rego").write_text("package more_test\n\ntest_divides if {\n\t1 / 0\n}\n")
    assert main(["test", "--strict-builtin-errors", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "data.more_test.test_divides: ERROR" in out
    assert "more_test.rego:4" in out
    assert "divide by zero" in out


def test_arithmetic_errors_are_undefined_but_refusals_stay_errors_as_opa_test(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OPA's non-strict builtin errors: `1 / 0` is undefined; `1 / 3`, which the embedded engine cannot
    hold as OPA does, stays an error (undefined, it could pass a test OPA fails)."""
    text = "package more_test\n\ntest_divides if {\n\tnot 1 / 0\n}\n\ntest_thirds if {\n\t1 / 3 > 0\n}\n"
    out, _ = run_with(suite, capsys, "more_test.rego", text, 1)
    assert "data.more_test.test_divides: ERROR" not in out and "test_divides: FAIL" not in out
    assert "data.more_test.test_thirds: ERROR" in out
    assert "more_test.rego:8" in out and "more digits" in out


def test_run_selects_tests_by_regex(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "--run", "with_limits", str(suite)]) == 0
    assert "PASS: 1/1" in capsys.readouterr().out


def test_json_format_has_one_entry_per_test(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "--format", "json", str(suite)]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {e["name"] for e in entries} == {
        "test_container_without_limits_is_denied",
        "test_container_with_limits_is_allowed",
        "test_data_mocks_work",
        "todo_think_about_init_containers",
    }
    assert all(e["package"] == "data.demo_test" for e in entries)
    assert next(e for e in entries if e.get("skip"))["location"]["row"] == 17


def test_a_syntax_error_exits_two_with_file_line_column_and_no_traceback(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, err = run_with(suite, capsys, "demo.rego", "package demo\n\nallow if {\n\tinput.x ==\n}\n", 2)
    assert "demo.rego:5:1" in err
    assert "Traceback" not in err


def test_v0_modules_need_the_switch_and_the_error_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "old.rego").write_text('package old\n\ndeny[msg] { msg := "no" }\n')
    (tmp_path / "old_test.rego").write_text('package old_test\n\ntest_denies { data.old.deny["no"] }\n')
    assert main(["test", str(tmp_path)]) == 2
    assert "--v0-compatible" in capsys.readouterr().err
    assert main(["test", "--v0-compatible", str(tmp_path)]) == 0
    assert "PASS: 1/1" in capsys.readouterr().out


def test_v0_and_v1_modules_mix_in_one_bundle_through_its_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".manifest").write_text('{"revision": "r1", "file_rego_versions": {"old.rego": 0}}')
    (tmp_path / "old.rego").write_text('package old\n\ndeny[msg] { msg := "no" }\n')
    (tmp_path / "old_test.rego").write_text('package old_test\n\ntest_denies if data.old.deny["no"]\n')
    assert main(["test", str(tmp_path)]) == 0
    assert "PASS: 1/1" in capsys.readouterr().out
