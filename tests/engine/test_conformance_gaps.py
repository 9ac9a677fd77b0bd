"""Gaps OPA's own conformance cases showed, each beside OPA's evaluator (tests/opa_oracle.py).

Each case failed on the code before: an extension builtin refused OPA's
output-operand form (`f(x, out)`), `yaml.is_valid` of a multi-document string
was false (and true where a later document does not parse), an integer literal
beyond 64 bits was silently rounded, and a number beyond a double's range was
refused without saying what to do.
"""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest

from regokite.bundle import Bundle, Module
from regokite.engine.embedded import EmbeddedEngine
from regokite.errors import EvaluationError, Location, PolicyLoadError

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"


def both(rules: str, input: Any = None, other: str = "") -> tuple[Any, Any]:
    """regokite's answer and OPA's for data.p.x of `rules` in package p, beside the module `other`."""
    return opa_oracle.both(f"package p\n\n{rules}\n", input, others=[other] if other else [])


OUTPUT_OPERANDS = {
    "net.cidr_merge": 'x := merged if {\n\tnet.cidr_merge(["10.0.0.0/24", "10.0.1.0/24"], merged)\n}',
    "io.jwt.decode": f'x := payload if {{\n\tio.jwt.decode("{TOKEN}", [_, payload, _])\n}}',
    "an operand across lines": 'x := merged if {\n\tnet.cidr_merge(\n\t\t["10.0.0.0/24"],\n\t\tmerged,\n\t)\n}',
    "a bound output is compared": 'x if {\n\tnet.cidr_merge(["10.0.0.0/24"], {"10.0.0.0/24"})\n}',
    "a differing output fails": 'x := 1 if {\n\tnet.cidr_merge(["10.0.0.0/24"], {"10.9.0.0/24"})\n}',
}


def test_an_output_operand_keeps_the_lines() -> None:
    rules = OUTPUT_OPERANDS["an operand across lines"] + "\n\ny := 1 / input\n"
    with pytest.raises(EvaluationError) as caught:
        EmbeddedEngine(Bundle((Module("p.rego", f"package p\n\n{rules}\n"),))).evaluate("data.p.y", 0)
    assert caught.value.location is not None and caught.value.location.line == 10


@pytest.mark.parametrize("text", ["a: 1\n---\nb: 2\n", "", "a: [\n", "a: b: c", "- a\n- b", "a: 1\n\t\n"])
def test_yaml_is_valid_as_opa(text: str) -> None:
    mine, opa = both("x := yaml.is_valid(input)", text)
    assert mine == opa


@pytest.mark.parametrize("text", ["a: 1\n---\nb: [\n", "  test:\ntest1: hello\n", "a: 1\n---\n\tb: 2\n"])
def test_yaml_is_valid_is_false_for_content_after_the_first_document_that_does_not_parse(text: str) -> None:
    """OPA after 1.20 (its PR 9218, the conformance case `yaml is_valid unreachable content`): the
    oracle, OPA 1.20, read the first document only and answered true for these."""
    assert both("x := yaml.is_valid(input)", text)[0] is False


def test_an_integer_beyond_64_bits_is_refused_at_load_not_rounded() -> None:
    assert both("x := 18446744073709551615")[0] == both("x := 18446744073709551615")[1]  # u64 still exact
    assert both("x := 1000000000000000000000")[0] == 10**21  # a double holds it (gatekeeper-library's containerlimits)
    with pytest.raises(PolicyLoadError, match="beyond 64 bits") as caught:
        EmbeddedEngine(Bundle((Module("p.rego", "package p\n\nx := 123456789012345678901234567890\n"),)))
    assert caught.value.location == Location("p.rego", 3, 6)
    assert "write it as a string" in caught.value.message


def test_a_number_beyond_a_double_is_refused_saying_what_to_do() -> None:
    with pytest.raises(PolicyLoadError, match="write a smaller number, or a string") as caught:
        EmbeddedEngine(Bundle((Module("p.rego", "package p\n\nx := 1e400\n"),)))
    assert caught.value.location == Location("p.rego", 3, 6)


