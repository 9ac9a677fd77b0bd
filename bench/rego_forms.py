"""The calling forms of the differential fuzzer (bench/rego_fuzz.py): every builtin regokite evaluates,
called each way Rego can call it, and the statement shapes around calls.

A case is one builtin (or shape), one form, one bundle and one input. The
forms of a call `f(a, b)`:

* body: `r if f(a, b)` (the call as a statement: defined when it is true);
* assign: `r := x if x := f(a, b)`; destructure: `[p, q] := f(a, b)`;
* output: `r := x if f(a, b, x)` (the output-argument form);
* not: `r if not f(a, b)`;
* array / set / object: the call inside a comprehension of each kind;
* with: a function of the bundle calling `f`, evaluated with `f` replaced by
  another function, or by a value (`with f as h`, `with f as 7`).

Shapes: `walk` enumerated, `every`, `some k, v in`, rule heads with refs,
partial sets and objects, `else` chains, functions with several bodies.

Arguments are literals of the declared kind (typed), or `input.aN`, which
each input fills with a typed value, an edge value or a value of another
type (wrong-typed: OPA's type checker would refuse such a literal, so it
comes through the input). Each form is its own bundle, so one OPA refuses
to compile (a form its type checker rejects) costs only that form.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# kinds: s string, n number, b boolean, a array, o object, S set, x any; the others are strings (or
# numbers) of a domain, drawn from POOLS: C cidr, T RFC 3339 time, N nanoseconds, J JSON text, R regex,
# V semver, B base64, D duration, U units, F sprintf format, Q url query, G glob, Y YAML text, W JWT, I int,
# E a small network (net.cidr_expand lists every address), L GraphQL text, K a Go template
SIGNATURES = """
abs:n array.concat:aa array.flatten:a array.reverse:a array.slice:aII base64.decode:B base64.encode:s
base64.is_valid:B base64url.decode:B base64url.encode:s base64url.encode_no_pad:s bits.and:II bits.lsh:II
bits.negate:I bits.or:II bits.rsh:II bits.xor:II ceil:n concat:sa contains:ss count:x crypto.hmac.equal:ss
crypto.hmac.md5:ss crypto.hmac.sha1:ss crypto.hmac.sha256:ss crypto.hmac.sha512:ss crypto.md5:s crypto.sha1:s
crypto.sha256:s crypto.x509.parse_and_verify_certificates:s crypto.x509.parse_certificates:s endswith:ss floor:n
format_int:nI glob.match:GAs glob.quote_meta:s graph.reachable:oa graph.reachable_paths:oa hex.decode:s
hex.encode:s indexof:ss indexof_n:ss intersection:S io.jwt.decode:W io.jwt.decode_verify:Wo io.jwt.verify_eddsa:Ws
io.jwt.verify_es256:Ws io.jwt.verify_es384:Ws io.jwt.verify_es512:Ws io.jwt.verify_hs256:Ws io.jwt.verify_hs384:Ws
io.jwt.verify_hs512:Ws io.jwt.verify_ps256:Ws io.jwt.verify_ps384:Ws io.jwt.verify_ps512:Ws io.jwt.verify_rs256:Ws
io.jwt.verify_rs384:Ws io.jwt.verify_rs512:Ws is_array:x is_boolean:x is_null:x is_number:x is_object:x is_set:x
is_string:x json.filter:oa json.is_valid:J json.marshal:x json.marshal_with_options:xo json.match_schema:xx
json.patch:xP json.remove:oa json.unmarshal:J json.verify_schema:x lower:s max:x min:x net.cidr_contains:CC
net.cidr_contains_matches:xx net.cidr_expand:E net.cidr_intersects:CC net.cidr_is_valid:C net.cidr_merge:a
numbers.range:II numbers.range_step:III object.filter:ox object.get:oxx object.keys:o object.remove:ox
object.subset:xx object.union:oo object.union_n:a product:x regex.find_all_string_submatch_n:RsI regex.find_n:RsI
regex.is_valid:R regex.match:Rs regex.replace:sRs regex.split:Rs regex.template_match:ssss replace:sss round:n
semver.compare:VV semver.is_valid:x sort:x split:ss sprintf:Fa startswith:ss strings.any_prefix_match:xx
strings.any_suffix_match:xx strings.count:ss strings.replace_n:os strings.reverse:s substring:sII sum:x
time.add_date:NIII time.clock:x time.date:x time.diff:xx time.format:x time.parse_duration_ns:D time.parse_ns:ss
time.parse_rfc3339_ns:T time.weekday:x to_number:x trace:s trim:ss trim_left:ss trim_prefix:ss trim_right:ss
trim_space:s trim_suffix:ss type_name:x union:S units.parse:U units.parse_bytes:U upper:s urlquery.decode:Q
urlquery.decode_object:Q urlquery.encode:s urlquery.encode_object:o uuid.parse:s walk:x yaml.is_valid:Y
yaml.marshal:x yaml.unmarshal:Y graphql.is_valid:LL graphql.parse:LL graphql.parse_and_verify:LL graphql.parse_query:L
graphql.parse_schema:L graphql.schema_is_valid:L io.jwt.encode_sign:ooo io.jwt.encode_sign_raw:sss
providers.aws.sign_req:ooN regex.globs_match:GG strings.render_template:Ko strings.split_n:ssI
crypto.x509.parse_rsa_private_key:s crypto.x509.parse_keypair:ss rego.metadata.chain: rego.metadata.rule:
"""
SIGNATURE: dict[str, str] = dict(entry.split(":") for entry in SIGNATURES.split())
# what differs from run to run, or between two engines by design (no case can compare them), and what
# v1 refuses (OPA 1.x's deprecated builtins: the fuzzer writes v1, which OPA's library alone parses)
NONDETERMINISTIC = frozenset({"rand.intn", "time.now_ns", "uuid.rfc4122", "opa.runtime", "print", "net.lookup_ip_addr"})
V0_ONLY = frozenset(
    {
        "all",
        "any",
        "re_match",
        "set_diff",
        "net.cidr_overlap",
        *(f"cast_{t}" for t in ["array", "boolean", "null", "object", "set", "string"]),
    }
)

POOLS: dict[str, list[Any]] = {
    "s": ["", "a", "abc", "A-b_c", "é", "日本", "😀", " x ", "a.b.c", "1", "%v", "a,b", "ß", "<b>&"],
    "n": [0, 1, -1, 2, 0.5, -2.25, 100, 2**31, 2**53 + 1, 2**63 - 1, 0.001],
    "I": [0, 1, 2, 3, -1, 5, 64],
    "b": [True, False],
    "C": ["10.0.0.0/8", "10.1.2.3", "192.168.1.0/24", "10.0.0.0/30", "::1", "2001:db8::/64", "bad", "10.0.0.1/33"],
    "E": ["10.0.0.0/30", "192.168.1.1/32", "::1/127", "10.0.0.0/31", "bad", "10.0.0.1", "10.0.0.0/33"],
    "L": ["type Query { a: Int }", "{ a }", "query { a }", "", "x", "type Query { a: Int }\nschema { query: Query }"],
    "K": ["{{.a}}", "x {{.b}}", "{{", "plain", "{{.a}} {{.missing}}"],
    "T": ["2024-01-31T10:00:00Z", "2020-02-29T23:59:59.5+02:00", "1970-01-01T00:00:00Z", "2024-13-01T00:00:00Z"],
    "N": [0, 1700000000000000000, -1, 86400000000000, 1.5],
    "J": ['{"a": 1}', "[1, 2]", '"s"', "nope", "1e400", "", "{}", "null"],
    "R": ["a.c", "^a", "[", "(x)(y)?", "", "a|b", "\\d+", "(?i)A"],
    "V": ["1.2.3", "1.2.3-rc.1+b", "v1", "1.2", "0.0.0", "10.20.30"],
    "B": ["YWJj", "/w==", "!!", "", "YQ", "YWJjZA=="],
    "D": ["1h", "1m30s", "-2.5s", "x", "", "300ms", "1d"],
    "U": ["1K", "1Ki", "10m", "1e3", "x", "", "1.5G", "2Mi"],
    "F": ["%v", "%d", "%s %s", "%-3s|", "%.2f", "%x", "%v %v %v", "%q"],
    "Q": ["a=1&b=2", "a=%zz", "x=y+z", "", "a&a=1&a=2"],
    "G": ["*.a", "a.**", "{a,b}", "[!x]", "*", "a?c"],
    "Y": ["a: 1", "- 1\n- 2", "a: [", "", "x", "a: 1\n---\nb: 2", "\ta: 1"],
    "W": ["eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "a.b.c", "", "x"],
    "P": [[{"op": "add", "path": "/a", "value": 1}], [{"op": "remove", "path": "/x"}], [{"op": "bad"}], []],
    "a": [[], [1, 2], ["a", "b"], [[1], {"k": 1}], ["10.0.0.0/8", "10.0.1.0/24"], [{"a": 1}, {"b": 2}]],
    "o": [{}, {"a": 1}, {"a": {"b": [1, 2]}, "c": "d"}, {"k": "v", "n": None}, {"a": ["b"], "b": ["c"]}],
    "S": [{"__set__": []}, {"__set__": [1, 2]}, {"__set__": [{"__set__": [1]}, {"__set__": [2]}]}],
}
EDGE: list[Any] = ["", 0, -1, None, [], {}, {"__set__": []}, 1e300, -0.5, " ", "\u2028"]
ANY: list[Any] = [*POOLS["s"][:6], *POOLS["n"][:6], True, None, *POOLS["a"], *POOLS["o"][:3], *POOLS["S"]]
# builtins whose work grows with a number argument (a range of 2**31 numbers, a shift by 2**53 bits) take
# no large number, in either engine: the machine would run out of memory before either answered
SIZED = frozenset({"numbers.range", "numbers.range_step", "bits.lsh", "bits.rsh", "net.cidr_expand"})


def _small(value: Any) -> bool:
    return not isinstance(value, int | float) or isinstance(value, bool) or abs(value) <= 1000


FORMS = ("body", "assign", "destructure", "output", "not", "array", "set", "object", "with function", "with value")
SHAPES = ("walk", "every", "some in", "ref head", "partial set", "partial object", "else chain", "function bodies")


def builtins() -> list[str]:
    """Every builtin of OPA 1.20 that the embedded engine evaluates, but those no two runs agree on."""
    from regokite.engine.catalog import OPA_BUILTINS, embedded_builtins
    from regokite.engine.extensions import ExtensionOptions

    evaluated = OPA_BUILTINS & embedded_builtins(ExtensionOptions()) - NONDETERMINISTIC - V0_ONLY
    missing = evaluated - set(SIGNATURE)
    assert not missing, f"no signature for {sorted(missing)}"  # a builtin added to the engine needs one here
    return sorted(evaluated)


@dataclass(frozen=True)
class Case:
    """One bundle: the builtin or shape, the form, the module, and the rule evaluated (`data.forms.r`)."""

    subject: str
    form: str
    module: str
    inputs: tuple[Any, ...]


def rego(value: Any) -> str:
    """A value as a Rego literal (a set is `{"__set__": [...]}` in the pools)."""
    if isinstance(value, dict) and set(value) == {"__set__"}:
        items = [rego(v) for v in value["__set__"]]
        return "{" + ", ".join(items) + "}" if items else "set()"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {rego(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(rego(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def plain(value: Any) -> Any:
    """A pool value as JSON input (a set becomes its array: input holds no sets)."""
    if isinstance(value, dict) and set(value) == {"__set__"}:
        return [plain(v) for v in value["__set__"]]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def _arg_value(rng: random.Random, kind: str, sized: bool = False) -> Any:
    roll = rng.random()
    if roll < 0.6:
        pool = POOLS.get(kind, ANY)
    elif roll < 0.8:
        pool = EDGE
    else:
        pool = ANY  # any type: often not the declared one
    return rng.choice([v for v in pool if _small(v)] if sized else pool)


def call_args(rng: random.Random, name: str, inputs: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The argument terms of a call of `name`, and `inputs` inputs: a typed literal, or `input.aN` filled
    per input."""
    terms: list[str] = []
    values: list[dict[str, Any]] = [{} for _ in range(inputs)]
    sized = name in SIZED
    tagged = _tagged(name)
    for i, kind in enumerate(SIGNATURE[name]):
        if rng.random() < 0.5:
            pool = [v for v in POOLS.get(kind, ANY) if _small(v) or not sized]
            terms.append(rego(tagged(i, rng.choice(pool))))
            continue
        terms.append(f"input.a{i}")
        for value in values:
            value[f"a{i}"] = tagged(i, plain(_arg_value(rng, kind, sized)))
    return terms, values


