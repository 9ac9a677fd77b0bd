"""Both engines give the same decisions on the same bundle and inputs.

Every test here runs twice through the `make_engine` fixture: once against the
embedded engine and once against a sidecar OPA (the REST stand-in), and checks
the answer against one expected value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from regokite import input_guard
from regokite.bundle import Bundle, Module, load_bundle
from regokite.engine import UNDEFINED, builtin_errors
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import EvaluationError, Location, PolicyLoadError
from regokite.input_guard import MAX_DEPTH, InputRejected

DECISIONS = """\
package test.decisions

import rego.v1

default allow := false

allow if input.user == "admin"

deny contains msg if {
	some c in input.containers
	not startswith(c.image, "registry.example/")
	msg := sprintf("image %s is not from registry.example", [c.image])
}

violations contains {"container": c.name, "reason": "privileged"} if {
	some c in input.containers
	c.privileged
}

labels[k] := v if {
	some k, v in input.labels
	startswith(k, "app")
}

nothing contains c if {
	some c in input.containers
	c.name == "no such container"
}

maybe := 1 if input.never

explicit_null := null

flags := {"yes": true, "no": false}

containers := count(input.containers)

inp := input

input_is_null if input == null
"""

SMALL = """\
package test.small

import rego.v1

a := 1

b contains "x"

f(x) := x + 1
"""

ERRORS = """\
package test.errors

import rego.v1

ratio := input.n / input.d

mode := "strict" if input.x

