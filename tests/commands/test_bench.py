"""`regokite bench` (`opa bench`'s and `gator bench`'s roles) and `regokite test --bench`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regokite import benchmark
from regokite.cli import main
from tests.gatekeeper.template_text import template_yaml

POLICY = """package p

allow if input.user == "admin"

test_allow if allow with input as {"user": "admin"}

test_deny if not allow with input as {"user": "bob"}

test_fails if allow with input as {"user": "bob"}
"""

TEMPLATE = template_yaml(
    "K8sNoLatest",
    'package k8snolatest\n\nviolation contains {"msg": "latest"} if {\n'
    '\tsome c in input.review.object.spec.containers\n\tendswith(c.image, ":latest")\n}\n',
)

CONSTRAINT = """apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sNoLatest
metadata: {name: no-latest}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]
"""

PODS = """apiVersion: v1
kind: Pod
metadata: {name: a, namespace: default}
spec: {containers: [{name: a, image: "nginx:latest"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: default}
spec: {containers: [{name: b, image: "nginx:1.27"}]}
"""


def test_benchtime_reads_go_durations_and_counts() -> None:
    assert benchmark.parse_benchtime("1s") == (1.0, None)
    assert benchmark.parse_benchtime("250ms") == (0.25, None)
    assert benchmark.parse_benchtime("30x") == (None, 30)
    for bad in ("", "0x", "fast", "-1s"):
        with pytest.raises(ValueError, match="invalid benchtime"):
            benchmark.parse_benchtime(bad)


def test_measure_runs_the_operation_n_times_and_orders_the_percentiles() -> None:
    calls = []
    result = benchmark.measure("op", lambda: calls.append(1), runs=40, memory=False)
    assert len(calls) == 41  # one warm-up run
    assert result.n == 40 and result.python_peak_bytes is None
    assert 0 < result.p50_ns <= result.p90_ns <= result.p99_ns
    grown = benchmark.measure("grow", lambda: bytearray(200_000), runs=3)
    assert grown.python_peak_bytes is not None and grown.python_peak_bytes >= 200_000


def test_comparison_is_the_ratio_of_medians_by_name() -> None:
    now = [benchmark.BenchResult("q", 10, 2_000, 1, 1, 1, None), benchmark.BenchResult("new", 1, 1, 1, 1, 1, None)]
    saved = [{"name": "q", "ns_per_op": 100}, {"name": "q", "ns_per_op": 300}, {"name": "gone", "ns_per_op": 1}]
    assert benchmark.compare(now, saved) == [("q", 200.0, 200.0, 1.0)]


def test_bench_a_query_as_json_saved_and_compared(tmp_path: Path, capsys) -> None:
    (tmp_path / "p.rego").write_text(POLICY)
    (tmp_path / "input.json").write_text('{"user": "admin"}')
    saved = tmp_path / "base.json"
    args = ["bench", "-d", str(tmp_path / "p.rego"), "-i", str(tmp_path / "input.json"), "data.p.allow"]
    assert main([*args, "--benchtime", "20x", "--count", "2", "--format", "json", "--save", str(saved)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in printed] == ["data.p.allow", "data.p.allow"]
    assert all(r["n"] == 20 and r["ns_per_op"] > 0 and r["python_peak_bytes"] >= 0 for r in printed)
    assert json.loads(saved.read_text()) == printed
    assert main([*args, "--benchtime", "20x", "--baseline", str(saved), "--max-ratio", "1000"]) == 0
    out, err = capsys.readouterr()
    assert "| ns/op" in out and "data.p.allow" in err.splitlines()[1]
    slower = [{**r, "ns_per_op": 1} for r in printed]  # a baseline a thousand times faster than any run
    saved.write_text(json.dumps(slower))
    assert main([*args, "--benchtime", "20x", "--baseline", str(saved), "--max-ratio", "2"]) == 3


def test_a_query_that_does_not_evaluate_is_an_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "p.rego").write_text("package p\n\nx := 1\n")
    assert main(["bench", "-d", str(tmp_path), "--benchtime", "5x", "data.p.x = "]) == 2
    out, err = capsys.readouterr()  # refused once, before any measurement
    assert out == "" and "error: evaluating data.p.x = " in err


def test_bench_policies_on_manifests_as_gator_bench(tmp_path: Path, capsys) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "template.yaml").write_text(TEMPLATE)
    (policies / "constraint.yaml").write_text(CONSTRAINT)
    (tmp_path / "pods.yaml").write_text(PODS)
    code = main(["bench", "--policies", str(policies), "-f", str(tmp_path / "pods.yaml"), "--benchtime", "10x",
                 "--format", "json"])  # fmt: skip
    assert code == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["name"] == "1 policies on 2 objects (validate, per review)"
    assert result["n"] == 10


def test_test_bench_measures_each_passing_test(tmp_path: Path, capsys) -> None:
    (tmp_path / "p.rego").write_text(POLICY)
    assert main(["test", "--bench", "--benchtime", "10x", "--no-benchmem", str(tmp_path)]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines[:2]] == ["data.p.test_allow", "data.p.test_deny"]
    assert lines[0].split("\t")[1].strip() == "10" and lines[0].split("\t")[2].endswith(" ns/op")
    assert "data.p.test_fails: FAIL" in "\n".join(lines)
    assert lines[-2:] == ["PASS: 2/3", "FAIL: 1/3"]  # the counts over every test, as without --bench
    assert main(["test", "--bench", "--coverage", str(tmp_path)]) == 1
