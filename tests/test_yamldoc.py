"""YAML becomes JSON as OPA and kubectl read it: dates stay strings, keys are strings.

PyYAML's own safe loader makes `2025-01-01` a `date`, which no engine takes;
each place regokite reads YAML (bundle data, --var, definitions, plan's
parents, eval's input) must hand the engine the string as written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from regokite import yamldoc
from regokite.bundle import load_bundle
from regokite.controllers.watch.decisions import Watch, WatchResource, override_params
from regokite.engine.embedded import EmbeddedEngine

ROOT = Path(__file__).resolve().parent.parent


def test_timestamps_and_dates_stay_the_strings_they_were_written_as() -> None:
    doc = yamldoc.load("d: 2025-01-01\nt: 2024-01-01T00:00:00Z\nexplicit: !!timestamp 2020-01-01\nl: [2025-01-01]\n")
    assert doc == {"d": "2025-01-01", "t": "2024-01-01T00:00:00Z", "explicit": "2020-01-01", "l": ["2025-01-01"]}


def test_keys_become_strings_as_sigs_k8s_yaml_writes_them() -> None:
    assert yamldoc.load("1: a\ntrue: b\n~: c\n2.0: d\n") == {"1": "a", "true": "b", "null": "c", "2": "d"}


def test_everything_else_is_plain_yaml() -> None:
    doc = yamldoc.load("n: 1\nf: 1.5\nb: yes\ns: '2025-01-01'\nbase: &b {q: 1}\nm: {<<: *b, r: 2}\n")
    assert doc == {"n": 1, "f": 1.5, "b": True, "s": "2025-01-01", "base": {"q": 1}, "m": {"q": 1, "r": 2}}
    assert list(yamldoc.load_all("a: 1\n---\nb: 2020-02-02\n")) == [{"a": 1}, {"b": "2020-02-02"}]


def test_a_date_in_bundle_data_reaches_the_policy_as_a_string(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "data.yaml").write_text("when: 2025-01-01\n")
    (tmp_path / "p.rego").write_text("package p\n\nx := data.cfg.when\n")
    assert EmbeddedEngine(load_bundle([tmp_path])).evaluate("data.p.x") == "2025-01-01"


def test_a_date_in_a_watch_var_is_a_string() -> None:
    watch = Watch("w", WatchResource("v1", "configmaps"), "watches.w")
    (updated,) = override_params([watch], ["until=2025-01-01", "w/n=3"])
    assert updated.params == {"until": "2025-01-01", "n": 3}


def test_plan_takes_a_parent_with_unquoted_timestamps(tmp_path: Path) -> None:
    parent = tmp_path / "access.yaml"
    parent.write_text(
        "apiVersion: access.example.com/v1\nkind: TemporaryAccess\nmetadata: {name: t, namespace: default}\n"
        "spec: {user: ada, role: view, validFrom: 2024-01-01T00:00:00Z, validUntil: 2099-01-01T00:00:00Z}\n"
    )
    controllers = "policies/controllers/temporary_access/controller.yaml"
    argv = [sys.executable, "-m", "regokite.cli", "plan", "--controllers", controllers, "--policies", "policies"]
    done = subprocess.run([*argv, "--parent", str(parent)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "create RoleBinding default/t" in done.stdout
    assert "Traceback" not in done.stderr


def test_eval_reads_yaml_input_like_opa_eval(tmp_path: Path) -> None:
    (tmp_path / "input.yaml").write_text("when: 2025-01-01\n")
    argv = [
        sys.executable,
        "-m",
        "regokite.cli",
        "eval",
        "-d",
        str(tmp_path),
        "-i",
        str(tmp_path / "input.yaml"),
        "input.when",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"2025-01-01"' in done.stdout