mode := "lenient" if input.x
"""

REVIEW = {
    "user": "dev",
    "containers": [
        {"name": "web", "image": "registry.example/web:1"},
        {"name": "sidecar", "image": "docker.io/envoy:1", "privileged": True},
        {"name": "debug", "image": "quay.io/busybox", "privileged": True},
    ],
    "labels": {"app": "shop", "app.kubernetes.io/part-of": "store", "team": "a"},
}


def bundle_of(*modules: tuple[str, str], data: dict | None = None) -> Bundle:
    return Bundle(tuple(Module(path, text) for path, text in modules), data or {})


@pytest.fixture
def decisions(make_engine):
    return make_engine(bundle_of(("policies/decisions.rego", DECISIONS), ("policies/small.rego", SMALL)))


# ---------------------------------------------------------------------- values


def test_complete_rule_with_a_default_is_defined_for_every_input(decisions):
    assert decisions.evaluate("data.test.decisions.allow", REVIEW) is False
    assert decisions.evaluate("data.test.decisions.allow", {**REVIEW, "user": "admin"}) is True


def test_partial_set_of_strings_comes_back_as_a_sorted_list(decisions):
    assert decisions.evaluate("data.test.decisions.deny", REVIEW) == [
        "image docker.io/envoy:1 is not from registry.example",
        "image quay.io/busybox is not from registry.example",
    ]


def test_partial_set_of_objects_comes_back_as_a_list_of_objects(decisions):
    assert decisions.evaluate("data.test.decisions.violations", REVIEW) == [
        {"container": "debug", "reason": "privileged"},
        {"container": "sidecar", "reason": "privileged"},
    ]


def test_partial_object_comes_back_as_a_dict(decisions):
    assert decisions.evaluate("data.test.decisions.labels", REVIEW) == {
        "app": "shop",
        "app.kubernetes.io/part-of": "store",
    }


def test_undefined_rule_is_not_an_empty_set(decisions):
    assert decisions.evaluate("data.test.decisions.maybe", REVIEW) is UNDEFINED
    assert decisions.evaluate("data.test.decisions.nothing", REVIEW) == []
    assert decisions.evaluate("data.test.decisions.nothing", REVIEW) is not UNDEFINED


def test_null_value_is_defined_and_not_undefined(decisions):
    assert decisions.evaluate("data.test.decisions.explicit_null") is None


def test_rule_that_does_not_exist_is_undefined(decisions):
    assert decisions.evaluate("data.test.decisions.no_such_rule", REVIEW) is UNDEFINED
    assert decisions.evaluate("data.no.such.package", REVIEW) is UNDEFINED


def test_booleans_come_back_as_booleans_and_counts_as_integers(decisions):
    flags = decisions.evaluate("data.test.decisions.flags")
    assert flags == {"yes": True, "no": False}
    assert type(flags["yes"]) is bool and type(flags["no"]) is bool
    count = decisions.evaluate("data.test.decisions.containers", REVIEW)
    assert count == 3 and type(count) is int


@pytest.mark.parametrize(
    "value",
    [0, -1, 1, 2**31, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), True, False],
    ids=repr,
)
def test_integers_and_booleans_round_trip_exactly(decisions, value):
    back = decisions.evaluate("data.test.decisions.inp", {"v": value})["v"]
    assert back == value and type(back) is type(value)


@pytest.mark.parametrize(
    ("value", "path", "problem"),
    [
        ({"v": 2**63}, r"input\.v", "integer 9223372036854775808 is outside"),
        ({"v": -(2**63) - 1}, r"input\.v", "is outside"),
        ({"v": [2**70 + 1]}, r"input\.v\[0\]", "is outside"),
        ({"a": {"b": "\ud800"}}, r"input\.a\.b", r"lone surrogate U\+D800"),
        ({"\udfff": 1}, r'input\["\\udfff"\]', "object key holds a lone surrogate"),
        ({"v": float("nan")}, r"input\.v", "nan is not a JSON number"),
        ({"v": float("-inf")}, r"input\.v", "-inf is not a JSON number"),
        ({"v": b"bytes"}, r"input\.v", "a bytes is not a JSON value"),
        ({1: "x"}, "input", "object key 1 is not a string"),
    ],
    ids=["2^63", "-2^63-1", "2^70", "surrogate", "surrogate-key", "nan", "-inf", "bytes", "int-key"],
)
def test_inputs_no_engine_may_take_are_refused_alike_naming_the_path(decisions, value, path, problem):
    # regorus segfaults on a lone surrogate and rounds integers beyond 64 bits
    # to floats while OPA keeps them exact: both engines refuse, never differ.
    with pytest.raises(InputRejected, match=f"^{path}: .*{problem}"):
        decisions.evaluate("data.test.decisions.inp", value)
    with pytest.raises(InputRejected):
        decisions.bind(value)
    with pytest.raises(InputRejected):
        decisions.query("input.v", value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [("\ud800", "lone surrogate"), (2**64, "is outside"), (float("nan"), "not a JSON number"), (b"x", "bytes")],
    ids=["surrogate", "2^64", "nan", "bytes"],
)
def test_a_bare_scalar_is_checked_as_an_item(value, problem):
    """What an extension builtin returns is often a bare string or number (input_guard's flat pass takes it)."""
    with pytest.raises(InputRejected, match=problem):
        input_guard.check(value, root="sprintf result", int_max=2**64 - 1)
    for fine in ("a-1", "é", 2**64 - 1, -(2**63), 0.5, True, None):
        input_guard.check(fine, root="sprintf result", int_max=2**64 - 1)


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_is_refused_beyond_the_documented_depth_and_taken_up_to_it(decisions):
    assert decisions.evaluate("data.test.decisions.inp", nested(MAX_DEPTH)) == nested(MAX_DEPTH)
    with pytest.raises(InputRejected, match=f"nested deeper than {MAX_DEPTH} levels"):
        decisions.evaluate("data.test.decisions.inp", nested(MAX_DEPTH + 1))
    with pytest.raises(InputRejected, match="nested deeper"):
        decisions.evaluate("data.test.decisions.inp", nested(100_000))  # beyond Python's recursion limit too


@pytest.mark.parametrize("value", [0.1, 1.5, -2.25, 1e-9, 1e22], ids=repr)
def test_floats_round_trip(decisions, value):
    back = decisions.evaluate("data.test.decisions.inp", {"v": value})["v"]
    assert back == value and type(back) is float


def test_a_float_beyond_2_53_held_otherwise_than_written_is_refused(decisions):
    """1e300's double is not 10**300, which OPA keeps and regokite's arithmetic would not."""
    with pytest.raises(InputRejected, match="not held exactly by a 64-bit double"):
        decisions.evaluate("data.test.decisions.inp", {"v": 1e300})


def test_strings_and_nesting_round_trip(decisions):
    doc = {"s": 'ünïcødé "quoted" \\ / \n', "list": [[], {}, [None]], "empty": ""}
    assert decisions.evaluate("data.test.decisions.inp", doc) == doc


# ---------------------------------------------------------------------- input


def test_missing_input_is_undefined(decisions):
    assert decisions.evaluate("data.test.decisions.inp") is UNDEFINED


def test_null_input_is_a_defined_null(decisions):
    assert decisions.evaluate("data.test.decisions.input_is_null", None) is True
    assert decisions.evaluate("data.test.decisions.inp", None) is None


@pytest.mark.parametrize("value", [{}, [], 0, False, ""], ids=repr)
def test_falsy_input_is_still_input(decisions, value):
    back = decisions.evaluate("data.test.decisions.inp", value)
    assert back == value and type(back) is type(value)


def test_bound_input_serves_several_refs(decisions):
    bound = decisions.bind(REVIEW)
    assert bound.evaluate("data.test.decisions.allow") is False
    assert len(bound.evaluate("test/decisions/deny")) == 2
    assert bound.evaluate("data.test.decisions.maybe") is UNDEFINED


# ---------------------------------------------------------------------- refs


def test_whole_package_ref_returns_every_rule_but_no_functions(decisions):
    assert decisions.evaluate("data.test.small") == {"a": 1, "b": ["x"]}


@pytest.mark.parametrize(
    "ref", ["data.test.small.a", "test.small.a", "test/small/a", "/test/small/a/", 'data.test.small["a"]']
)
def test_refs_may_be_dotted_slashed_or_bracketed(decisions, ref):
    assert decisions.evaluate(ref) == 1


def test_data_documents_from_data_files_sit_at_their_directory_path(make_engine, tmp_path: Path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "data.json").write_text(json.dumps({"limit": 3, "names": ["x"]}))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "data.yaml").write_text("enabled: true\nratio: 0.5\n")
    (tmp_path / "top.json").write_text("{}")  # not a data file name: ignored
    (tmp_path / "data.json").write_text(json.dumps({"root_key": [1, 2]}))
    (tmp_path / "policy.rego").write_text("package uses\n\nimport rego.v1\n\nover if input.n > data.a.b.limit\n")
    engine = make_engine(load_bundle([tmp_path]))
    assert engine.evaluate("data.a.b") == {"limit": 3, "names": ["x"]}
    assert engine.evaluate("data.a.b.limit") == 3
    assert engine.evaluate("data.c") == {"enabled": True, "ratio": 0.5}
    assert engine.evaluate("data.root_key") == [1, 2]
    assert engine.evaluate("data.uses.over", {"n": 4}) is True
    assert engine.evaluate("data.uses.over", {"n": 3}) is UNDEFINED


