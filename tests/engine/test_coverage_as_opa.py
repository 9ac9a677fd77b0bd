"""`regokite test --coverage` beside OPA's own coverage report (tests/opa_oracle.py: OPA 1.20.2's cover
tracer through `eval_query(..., coverage=True)`, one evaluation per test, rows merged as `opa test`
merges them): per file, the rows covered and the rows not covered must be OPA's.

The shapes are where the engine's rewrites move or add code (sprintf, template strings, `with`,
`x = coll[x]`), where regorus's own report says nothing (rule heads, else heads, defaults) and what
spans rows (comprehensions, multi-line values and calls). INDEX_SHAPES are the bodies OPA's rule index
does or does not let its evaluator enter (regokite/engine/rule_index.py), one of each kind of expression
it reads, and a default used in one of two lookups of its rule within one evaluation.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opa_bindings import OpaEngine

from regokite import testing
from regokite.engine import EngineSettings
from regokite.engine.coverage import CoverageLog, covered_rows
from regokite.errors import PolicyLoadError

ROOT = Path(__file__).resolve().parents[2]

SHAPES = {
    "else_chains.rego": """package shapes.elses

level(x) := "high" if {
	x > 10
} else := "mid" if {
	x > 5
} else := "low"

size(x) := s if {
	s := "big"
	x > 100
} else := "small"
""",
    "else_chains_test.rego": """package shapes.elses

test_level if {
	level(11) == "high"
	level(6) == "mid"
}

test_size if size(1) == "small"
""",
    "functions.rego": """package shapes.functions

double(x) := 2 * x

pick(x) := y if {
	some y in x
	y > 1
}

never(x) := x + 1

small(x) if x < 3
""",
    "functions_test.rego": """package shapes.functions

test_double if double(2) == 4

test_pick if pick([1, 2]) == 2

test_small if not small(5)
""",
    "comprehensions.rego": """package shapes.comprehensions

import rego.v1

xs := [1, 2, 3, 4]

evens := {x |
	some x in xs
	x % 2 == 0
}

pairs := {k: v |
	some k, v in {"a": 1, "b": 2}
	v > 1
}

squares := [y |
	some x in xs
	y := x * x
]

unused_set := {x | some x in xs}

all_positive if {
	every x in xs {
		x > 0
	}
}
""",
    "comprehensions_test.rego": """package shapes.comprehensions

test_evens if evens == {2, 4}

test_pairs if pairs == {"b": 2}

test_squares if count(squares) == 4

test_all if all_positive
""",
    "multiline.rego": """package shapes.multiline

default allow := false

default used := "d"

used := "x" if count(config.b) > 5

allow if {
	input.user == "admin"
	input.action in {
		"read",
		"write",
	}
}

config := {
	"a": 1,
	"b": [
		2,
		3,
	],
}

greeting := "hello"

message := concat(", ", [
	"a",
	"b",
])

deny contains msg if {
	input.kind == "Pod"
	msg := "no pods"
}
""",
    "multiline_test.rego": """package shapes.multiline

test_allow if allow with input as {"user": "admin", "action": "read"}

test_not_allow if not allow with input as {"user": "bob", "action": "read"}

test_used_default if used == "d"

test_config if config.a == 1

test_message if message == "a, b"
""",
    "rewritten.rego": """package shapes.rewritten

name := sprintf("%s-%d", [input.name, input.n])

long := sprintf("%v/%v", [
	input.a,
	input.b,
])

label := $"app-{input.name}"

first := x if {
	x := input.items[0]
	x = {"a": 1}[x]
}

mocked if {
	time.now_ns() > 0
}

never_called := sprintf("%v", [input.never])
""",
    "rewritten_test.rego": """package shapes.rewritten

test_name if name == "a-1" with input as {"name": "a", "n": 1}

test_long if long == "1/2" with input as {"a": 1, "b": 2}

test_label if label == "app-x" with input as {"name": "x"}

test_mocked if mocked with time.now_ns as 5
""",
}


INDEX_SHAPES = {
    "index.rego": """package shapes.index

import input.params

compared if {
	input.x == "v"
	true
}

undefined_operand if {
	is_object(input.y)
	true
}

negated if {
	not is_string(input.z)
	true
}

not_equal if {
	input.w != "v"
	true
}

globbed if {
	glob.match("a.*", ["."], input.host)
	true
}

f(x) := 1 if {
	x == "a"
	true
}

chain := 1 if {
	input.k == "one"
	true
} else := 2 if {
	input.k == "two"
	true
} else := 3

naked if {
	input.flag
	true
}

iterated if {
	some item in input.items
	item
}

assigned if {
	v := input.a
	v
}

imported if {
	is_object(params.limits)
	true
}