LENIENT_TESTS = """package p_test

import rego.v1

exempt(params) if "x" in object.get(params, "images", [])

test_a_builtin_error_is_undefined if not exempt(input.parameters) with input as {"parameters": null}

test_nested_calls if {
	images := object.get(object.get(input, "parameters", {}), "images", []) with input as {"parameters": null}
	count(images) == 0
}

test_a_call_that_does_not_err_answers if {
	object.get({"a": 1}, "a", 0) == 1
}
"""


def test_regokite_test_makes_a_builtin_error_undefined_as_opa_test(tmp_path: Any) -> None:
    """`opa test` evaluates without strict builtin errors: `object.get(null, ...)` is undefined
    (gatekeeper-library's proc-mount suite relies on it); `--strict-builtin-errors` keeps the error."""
    from regokite import testing

    (tmp_path / "p_test.rego").write_text(LENIENT_TESTS)
    lenient = {r.name: r.outcome.value for r in testing.run_tests([str(tmp_path)])}
    strict = {r.name: r.outcome.value for r in testing.run_tests([str(tmp_path)], strict_builtin_errors=True)}
    assert lenient == {
        "test_a_builtin_error_is_undefined": "PASS",
        "test_nested_calls": "FAIL",
        "test_a_call_that_does_not_err_answers": "PASS",
    }
    assert strict == {
        "test_a_builtin_error_is_undefined": "ERROR",
        "test_nested_calls": "ERROR",
        "test_a_call_that_does_not_err_answers": "PASS",
    }


# regorus takes only a function of the bundle after `with ... as`; the builtin gets one
MOCKS = {
    "a builtin by a builtin": "x := y if {\n\ty := count([1]) with count as sum\n}",
    "a string builtin by another": 'x := y if {\n\ty := upper("a") with upper as lower\n}',
    "a function by a builtin": 'f(s) := upper(s)\n\nx := y if {\n\ty := f("A") with f as lower\n}',
    "a function by a dotted builtin": 'f(s) := [s]\n\nx := y if {\n\ty := f(["b", "a"]) with f as array.reverse\n}',
}


AS_OPA = {**OUTPUT_OPERANDS, **MOCKS}


@pytest.mark.parametrize("name", AS_OPA)
def test_extension_output_operands_and_builtin_mocks_answer_as_opa(name: str) -> None:
    """An extension builtin's output operand (`OUTPUT_OPERANDS`), a function replaced by a builtin (`MOCKS`)."""
    mine, opa = both(AS_OPA[name])
    assert mine == opa


NON_BMP = {  # characters beyond U+FFFF: regorus counted UTF-16 units (count("😀") was 2)
    "count of a string": 'x := count("a😀b😀c")',
    "count of the input": "x := count(input)",
    "count in a function of another package": 'x := data.q.n("𐐀😀")',
    "count of every kind": 'x := [count(a) | some a in ["😀", [1], {"k": 1}, set(), "", "é", "e\\u0301"]]',
    "count in a comparison": 'x if count("😀") == 1',
    # Go escapes <, >, & and U+2028/9 in JSON; regorus wrote them as they are
    "json.marshal of html": 'x := json.marshal({"a<": "<b> & \\u2028"})',
    "json.marshal_with_options": 'x := json.marshal_with_options({"a": "<"}, {"pretty": true})',
}


def test_count_of_a_non_bmp_string_in_a_v0_module() -> None:
    bundle = Bundle((Module("p.rego", 'package p\n\nx = n { n := count("😀") }\n', v0=True),))
    assert EmbeddedEngine(bundle).evaluate("data.p.x") == 1


EXTENSION_MOCKS = {  # builtins regokite adds in Python or rewrites: regorus refused or ignored a `with` on them
    "by value": 'x := y if {\n\ty := net.cidr_merge(["10.0.0.0/24"]) with net.cidr_merge as ["m"]\n}',
    "by function": 'm(a) := [a]\n\nx := y if {\n\ty := net.cidr_merge(["10.0.0.0/24"]) with net.cidr_merge as m\n}',
    "in another package": 'x := y if {\n\ty := data.q.d("t") with io.jwt.decode as ["h", "p", "s"]\n}',
    "http.send without allowed hosts": (
        'x := y if {\n\ty := http.send({"method": "GET", "url": "http://a"}) with http.send as {"status_code": 1}\n}'
    ),
    "count by value": 'x := y if {\n\ty := data.q.n("😀") with count as 9\n}',
    "count of a literal": "x := y if {\n\ty := count([1, 2]) with count as 5\n}",
    "sprintf by value": 'x := y if {\n\ty := sprintf("%d", [1]) with sprintf as "z"\n}',
    "sprintf by function": 'm(_, _) := "m"\n\nx := y if {\n\ty := data.q.s(1) with sprintf as m\n}',
    "json.marshal by a string": 'x := y if {\n\ty := json.marshal({"a": "<"}) with json.marshal as "m"\n}',
    "unmocked beside": (
        'x := [y, z] if {\n\ty := net.cidr_merge(["10.0.0.0/24"]) with net.cidr_merge as ["m"]\n'
        '\tz := net.cidr_merge(["10.0.0.0/24"])\n}'
    ),
}