# ---------------------------------------------------------------------- queries


def test_query_result_has_opa_eval_shape(decisions):
    assert decisions.query("data.test.decisions.violations[v]", REVIEW) == [
        {
            "expressions": [
                {
                    "value": {"container": "debug", "reason": "privileged"},
                    "text": "data.test.decisions.violations[v]",
                    "location": {"row": 1, "col": 1},
                }
            ],
            "bindings": {"v": {"container": "debug", "reason": "privileged"}},
        },
        {
            "expressions": [
                {
                    "value": {"container": "sidecar", "reason": "privileged"},
                    "text": "data.test.decisions.violations[v]",
                    "location": {"row": 1, "col": 1},
                }
            ],
            "bindings": {"v": {"container": "sidecar", "reason": "privileged"}},
        },
    ]


def test_query_without_variables_has_no_bindings_key(decisions):
    assert decisions.query("  data.test.small.a  # the answer") == [
        {"expressions": [{"value": 1, "text": "data.test.small.a", "location": {"row": 1, "col": 3}}]}
    ]


def test_undefined_query_has_no_results(decisions):
    assert decisions.query("data.test.decisions.maybe", REVIEW) == []
    assert decisions.query("x := data.test.decisions.maybe", REVIEW) == []


def test_with_replaces_input_and_data_in_a_query(decisions):
    results = decisions.query('data.test.decisions.allow with input as {"user": "admin"}')
    assert results[0]["expressions"][0]["value"] is True
    assert results[0]["expressions"][0]["text"] == "data.test.decisions.allow"
    mocked = decisions.query("x := data.test.small.a with data.test.small.a as 7")
    assert mocked[0]["bindings"] == {"x": 7}