shadowed(params) if {
	is_object(params.limits)
	true
}

with_in_body if {
	input.q == "v" with input.other as 1
	true
}

printed if {
	input.pq == "v"
	print("printed")
}

pair if {
	input.pair == ["a", 1]
	true
}

bracket if {
	input.m[input.key]
	true
}

last_wins if {
	input.lw == "a"
	is_string(input.lw)
}

base_data if {
	data.cfg.mode == "lax"
	true
}

r := "y"

rule_value if {
	r == "x"
	true
}

number if {
	input.n == 1
	true
}

in_array if {
	count([input.list, 1]) == 2
	true
}

in_object if {
	o := {"a": input.oa}
	o.a
}

arithmetic if {
	input.ar + 1 > 2
	true
}

member if {
	"x" in input.mem
	true
}

default replicas := 1

replicas := input.r if is_number(input.r)

early_exit if {
	some x in input.xs
	x == 1
}

early_exit if {
	some y in input.ys
	y == 2
}

early_indexed if input.ea

early_indexed if {
	input.ea
	input.eb
}

computed := {k: 1 | some k in ["b"]}

head_ref := input.hr if {
	is_string(input.s)
}

head_rule_value := computed.c if {
	is_string(input.s)
}

h(v) := 1 if v == 2

head_call := h(input.hc)

else_value := 1 if {
	input.s == "other"
} else := input.ev

default g(_) := "none"

g(x) := "big" if x > 10
""",
    "index_test.rego": """package shapes.index

test_compared if not compared with input as {"x": "u"}

test_undefined_operand if not undefined_operand with input as {}

test_negated if not negated with input as {}

test_not_equal if not not_equal with input as {}

test_globbed if not globbed with input as {"host": "b.c"}

test_f if not f("b")

test_chain if chain == 2 with input as {"k": "two"}

test_naked if not naked with input as {}

test_iterated if not iterated with input as {}

test_assigned if not assigned with input as {}

test_imported if not imported with input as {"params": {}}

test_shadowed if shadowed({"limits": {}}) with input as {}

test_with_in_body if not with_in_body with input as {"q": "w"}

test_printed if not printed with input as {"pq": "w"}

test_pair if not pair with input as {"pair": ["b", 1]}

test_bracket if not bracket with input as {"m": {}}

test_last_wins if not last_wins with input as {"lw": "b"}

test_base_data if not base_data

test_rule_value if not rule_value

test_number if number with input as {"n": 1.0}

test_in_array if not in_array with input as {}

test_in_object if not in_object with input as {}

test_arithmetic if not arithmetic with input as {}

test_member if not member with input as {}

test_early_exit if early_exit with input as {"xs": [1], "ys": [2]}

test_early_indexed if early_indexed with input as {"ea": true, "eb": true}

test_head_ref if not head_ref with input as {"s": "x"}

test_head_rule_value if not head_rule_value with input as {"s": "x"}

test_head_call if not head_call with input as {"hc": 3}

test_else_value if not else_value with input as {"s": "x"}