ANSWERED = {**NON_BMP, **EXTENSION_MOCKS}
assert len(ANSWERED) == len(NON_BMP) + len(EXTENSION_MOCKS)  # no case hides another


@pytest.mark.parametrize("name", ANSWERED)
def test_counts_json_escapes_and_with_on_an_extension_builtin_answer_as_opa(name: str) -> None:
    """Characters beyond U+FFFF and Go's JSON escapes (`NON_BMP`); a builtin regokite adds or rewrites
    replaced by `with` (`EXTENSION_MOCKS`). Each answers, and as OPA."""
    other = 'package q\n\nd(t) := io.jwt.decode(t)\n\nn(s) := count(s)\n\ns(v) := sprintf("%v", [v])\n'
    mine, opa = both(ANSWERED[name], "a😀b", other)
    assert mine == opa
    assert mine != "<error>"


def test_an_unmocked_http_send_still_fails_without_allowed_hosts() -> None:
    rules = (
        'x := y if {\n\ty := http.send({"method": "GET", "url": "http://a"}) with http.send as {}\n}\n\n'
        'z := http.send({"method": "GET", "url": "http://a"})\n'
    )
    engine = EmbeddedEngine(Bundle((Module("p.rego", f"package p\n\n{rules}"),)))
    assert engine.evaluate("data.p.x") == {}
    with pytest.raises(EvaluationError, match="--allow-http-send"):
        engine.evaluate("data.p.z")
    with pytest.raises(PolicyLoadError, match="--allow-http-send"):  # no `with` replaces it: refused at load
        EmbeddedEngine(Bundle((Module("p.rego", "package p\n\nz := http.send({})\n"),)))


FUNCTION_MOCKS = {  # regorus matched a `with` to calls by the name as written, not the function it names
    "a local name does not reach another package's function": (
        "x := y if {\n\ty := data.q.g(1) with w as m\n}\n\nm(_) := 42\n\nw(_) := 5\n",
        "package q\n\nw(a) := a * 2\n\ng(a) := w(a)\n",
    ),
    "a full path reaches a call by local name": (
        "x := y if {\n\ty := g(1) with data.p.w as m\n}\n\nm(_) := 42\n\nw(a) := a * 2\n\ng(a) := w(a)\n",
        "package q\n",
    ),
    "through an import alias": (
        "import data.q as qq\n\nx := y if {\n\ty := g(1) with data.q.w as 3\n}\n\ng(a) := qq.w(a)\n",
        "package q\n\nw(a) := a\n",
    ),
    "an import's name": ("import data.q\n\nx := y if {\n\ty := q.w(1) with q.w as 3\n}\n", "package q\n\nw(a) := a\n"),
}


@pytest.mark.parametrize("name", FUNCTION_MOCKS)
def test_with_replaces_the_function_it_names_as_opa(name: str) -> None:
    rules, other = FUNCTION_MOCKS[name]
    mine, opa = both(rules, other=other)
    assert mine == opa


def test_upper_and_lower_map_each_character_to_one_as_opa() -> None:
    """Go maps rune by rune (unicode.ToUpper): regorus's `upper("ß")` was "SS", `lower("AΣ")` ended in ς."""
    texts = ["ß", "AΣ", "İ", "ŉ", "ﬀ", "ᾳ", "ǅ", "𐐨x", "Straße", "ΑΣ ΣΑ"]
    mine, opa = both("x := [[upper(s), lower(s)] | some s in input]", texts)
    assert mine == opa