QUERIES = [
    "data.test.decisions.deny",
    "data.test.decisions.deny[msg]",
    'data.test.decisions.labels["app"]',
    "x := data.test.decisions.allow; y := count(data.test.decisions.deny)",
    "x := 1\n  y := x + 1\n\n  z := [x, y]",
    "x := [\n  1,\n  2\n]",
    "total := 1 +\n  2",
    "data.test.small.f(41)",
    "1 + 2",
    "2 > 1",
    "count(input.containers) == 3",
    "not data.test.decisions.maybe",
    'some c in input.containers; c.name == "web"',
    "x = 1",
    "x := 1; data.test.decisions.labels[k]",
    's := "a;b # not a comment"; t := `raw;string`',
    'data.test.decisions.inp.labels with input as {"labels": {"a": 1}}',
    "input",
    "data.test.small",
]


@pytest.mark.parametrize("query", QUERIES)
def test_query_answers_match_the_embedded_engine(decisions, query):
    reference = EmbeddedEngine(decisions.bundle)
    got, want = decisions.query(query, REVIEW), reference.query(query, REVIEW)
    # Two regorus quirks in an expression's `text`: a `some` declaration is
    # abbreviated to "some", and a closing quote or backtick at the very end is dropped.
    # The sidecar reports the source text, as `opa eval` does.
    for row in (*got, *want):
        for expr in row["expressions"]:
            text = expr["text"]
            expr["text"] = "some" if text.startswith("some ") else text.rstrip('"`')
    assert got == want


def test_query_with_null_input_sees_a_null_input(decisions):
    assert decisions.query("x := input", None) == [
        {
            "expressions": [{"value": True, "text": "x := input", "location": {"row": 1, "col": 1}}],
            "bindings": {"x": None},
        }
    ]


# ---------------------------------------------------------------------- errors


def test_division_by_zero_is_undefined_as_in_opas_default(make_engine):
    """OPA's default evaluation (`opa eval`, its REST API without strict-builtin-errors, Gatekeeper): a
    builtin's error makes its call undefined. Fails on the code before (an evaluation error)."""
    engine = make_engine(bundle_of(("policies/errors.rego", ERRORS)))
    heard: list[builtin_errors.UndefinedCall] = []
    builtin_errors.listen(heard.append)
    try:
        assert engine.evaluate("data.test.errors.ratio", {"n": 1, "d": 0}) is UNDEFINED
        assert engine.evaluate("data.test.errors.ratio", {"n": 6, "d": 3}) == 2
        assert engine.bind({"n": 1, "d": 0}).evaluate("data.test.errors.ratio") is UNDEFINED
    finally:
        builtin_errors.unlisten(heard.append)
    # each reported, naming the place (OPA: the line), the package and the builtin
    assert [(c.place.split(":")[:2], c.policy, c.builtin) for c in heard] == [
        (["policies/errors.rego", "5"], "test.errors", "div")
    ] * 2, heard


def test_strict_division_by_zero_is_an_evaluation_error_naming_its_location(make_engine):
    engine = make_engine(bundle_of(("policies/errors.rego", ERRORS)), strict_builtin_errors=True)
    assert engine.evaluate("data.test.errors.ratio", {"n": 6, "d": 3}) == 2
    with pytest.raises(EvaluationError) as caught:
        engine.evaluate("data.test.errors.ratio", {"n": 1, "d": 0})
    assert caught.value.query == "data.test.errors.ratio"
    assert "divide by zero" in caught.value.message
    location = caught.value.location
    assert location is not None and (location.file, location.line) == ("policies/errors.rego", 5)
    assert location.col > 0