test_defaults_per_lookup if {
	replicas == 1 with input as {}
	replicas == 3 with input as {"r": 3}
	g(1) == "none"
	g(11) == "big"
}
""",
}


def opa_rows(bundle_modules, data, cases) -> dict[str, tuple[set[int], set[int]]]:
    """OPA's rows per file over every test: one query evaluating them all (the tracer's report is the union
    over what was evaluated, as over an `opa test` run), each in a comprehension (the library reports no
    coverage for an undefined query; a failing test is undefined)."""
    opa = OpaEngine()
    try:
        for module in bundle_modules:
            opa.add_policy(module.path, module.text)
        if data:
            opa.add_data(data)
        tests = [f"{{v | v := data.{c.package}.{c.rule}}}" for c in cases if not c.name.startswith(testing.SKIP_PREFIX)]
        opa.eval_query(f"x := [{', '.join(tests)}]", coverage=True)
        rows = covered_rows(opa.last_coverage)
    finally:
        opa.close()
    return rows


def both(paths: list[str], *, as_bundle: bool = False):
    log = CoverageLog()
    results = testing.run_tests(paths, coverage=log, as_bundle=as_bundle)
    loaded = EngineSettings().load(paths, as_bundle=as_bundle)
    bundle, cases = testing.discover(testing.with_gatekeeper_rego(loaded, paths))
    return results, covered_rows(log.report()), opa_rows(bundle.modules, bundle.data, cases)


def differences(mine, opa) -> list[str]:
    found = []
    for file in sorted(set(mine) | set(opa)):
        (ours_covered, ours_missed), (opa_covered, opa_missed) = mine.get(file, (set(), set())), opa[file]
        for what, ours, theirs in (("covered", ours_covered, opa_covered), ("not covered", ours_missed, opa_missed)):
            if ours != theirs:
                found.append(f"{file} {what}: ours only {sorted(ours - theirs)}, OPA only {sorted(theirs - ours)}")
    return found


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def test_shapes_cover_the_rows_opa_covers(tmp_path):
    for name, text in SHAPES.items():
        (tmp_path / name).write_text(text)
    results, mine, opa = both([str(tmp_path)])
    assert all(r.outcome is testing.Outcome.PASS for r in results), results
    assert set(opa) == {str(tmp_path / name) for name in SHAPES}
    assert differences(mine, opa) == []


def test_rule_index_shapes_cover_the_rows_opa_covers(tmp_path):
    for name, text in INDEX_SHAPES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "data.json").write_text(json.dumps({"cfg": {"mode": "strict"}}))
    results, mine, opa = both([str(tmp_path)])
    assert all(r.outcome is testing.Outcome.PASS for r in results), results
    assert set(opa) == {str(tmp_path / name) for name in INDEX_SHAPES}
    assert differences(mine, opa) == []


def test_policies_cover_the_rows_opa_covers(in_root):
    paths = ["policies"]  # relative, as a user runs it: the report names the files so
    results, mine, opa = both(paths, as_bundle=True)
    assert results and all(r.outcome is testing.Outcome.PASS for r in results)
    assert set(mine) == set(opa)
    assert differences(mine, opa) == []


def test_threshold_100_fails_on_an_uncovered_line(tmp_path):
    (tmp_path / "p.rego").write_text("package p\n\nallow if input.x == 1\n\nunused if input.y == 2\n")
    (tmp_path / "p_test.rego").write_text('package p\n\ntest_allow if allow with input as {"x": 1}\n')
    command = [sys.executable, "-m", "regokite", "test", "--coverage", str(tmp_path)]
    passing = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    report = json.loads(passing.stdout)
    assert passing.returncode == 0, passing.stderr
    assert report["files"][str(tmp_path / "p.rego")]["not_covered"] == [{"start": {"row": 5}, "end": {"row": 5}}]
    failing = subprocess.run([*command, "--threshold", "100"], capture_output=True, text=True, cwd=ROOT)
    assert failing.returncode == 2
    assert "Code coverage threshold not met: got 66.67 instead of 100.00" in failing.stderr
    assert f"\t{tmp_path / 'p.rego'}:5" in failing.stderr
    assert subprocess.run([*command, "--threshold", "66.6"], capture_output=True, cwd=ROOT).returncode == 0


def test_coverage_needs_the_embedded_engine(tmp_path):
    (tmp_path / "p_test.rego").write_text("package p\n\ntest_a if true\n")
    with pytest.raises(PolicyLoadError, match="the opa engine reports no coverage: use the embedded engine"):
        testing.run_tests([str(tmp_path)], engine=EngineSettings(kind="opa"), coverage=CoverageLog())


V0 = """package p

default allow = false

x = 1

allow {
	input.user == "admin"
}

f(a) = "big" {
	a > 10
} else = "small"

g(a) = "big" {
	a > 10
} else = "mid" {
	a > 5
} else = "small"

test_allow {
	allow with input as {"user": "admin"}
	x == 1
	f(1) == "small"
	g(6) == "mid"
}
"""

V1_TWIN = """package p

default allow := false

x := 1

allow if {
	input.user == "admin"
}

f(a) := "big" if {
	a > 10
} else := "small"

g(a) := "big" if {
	a > 10
} else := "mid" if {
	a > 5
} else := "small"

test_allow if {
	allow with input as {"user": "admin"}
	x == 1
	f(1) == "small"
	g(6) == "mid"
}
"""


def test_a_v0_module_covers_the_rows_of_its_v1_twin(tmp_path):
    """v0 has no `if`: a rule without a body gets `{ call }`, and an else's body opens after its value
    (regorus's span of it starts at `else`). OPA's library reads v1 only: the twin, row for row, is what
    it reports on."""
    (tmp_path / "v0").mkdir()
    (tmp_path / "v1").mkdir()
    (tmp_path / "v0" / "p.rego").write_text(V0)
    (tmp_path / "v1" / "p.rego").write_text(V1_TWIN)
    log = CoverageLog()
    results = testing.run_tests([str(tmp_path / "v0")], engine=EngineSettings(v0_compatible=True), coverage=log)
    assert [r.outcome for r in results] == [testing.Outcome.PASS]
    _, _, opa = both([str(tmp_path / "v1")])
    ((_, theirs),) = opa.items()
    ((_, ours),) = covered_rows(log.report()).items()
    assert ours == theirs