_TEMPLATES = itertools.count()


def _tagged(name: str) -> Callable[[int, Any], Any]:
    """regex.template_match's template and text, given a tag new to the process: OPA caches a template's
    regexp under its text alone, in the cache regex.match uses too, so a template (or pattern) seen before
    would answer as compiled then, whatever the delimiters (an OPA bug; regokite answers as a fresh OPA)."""
    if name != "regex.template_match":
        return lambda _, value: value
    tag = f"~{next(_TEMPLATES)}"
    return lambda position, value: value + tag if position < 2 and isinstance(value, str) else value


def _forms(name: str, args: list[str], rng: random.Random) -> dict[str, str]:
    call = f"{name}({', '.join(args)})"
    params = ", ".join(f"p{i}" for i in range(len(args)))
    mock_value = rego(rng.choice(ANY))
    return {
        "body": f"r if {{\n\t{call}\n}}",
        "assign": f"r := x if {{\n\tx := {call}\n}}",
        "destructure": f"r := [p, q] if {{\n\t[p, q] := {call}\n}}",
        "output": f"r := x if {{\n\t{name}({', '.join([*args, 'x'])})\n}}",
        "not": f"r if {{\n\tnot {call}\n}}",
        "array": f"r := [x | x := {call}]",
        "set": f"r := {{x | x := {call}}}",
        "object": f'r := {{"k": x | x := {call}}}',
        "with function": f"g({params}) := {name}({params})\n\nh({params}) := {mock_value}\n\n"
        f"r := x if {{\n\tx := g({', '.join(args)}) with {name} as h\n}}",
        "with value": f"g({params}) := {name}({params})\n\n"
        f"r := x if {{\n\tx := g({', '.join(args)}) with {name} as {mock_value}\n}}",
    }


