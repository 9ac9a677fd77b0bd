"""`regokite eval` answers queries like `opa eval`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from regokite.cli import main


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """Policies in a directory of their own: `-d DIR` loads every data file below it (the input files
    the tests write beside it are not)."""
    root = tmp_path / "policies"
    (root / "cfg").mkdir(parents=True)
    (root / "p.rego").write_text("package p\n\nnames contains c.name if some c in input.containers\n")
    (root / "cfg" / "data.yaml").write_text("limit: 3\n")
    return root


def test_eval_with_input_file_prints_opa_shaped_json(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.json").write_text('{"containers": [{"name": "b"}, {"name": "a"}]}')
    assert main(["eval", "-d", str(bundle), "-i", str(tmp_path / "in.json"), "data.p.names"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["result"][0]["expressions"][0]["value"] == ["a", "b"]


def test_eval_reads_input_from_stdin_and_prints_pretty(
    bundle: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"containers": [{"name": "x"}]}'))
    assert main(["eval", "-d", str(bundle), "-i", "-", "--format", "pretty", "data.p.names"]) == 0
    assert json.loads(capsys.readouterr().out) == ["x"]


def test_eval_of_data_documents(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "-d", str(bundle), "data.cfg.limit + 1"]) == 0
    assert json.loads(capsys.readouterr().out)["result"][0]["expressions"][0]["value"] == 4


def test_undefined_prints_empty_object_and_fail_exits_one(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "-d", str(bundle), "data.p.nothing"]) == 0
    assert json.loads(capsys.readouterr().out) == {}
    assert main(["eval", "--fail", "-d", str(bundle), "data.p.nothing"]) == 1


def test_invalid_input_json_is_a_clear_error(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in.json").write_text('{"a": }')
    assert main(["eval", "-d", str(bundle), "-i", str(tmp_path / "in.json"), "input"]) == 2
    assert "in.json:1:7: invalid JSON input" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('{"containers": [{"name": "\\ud800"}]}', "input.containers[0].name: string holds a lone surrogate U+D800"),
        ('{"n": 18446744073709551621}', "input.n: integer 18446744073709551621 is outside [-2^63, 2^63-1]"),
        ('{"n": NaN}', "input.n: nan is not a JSON number"),
    ],
)
def test_input_no_engine_may_take_is_a_clear_error(
    bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, complaint: str
) -> None:
    (tmp_path / "in.json").write_text(text)
    assert main(["eval", "-d", str(bundle), "-i", str(tmp_path / "in.json"), "data.p.names"]) == 2
    assert complaint in capsys.readouterr().err


def test_d_loads_every_data_file_and_b_only_a_bundles_as_opa_eval(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`opa eval -d DIR` loads every .json/.yaml below DIR at its directory's path, `-b DIR` only data.json /
    data.yaml (the code before loaded `-d` as a bundle: `data.cfg.extra` was undefined)."""
    (bundle / "cfg" / "extra.json").write_text('{"extra": 1}')
    assert main(["eval", "-d", str(bundle), "data.cfg"]) == 0
    assert json.loads(capsys.readouterr().out)["result"][0]["expressions"][0]["value"] == {"limit": 3, "extra": 1}
    assert main(["eval", "-b", str(bundle), "data.cfg"]) == 0
    assert json.loads(capsys.readouterr().out)["result"][0]["expressions"][0]["value"] == {"limit": 3}


def test_version_and_help_list_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "regokite 0.1.0" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "test" in out and "eval" in out


MIXED = """package mixed

ratios contains r if {
	some d in input.divisors
	r := 12 / d
}

valid := regex.match(input.pattern, "a")
"""


def test_eval_makes_a_builtin_error_undefined_as_opa_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`opa eval` without --strict-builtin-errors: the erring call is undefined and the rest answers (OPA's
    oracle decides); its stdout is OPA's, and stderr names the call's place. Failed on the code before
    (exit 2, an error)."""
    from opa_oracle import OracleEngine

    from regokite.bundle import Bundle, Module

    (tmp_path / "p.rego").write_text(MIXED)
    (tmp_path / "in.json").write_text('{"divisors": [4, 0, 3], "pattern": "["}')
    oracle = OracleEngine(Bundle((Module("p.rego", MIXED),)), strict_builtin_errors=False)
    wanted = oracle.evaluate("data.mixed", {"divisors": [4, 0, 3], "pattern": "["})
    assert wanted == {"ratios": [3, 4]}
    assert main(["eval", "-d", str(tmp_path), "-i", str(tmp_path / "in.json"), "--format", "pretty", "data.mixed"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == wanted
    assert "p.rego:5:" in err and "p.rego:8:" in err and "divide by zero" in err and "error parsing regexp" in err
    argv = ["eval", "--strict-builtin-errors", "-d", str(tmp_path), "-i", str(tmp_path / "in.json"), "data.mixed"]
    assert main(argv) == 2
    assert "divide by zero" in capsys.readouterr().err
