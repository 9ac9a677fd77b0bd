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

todo_test_init_containers if true

todo_not_a_test if false
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "demo.rego").write_text(POLICY)
    (tmp_path / "demo_test.rego").write_text(TESTS)
    return tmp_path


def test_a_skipped_test_exits_two_unless_told_as_opa_test(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Skipped (`todo_test_`) tests make `opa test` exit 2 unless `-z`; `todo_` alone is no test."""
    assert main(["test", str(suite)]) == 2
    out = capsys.readouterr().out
    assert "PASS: 3/4" in out
    assert "SKIPPED: 1/4" in out
    assert "data.demo_test.todo_test_init_containers: SKIPPED\n" in out
    assert main(["test", "-z", str(suite)]) == 0


def test_verbose_lists_every_test_by_file(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "-v", "-z", str(suite)]) == 0
    out = capsys.readouterr().out
    assert "demo_test.rego:" in out
    assert "data.demo_test.test_container_with_limits_is_allowed: PASS" in out
    assert "data.demo_test.todo_test_init_containers: SKIPPED" in out


def test_a_broken_assertion_exits_two_and_names_test_and_file(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = TESTS.replace('{"container a has no limits"}', '{"something else"}')
    (suite / "demo_test.rego").write_text(broken)
    assert main(["test", "-z", str(suite)]) == 2
    out = capsys.readouterr().out
    assert f"{suite / 'demo_test.rego'}:\ndata.demo_test.test_container_without_limits_is_denied: FAIL (" in out
    assert "FAIL: 1/4" in out
    assert "FAILURES" not in out  # only with -v, as opa test


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
    assert main(["test", "--strict-builtin-errors", str(suite)]) == 2
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
    out, _ = run_with(suite, capsys, "more_test.rego", text, 2)
    assert "data.more_test.test_divides: ERROR" not in out and "test_divides: FAIL" not in out
    assert "data.more_test.test_thirds: ERROR" in out
    assert "more_test.rego:8" in out and "more digits" in out


def test_run_selects_tests_by_regex(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "--run", "with_limits", str(suite)]) == 0
    assert "PASS: 1/1" in capsys.readouterr().out
    assert main(["test", "-r", "^data\\.demo_test\\.test_c", str(suite)]) == 0  # the regex sees the full name
    assert "PASS: 2/2" in capsys.readouterr().out


def test_json_format_has_one_entry_per_test(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "--format", "json", "-z", str(suite)]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert {e["name"] for e in entries} == {
        "test_container_without_limits_is_denied",
        "test_container_with_limits_is_allowed",
        "test_data_mocks_work",
        "todo_test_init_containers",
    }
    assert all(e["package"] == "data.demo_test" for e in entries)
    assert next(e for e in entries if e.get("skip"))["location"]["row"] == 17


def test_a_syntax_error_exits_one_with_file_line_column_and_no_traceback(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, err = run_with(suite, capsys, "demo.rego", "package demo\n\nallow if {\n\tinput.x ==\n}\n", 1)
    assert "demo.rego:5:1" in err
    assert "Traceback" not in err


def test_v0_modules_need_the_switch_and_the_error_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "old.rego").write_text('package old\n\ndeny[msg] { msg := "no" }\n')
    (tmp_path / "old_test.rego").write_text('package old_test\n\ntest_denies { data.old.deny["no"] }\n')
    assert main(["test", str(tmp_path)]) == 1
    assert "--v0-compatible" in capsys.readouterr().err
    assert main(["test", "--v0-compatible", str(tmp_path)]) == 0
    assert "PASS: 1/1" in capsys.readouterr().out


def test_v0_and_v1_modules_mix_in_one_bundle_through_its_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".manifest").write_text('{"revision": "r1", "file_rego_versions": {"old.rego": 0}}')
    (tmp_path / "old.rego").write_text('package old\n\ndeny[msg] { msg := "no" }\n')
    (tmp_path / "old_test.rego").write_text('package old_test\n\ntest_denies if data.old.deny["no"]\n')
    assert main(["test", "--bundle", str(tmp_path)]) == 0
    assert "PASS: 1/1" in capsys.readouterr().out
    assert main(["test", str(tmp_path)]) == 1  # plain files: OPA reads no .manifest, so old.rego is v1


# ------------------------------------------------------------------ loading as `opa test DIR` (OPA's loader)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


FIXTURES = {
    "policy.rego": "package policy\n\nlimit := data.settings.limit\n",
    # any .json/.yaml/.yml is data at its directory's path; data.json at a root merges at data
    "data.json": '{"settings": {"limit": 3}}',
    "settings/extra.yaml": "mode: strict\n",
    "fixtures/pods/pod.yml": "kind: Pod\n---\nkind: Ignored\n",  # a YAML stream: its first document
    "checks.rego": """package checks

test_root_data if data.policy.limit == 3

test_a_directory_is_a_path if data.settings.mode == "strict"

test_first_document if data.fixtures.pods.kind == "Pod"
""",
}


def test_every_data_file_loads_at_its_directory_path_and_tests_run_in_every_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The code before loaded only data.json/data.yaml and ran tests of *_test.rego files only
    ("no tests found" here, exit 0, where OPA runs and passes three)."""
    write(tmp_path, FIXTURES)
    assert main(["test", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "PASS: 3/3"


def test_an_empty_data_file_below_a_root_is_null_and_conflicts_as_opa(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OPA's loader: an empty file's document is null, a value at its directory's path, so a second file
    there is a merge error; at a root, a document that is no object is refused."""
    write(tmp_path / "a", {"fixtures/empty.yaml": "", "t.rego": "package t\n\ntest_null if data.fixtures == null\n"})
    assert main(["test", str(tmp_path / "a")]) == 0
    write(tmp_path / "a", {"fixtures/other.json": '{"k": 1}'})
    assert main(["test", str(tmp_path / "a")]) == 1
    assert "other.json: merge error" in capsys.readouterr().err
    write(tmp_path / "b", {"list.json": "[1]"})
    assert main(["test", str(tmp_path / "b")]) == 1
    assert "list.json: document must be of type object" in capsys.readouterr().err


def test_two_files_writing_one_value_are_a_merge_error_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path,
        {"x/a.yaml": "k: 1\nshared: {a: 1}\n", "x/b.json": '{"k": 2, "shared": {"b": 2}}', "t.rego": "package t\n"},
    )
    assert main(["test", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "b.json: merge error: data.x.k is already written by" in err and "a.yaml" in err


def test_bundle_mode_loads_only_data_files_and_ignore_skips_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        tmp_path,
        {
            "x/data.json": '{"k": 1}',
            "x/notes.yaml": "k: 2\n",  # conflicts unless loaded as a bundle or ignored
            ".hidden/v.json": '{"seen": true}',  # OPA's loader loads hidden files too
            "t.rego": "package t\n\ntest_k if data.x.k == 1\n",
            "h.rego": 'package h\n\ntest_hidden if data[".hidden"].seen\n',
        },
    )
    assert main(["test", str(tmp_path)]) == 1
    assert "merge error" in capsys.readouterr().err
    assert main(["test", "--ignore", "notes.yaml", str(tmp_path)]) == 0
    assert "PASS: 2/2" in capsys.readouterr().out
    assert main(["test", "--ignore", "*.yaml,.*", str(tmp_path)]) == 2  # comma-separated, as OPA's flag
    assert "data.h.test_hidden: FAIL" in capsys.readouterr().out
    assert main(["test", "-b", str(tmp_path)]) == 2  # a bundle: notes.yaml and hidden files are no data
    assert "PASS: 1/2" in capsys.readouterr().out


def test_a_prefixed_path_loads_below_that_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"fix/v.json": '{"n": 1}', "t/t.rego": "package t\n\ntest_prefix if data.a.b.n == 1\n"})
    assert main(["test", str(tmp_path / "t"), f"a.b:{tmp_path / 'fix'}"]) == 0


# ------------------------------------------------------------------ running and reporting as `opa test`


def test_each_definition_of_a_test_is_its_own_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OPA runs a test defined twice as two (`test_x`, `test_x#01`); the code before evaluated the rule
    once, true when either body was, so a failing definition passed."""
    write(tmp_path, {"t.rego": "package t\n\ntest_x if false\n\ntest_x if true\n\ntest_x if 1 == 1\n"})
    assert main(["test", "-v", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "data.t.test_x: FAIL (" in out and "data.t.test_x#01: PASS (" in out and "data.t.test_x#02: PASS (" in out
    assert out.splitlines()[-2:] == ["PASS: 2/3", "FAIL: 1/3"]
    # a default is a definition too: OPA runs `default test_d := false` alone, and the body as test_d#01
    write(tmp_path, {"t.rego": "package t\n\ndefault test_d := false\n\ntest_d if true\n"})
    assert main(["test", "-v", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "data.t.test_d: FAIL (" in out and "data.t.test_d#01: PASS (" in out


def test_no_tests_print_nothing_unless_fail_on_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"p.rego": "package p\n\nallow := true\n"})
    assert main(["test", str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["test", "--fail-on-empty", str(tmp_path)]) == 1
    assert "no tests were run" in capsys.readouterr().err


def test_a_test_with_cases_errs_rather_than_pass_a_failing_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """OPA 1.x's test cases (`test_x[note] if ...`) fail a case whose body fails, seen in its trace; the
    value holds only the cases that passed, so the code before passed this test OPA fails."""
    text = """package t

test_cases[tc.note] if {
	some tc in [{"note": "one", "n": 1}, {"note": "two", "n": 2}]
	tc.n < 2
}
"""
    write(tmp_path, {"t.rego": text})
    assert main(["test", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert "data.t.test_cases: ERROR (" in out and "a test with cases (test_x[case]) is not run" in out


@pytest.mark.parametrize(
    ("ns", "text"),
    [(812, "812ns"), (1_500, "1.5µs"), (13_140, "13.14µs"), (2_000_301, "2.000301ms"), (1_200_000_000, "1.2s"),
     (61_000_000_000, "1m1s"), (1_000, "1µs")],
)  # fmt: skip
def test_durations_print_as_go_prints_them(ns: int, text: str) -> None:
    from regokite.testing import go_duration

    assert go_duration(ns) == text


@pytest.mark.parametrize(
    ("data", "path"),
    [('{"allow": true}', "p/allow"), ('{"sub": {"r": 1}}', "p/sub/r"), ('"text"', "p/allow")],
)
def test_a_rule_where_a_data_file_writes_is_refused_as_opa_compiles_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: str, path: str
) -> None:
    """OPA: "conflicting rule for data path p/allow found" (also below a value that is no object); the code
    before read the data file's value there, and the test passed."""
    rules = "package p\n\nallow := false\n\nsub.r := 2\n\ntest_a if data.p.allow == true\n"
    write(tmp_path, {"p.rego": rules, "p/v.json": data})
    assert main(["test", str(tmp_path)]) == 1
    assert f"conflicting rule for data path {path} found" in capsys.readouterr().err


def test_what_a_test_prints_shows_below_it_as_opa_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OPA prints a failing (or, with -v, any) test's print() output indented below it; the code before logged
    it as a log line apart from the test."""
    text = 'package t\n\ntest_p if {\n\tprint("seen", 1)\n\tfalse\n}\n\ntest_q if print("hidden")\n'
    write(tmp_path, {"t.rego": text})
    assert main(["test", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "data.t.test_p: FAIL (" in captured.out and "\n\n  seen 1\n\n" in captured.out
    assert "hidden" not in captured.out + captured.err


def test_a_test_that_meets_a_builtin_error_prints_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The evaluation that met the error is run again with the call undefined; what the first run printed
    goes with it, as OPA, which evaluates (and prints) once."""
    text = 'package t\n\ntest_p if {\n\tprint("before")\n\tnot regex.match("[", "a")\n\tfalse\n}\n'
    write(tmp_path, {"t.rego": text})
    assert main(["test", str(tmp_path)]) == 2
    out = capsys.readouterr().out
    assert out.count("before") == 1, out