def builtin_cases(rng: random.Random, name: str, inputs: int = 2) -> list[Case]:
    """A bundle per form for one call of `name` (the same arguments in every form)."""
    args, values = call_args(rng, name, inputs)
    return [
        Case(name, form, f"package forms\n\n{text}\n", tuple(values))
        for form, text in _forms(name, args, rng).items()
        if args or not form.startswith("with")  # a function of no arguments cannot be written
    ]


def shape_cases(rng: random.Random, inputs: int = 2) -> list[Case]:
    """One bundle per shape, over a collection from the input (typed or not)."""
    values = [{"c": plain(_arg_value(rng, rng.choice("aoS"))), "n": rng.choice(POOLS["n"])} for _ in range(inputs)]
    literal = rego(rng.choice(POOLS[rng.choice("aoS")]))
    shapes = {
        "walk": f"r := {{p | [p, v] := walk(input.c)}}\n\nr2 contains [p, v] if walk({literal}, [p, v])",
        "every": "r if {\n\tevery k, v in input.c {\n\t\t[k, v] != [input.n, input.n]\n\t}\n}",
        "some in": f"r contains [k, v] if {{\n\tsome k, v in input.c\n}}\n\nr2 contains v if some v in {literal}",
        "ref head": "a.b[k] := v if {\n\tsome k, v in input.c\n}\n\na.c contains k if some k, _ in input.c\n\nr := a",
        "partial set": "r contains count(v) if {\n\tsome v in input.c\n\tis_array(v)\n}",
        "partial object": "r[k] := type_name(v) if {\n\tsome k, v in input.c\n}",
        "else chain": "r := 1 if {\n\tinput.n > 1\n} else := 2 if {\n\tcount(input.c) > 1\n} else := 3",
        "function bodies": "f(x) := 1 if x > 1\n\nf(x) := 2 if x < 0\n\nf(x) := 1 if x == 2\n\nr := f(input.n)",
    }
    return [Case(shape, shape, f"package forms\n\n{text}\n", tuple(values)) for shape, text in shapes.items()]