def test_conflicting_complete_rule_values_are_an_evaluation_error_naming_the_rule(make_engine):
    engine = make_engine(bundle_of(("policies/errors.rego", ERRORS)))
    assert engine.evaluate("data.test.errors.mode", {"x": False}) is UNDEFINED
    with pytest.raises(EvaluationError) as caught:
        engine.evaluate("data.test.errors.mode", {"x": True})
    assert caught.value.location is not None
    assert caught.value.location.file == "policies/errors.rego"
    assert caught.value.location.line in (7, 9)
    assert "regokite/" not in str(caught.value)  # module paths, not OPA policy ids


def test_error_in_an_ad_hoc_query_points_into_the_query(decisions):
    with pytest.raises(EvaluationError) as caught:
        decisions.query("a := 1; b := zz + 1")
    assert caught.value.query == "a := 1; b := zz + 1"
    assert caught.value.location == Location("<query.rego>", 1, 14)


def test_syntax_error_is_a_policy_load_error_with_file_line_and_column(make_engine):
    broken = "package test.broken\n\nimport rego.v1\n\nallow if {\n\tinput.x ==\n}\n"
    with pytest.raises(PolicyLoadError) as caught:
        make_engine(bundle_of(("policies/ok.rego", SMALL), ("policies/broken.rego", broken)))
    error = caught.value
    assert error.location is not None
    assert error.location.file == "policies/broken.rego"
    assert (error.location.line, error.location.col) == (7, 1)
    assert error.source_line == "}"
    assert str(error).startswith("policies/broken.rego:7:1: ")


def test_v0_syntax_in_a_v1_module_says_how_to_load_it(make_engine):
    v0 = 'package test.v0\n\ndeny[msg] {\n\tmsg := "no"\n}\n'
    with pytest.raises(PolicyLoadError) as caught:
        make_engine(bundle_of(("policies/v0.rego", v0)))
    assert caught.value.location == Location("policies/v0.rego", 3, 11)
    assert "--v0-compatible" in caught.value.message


def test_each_engine_states_the_capabilities_of_its_kind() -> None:
    from regokite.engine import KINDS, Capability, EngineSettings, capabilities_of, open_engine
    from regokite.engine.opa import OpaEngine

    assert EmbeddedEngine.capabilities == capabilities_of("embedded") == KINDS[EmbeddedEngine.name]
    assert OpaEngine.capabilities == capabilities_of("opa") == KINDS[OpaEngine.name]
    assert Capability.INVENTORY in EmbeddedEngine.capabilities and Capability.SIDECAR in OpaEngine.capabilities
    with pytest.raises(ValueError, match="unknown engine 'wasm': expected 'embedded' or 'opa'"):
        open_engine(Bundle([]), EngineSettings("wasm"))


def test_callers_ask_a_capability_and_the_factory_builds_every_engine() -> None:
    """Outside `engine/` no code compares an engine's kind by name, calls an engine's class, or takes
    the sidecar's address apart from the EngineSettings it belongs to."""
    import ast

    from regokite.engine import KINDS

    package = Path(__file__).resolve().parents[2] / "regokite"
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == "engine":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                names = [n.value for n in (node.left, *node.comparators) if isinstance(n, ast.Constant)]
                if any(name in KINDS for name in names):
                    found.append(f"{path.name}:{node.lineno} compares an engine kind")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("EmbeddedEngine", "OpaEngine"):
                found.append(f"{path.name}:{node.lineno} builds an engine without open_engine")
            held = getattr(node, "arg", None) or getattr(getattr(node, "target", None), "id", None)
            if isinstance(node, ast.arg | ast.AnnAssign) and held == "opa_url":  # a parameter, a settings field
                found.append(f"{path.name}:{node.lineno} takes opa_url apart from EngineSettings")
    assert found == []
