"""Differential fuzzing: random Rego v1 modules and inputs, regokite's embedded engine against OPA.

    python3 -m bench.rego_fuzz --seconds 600 --seed 1 [--save DIR] [--builtin-errors default]

Each module (rules, partial sets and objects, functions, `else`, `default`,
`some`/`every`, comprehensions, `with`, `not`, string/number/object/set
builtins, edge values: empty, null, huge integers, decimals, unicode) is
loaded as `regokite eval` loads it (`open_engine(bundle)`, then
`query`) and by OPA 1.20's own evaluator (tests/opa_oracle.py), both with
strict builtin errors (as regokite asks of a sidecar OPA) or, with
`--builtin-errors default`, both as OPA's default (a builtin's error makes its
call undefined: `opa eval`, Gatekeeper, regokite's serving paths); every rule is evaluated on several random
inputs. A module OPA refuses to compile is not a case (counted apart). Each
case is one of:

* same: the same value, or both undefined;
* both error;
* fail-closed: regokite errs (or refuses the module) where OPA answers;
* answers where OPA errors: regokite gives a value where OPA errs;
* different: both answer, differently (silently wrong).

Two kinds of difference are counted apart from "different", to be seen:
"same set, other order" (regorus orders a set holding both sets and objects
otherwise than OPA) and "same but a number key's text" (an object's number key
printed as regorus writes the number, not with OPA's text of it).

The last two must be 0. Fail-closed cases are counted by cause. `--save`
writes every case of the last two classes as JSON (module, input, rule, both
answers) for a regression test.

Beside each random module, one builtin in turn (every builtin of OPA 1.20
that regokite evaluates) is called in each calling form, and the statement
shapes around calls are tried (bench/rego_forms.py); the report counts those
cases per builtin and per form.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the OPA oracle lives with the tests

from opa_oracle import OracleEngine  # noqa: E402

from bench import rego_forms  # noqa: E402
from regokite.bundle import Bundle, Module  # noqa: E402
from regokite.engine import UNDEFINED, EngineSettings, first_value, open_engine  # noqa: E402
from regokite.errors import EvaluationError, PolicyLoadError, RegokiteError  # noqa: E402

CLASSES = (
    "same",
    "same set, other order",
    "same but a number key's text",
    "both error",
    "fail-closed",
    "answers where OPA errors",
    "different",
)
ERROR = "<error>"

STRINGS = ["", "a", "abc", "A-b_c", "é", "日本", "😀", " x ", "a.b.c", "1", "-2.5", "true", "null", "%v", "a,b", "ABC"]
# beyond U+FFFF (regorus counted UTF-16 units), JSON's HTML escapes, case mappings of more than one character
STRINGS += ["a😀b😀c", "𐐀𐐨", "<b>&amp;", "\u2028", "ß", "AΣ", "İ"]
# no number Python writes with an exponent (1e-07): regorus keeps no number's text, so an object key made
# of one reads "1e-7" where OPA keeps the input's "1e-07" (a known difference, policies/README.md)
NUMBERS = [0, 1, -1, 2, 3, 10, 0.5, -2.25, 1.5, 100, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 0.001, 123456789]
KEYS = ["a", "b", "c", "k", "name", ""]


@dataclass
class Tally:
    cases: int = 0
    modules: int = 0
    refused_by_opa: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    causes: Counter[str] = field(default_factory=Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    by_form: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)  # (builtin or shape, form)

    def count(self, subject: str, form: str, kind: str) -> None:
        self.by_form.setdefault((subject, form), Counter())[kind] += 1


# ------------------------------------------------------------------ values and inputs


def literal(rng: random.Random, depth: int = 0) -> str:
    """A Rego literal (scalars, arrays, objects, sets, with edge values)."""
    kind = rng.choice(["s", "n", "n", "b", "null", "arr", "obj", "set"] if depth < 2 else ["s", "n", "b", "null"])
    if kind in ("s", "n", "b"):
        return typed_literal(rng, kind)
    if kind == "null":
        return "null"
    items = [literal(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "arr":
        return "[" + ", ".join(items) + "]"
    if kind == "set":
        return "{" + ", ".join(items) + "}" if items else "set()"
    pairs = [f"{json.dumps(rng.choice(KEYS))}: {literal(rng, depth + 1)}" for _ in range(rng.randint(0, 3))]
    return "{" + ", ".join(pairs) + "}"


def json_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.choice(["s", "n", "b", "null", "arr", "obj"] if depth < 3 else ["s", "n", "b", "null"])
    if kind == "s":
        return rng.choice(STRINGS)
    if kind == "n":
        return rng.choice(NUMBERS)
    if kind == "b":
        return rng.choice([True, False])
    if kind == "null":
        return None
    if kind == "arr":
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS): json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def random_input(rng: random.Random) -> dict[str, Any]:
    value = {k: json_value(rng, 1) for k in KEYS[:4] if rng.random() < 0.85}
    value["xs"] = [json_value(rng, 2) for _ in range(rng.randint(0, 4))]
    value["s"] = rng.choice(STRINGS)
    value["n"] = rng.choice(NUMBERS)
    return value


# ------------------------------------------------------------------ expressions

# builtin -> (argument kinds, result kind): "s" string, "n" number, "b" boolean, "a" array, "o" object,
# "S" set, "c" collection (array, object or set), "x" anything
BUILTINS: dict[str, tuple[str, str]] = {
    "concat": ("sa", "s"), "contains": ("ss", "b"), "endswith": ("ss", "b"), "startswith": ("ss", "b"),
    "lower": ("s", "s"), "upper": ("s", "s"), "split": ("ss", "a"), "replace": ("sss", "s"),
    "substring": ("snn", "s"), "trim": ("ss", "s"), "trim_space": ("s", "s"), "trim_left": ("ss", "s"),
    "trim_right": ("ss", "s"), "trim_prefix": ("ss", "s"), "trim_suffix": ("ss", "s"), "indexof": ("ss", "n"),
    "sprintf": ("sa", "s"), "format_int": ("nn", "s"), "strings.replace_n": ("os", "s"),
    "strings.reverse": ("s", "s"), "strings.count": ("ss", "n"), "to_number": ("x", "n"), "count": ("c", "n"),
    "sum": ("c", "n"), "max": ("c", "x"), "min": ("c", "x"), "product": ("c", "n"), "abs": ("n", "n"),
    "round": ("n", "n"), "ceil": ("n", "n"), "floor": ("n", "n"), "numbers.range": ("nn", "a"),
    "object.get": ("oxx", "x"), "object.keys": ("o", "S"), "object.remove": ("oc", "o"),
    "object.union": ("oo", "o"), "object.filter": ("oc", "o"), "is_string": ("x", "b"), "is_number": ("x", "b"),
    "is_array": ("x", "b"), "is_object": ("x", "b"), "is_set": ("x", "b"), "is_null": ("x", "b"),
    "type_name": ("x", "s"), "array.concat": ("aa", "a"), "array.slice": ("ann", "a"), "array.reverse": ("a", "a"),
    "sort": ("c", "a"), "json.marshal": ("x", "s"), "base64.encode": ("s", "s"), "base64.decode": ("s", "s"),
    "regex.match": ("ss", "b"), "units.parse_bytes": ("s", "n"), "units.parse": ("s", "n"),
    "semver.is_valid": ("x", "b"), "array.flatten": ("a", "a"),
    "json.is_valid": ("s", "b"), "yaml.is_valid": ("s", "b"), "hex.encode": ("s", "s"),
    "urlquery.encode": ("s", "s"), "crypto.sha256": ("s", "s"), "net.cidr_contains": ("ss", "b"),
    "net.cidr_merge": ("a", "S"), "strings.any_prefix_match": ("xx", "b"), "json.unmarshal": ("s", "x"),
    "strings.any_suffix_match": ("xx", "b"), "base64url.encode": ("s", "s"), "upper ": ("s", "s"),
}  # fmt: skip
ARITHMETIC = ["+", "-", "*", "/", "%"]
COMPARISON = ["==", "!=", "<", "<=", ">", ">="]


@dataclass
class Scope:
    vars: list[str]
    rules: list[str]
    functions: list[tuple[str, int]]


def fits(result: str, kind: str) -> bool:
    return kind == "x" or result == "x" or result == kind or (kind == "c" and result in "aoS")


def term(rng: random.Random, scope: Scope, depth: int, kind: str = "x") -> str:
    """An expression term of `kind` (a guess OPA's type checker mostly accepts)."""
    choice = rng.random()
    if depth <= 0 or choice < 0.3:
        return _leaf(rng, scope, kind)
    if choice < 0.6:
        names = [b for b, (_, out) in BUILTINS.items() if fits(out, kind)]
        name = rng.choice(names).strip()
        if name == "numbers.range":  # a range of 2**63 numbers would take the machine, in either engine
            return f"numbers.range({rng.randint(-3, 3)}, {rng.randint(-3, 5)})"
        args = ", ".join(term(rng, scope, depth - 1, k) for k in BUILTINS[name][0])
        return f"{name}({args})"
    if choice < 0.68 and kind in "nx":
        return f"({term(rng, scope, depth - 1, 'n')} {rng.choice(ARITHMETIC)} {term(rng, scope, depth - 1, 'n')})"
    if choice < 0.72 and kind in "bx":
        return f"({term(rng, scope, depth - 1)} {rng.choice(COMPARISON)} {term(rng, scope, depth - 1)})"
    if choice < 0.75 and kind in "Sx":
        return f"({term(rng, scope, depth - 1, 'S')} {rng.choice('&|')} {term(rng, scope, depth - 1, 'S')})"
    if choice < 0.8 and scope.functions and kind == "x":
        name, arity = rng.choice(scope.functions)
        return f"{name}({', '.join(term(rng, scope, depth - 1) for _ in range(arity))})"
    if choice < 0.9 and kind in "aoSxc":
        return _comprehension(rng, scope, depth, kind)
    return _leaf(rng, scope, kind)


def _leaf(rng: random.Random, scope: Scope, kind: str) -> str:
    choice = rng.random()
    if choice < 0.2 and scope.vars:
        return rng.choice(scope.vars)
    if choice < 0.55:
        path = rng.choice(["input.a", "input.b", "input.c", "input.k", "input.xs", "input.s", "input.n"])
        if rng.random() < 0.3:
            path += rng.choice(["[0]", "[1]", ".a", '["k"]', ".name"])
        return path
    if choice < 0.62 and scope.rules and kind == "x":
        return rng.choice(scope.rules)
    return typed_literal(rng, kind)


def typed_literal(rng: random.Random, kind: str) -> str:
    """A literal of `kind`: s(tring), n(umber), b(oolean), a(rray), o(bject), S(et), c(ollection: any of the
    three); any other kind, any literal."""
    if kind == "s":
        return json.dumps(rng.choice(STRINGS), ensure_ascii=False)
    if kind == "n":
        return json.dumps(rng.choice(NUMBERS))
    if kind == "b":
        return rng.choice(["true", "false"])
    if kind in "aoSc":
        items = [literal(rng, 1) for _ in range(rng.randint(0, 3))]
        form = rng.choice("aoS") if kind == "c" else kind
        if form == "a":
            return "[" + ", ".join(items) + "]"
        if form == "S":
            return "{" + ", ".join(items) + "}" if items else "set()"
        return "{" + ", ".join(f"{json.dumps(rng.choice(KEYS))}: {i}" for i in items) + "}"
    return literal(rng)


def _comprehension(rng: random.Random, scope: Scope, depth: int, kind: str) -> str:
    var = f"v{rng.randint(0, 999)}"
    inner = Scope([*scope.vars, var], scope.rules, scope.functions)
    source = term(rng, scope, depth - 1, "c")
    body = f"some {var} in {source}"
    if rng.random() < 0.5:
        body += f"; {condition(rng, inner, depth - 1)}"
    form = {"a": "array", "o": "object", "S": "set"}.get(kind) or rng.choice(["array", "set", "object"])
    value = rng.choice([var, term(rng, inner, depth - 1)])
    if form == "array":
        return f"[{value} | {body}]"
    if form == "set":
        return f"{{{value} | {body}}}"
    return f"{{{var}: {term(rng, inner, depth - 1)} | {body}}}"


def condition(rng: random.Random, scope: Scope, depth: int) -> str:
    """A body expression (a statement)."""
    choice = rng.random()
    if choice < 0.2:
        negated = term(rng, scope, depth)
        while re.fullmatch(r"[\w\"., -]*|\[.*\]|\{.*\}", negated):  # OPA 1.20.2 bug: `r := f(x) if { not true }` holds
            negated = term(rng, scope, max(depth, 1))
        return f"not {negated}"
    if choice < 0.3:
        target = rng.choice(["input.a", "input.s", "input.n", "input"])
        value = literal(rng) if rng.random() < 0.5 else term(rng, scope, max(depth - 1, 0))  # a rule, a call...
        replaced = term(rng, scope, depth)
        while replaced == "true":  # OPA drops a `true with ...` statement (and its value) beside a head's call
            replaced = term(rng, scope, max(depth, 1))
        return f"{replaced} with {target} as {value}"
    if choice < 0.38:
        var = f"e{rng.randint(0, 999)}"
        test = f"{var} {rng.choice(COMPARISON)} {term(rng, scope, depth - 1)}"
        return f"every {var} in {term(rng, scope, depth - 1, 'c')} {{ {test} }}"
    if choice < 0.5:
        return f"{term(rng, scope, depth)} in {term(rng, scope, depth - 1, 'c')}"
    return term(rng, scope, depth)


def body(rng: random.Random, scope: Scope, depth: int) -> tuple[list[str], Scope]:
    """Statements, and the scope after them (the variables they bind)."""
    lines = []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.4:
            var = f"x{len(scope.vars)}"
            if rng.random() < 0.3:
                lines.append(f"some {var} in {term(rng, scope, depth, 'c')}")
            else:
                lines.append(f"{var} := {term(rng, scope, depth)}")
            scope = Scope([*scope.vars, var], scope.rules, scope.functions)
        else:
            lines.append(condition(rng, scope, depth))
    return lines, scope


def module(rng: random.Random) -> tuple[str, list[str]]:
    """A module of package `fuzz`, and the names of its rules (each a case per input)."""
    out = ["package fuzz", ""]
    scope = Scope([], [], [])
    names: list[str] = []
    for i in range(rng.randint(0, 2)):
        name, arity = f"f{i}", rng.randint(1, 2)
        params = [f"p{j}" for j in range(arity)]
        lines, inner = body(rng, Scope(params, [], scope.functions), 2)
        out.append(f"{name}({', '.join(params)}) := {term(rng, inner, 2)} if {{")
        out += [f"\t{line}" for line in lines] + ["}", ""]
        scope.functions.append((name, arity))
    for i in range(rng.randint(1, 4)):
        name = f"r{i}"
        form = rng.choice(["complete", "complete", "set", "object", "else", "default"])
        lines, inner = body(rng, Scope([], list(scope.rules), scope.functions), 2)
        block = "\n".join(f"\t{line}" for line in lines)
        if form == "set":
            out.append(f"{name} contains {term(rng, inner, 1)} if {{\n{block}\n}}")
        elif form == "object":
            out.append(f"{name}[{term(rng, inner, 1)}] := {term(rng, inner, 1)} if {{\n{block}\n}}")
        elif form == "else":
            other, _ = body(rng, Scope([], list(scope.rules), scope.functions), 1)
            alt = "\n".join(f"\t{line}" for line in other)
            out.append(f"{name} := {term(rng, inner, 1)} if {{\n{block}\n}} else := {literal(rng)} if {{\n{alt}\n}}")
        else:
            if form == "default":
                out.append(f"default {name} := {literal(rng)}\n")
            out.append(f"{name} := {term(rng, inner, 2)} if {{\n{block}\n}}")
        out.append("")
        scope.rules.append(name)
        names.append(name)
    return "\n".join(out), names


# ------------------------------------------------------------------ evaluating


def regokite_answer(engine: Any, ref: str, input: Any) -> Any:
    """As `regokite eval`: engine.query, the first expression's value."""
    try:
        value = first_value(engine.query(ref, input))
    except RegokiteError as exc:
        return (ERROR, cause(str(getattr(exc, "message", exc))))
    return "<undefined>" if value is UNDEFINED else value


def oracle_answer(engine: OracleEngine, ref: str, input: Any) -> Any:
    try:
        value = engine.evaluate(ref, input)
    except EvaluationError:
        return (ERROR, "")
    return "<undefined>" if value is UNDEFINED else value


def cause(message: str) -> str:
    """An error message as a cause: names, numbers and quoted values blanked."""
    message = message.split("\n")[0]
    message = re.sub(r"`[^`]*`|\"[^\"]*\"|'[^']*'", "…", message)
    message = re.sub(r"\b\d+(\.\d+)?\b", "N", message)
    return message[:110]


def classify(mine: Any, theirs: Any) -> str:
    mine_err = isinstance(mine, tuple)
    theirs_err = isinstance(theirs, tuple)
    if mine_err and theirs_err:
        return "both error"
    if mine_err:
        return "fail-closed"
    if theirs_err:
        return "answers where OPA errors"
    if canonical(mine) == canonical(theirs):
        return "same"
    if unordered(mine) == unordered(theirs):
        return "same set, other order"
    return "same but a number key's text" if close(mine, theirs) else "different"


def close(mine: Any, theirs: Any, key: bool = False) -> bool:
    """Equal but for a number's text where it is an object's key ("1e-7" and "1e-07": regorus
    keeps no number's text). Numbers compare by value and a string that is a value exactly:
    `json.marshal(1e-7)` reading otherwise is different."""
    if isinstance(mine, bool) or isinstance(theirs, bool):
        return mine == theirs
    if isinstance(mine, int | float) and isinstance(theirs, int | float):
        return mine == theirs
    if isinstance(mine, str) and isinstance(theirs, str):
        return mine == theirs or (key and _same_number(mine, theirs))
    if isinstance(mine, list) and isinstance(theirs, list):
        return len(mine) == len(theirs) and all(close(a, b) for a, b in zip(mine, theirs, strict=True))
    if isinstance(mine, dict) and isinstance(theirs, dict):
        if len(mine) != len(theirs):
            return False
        pairs = zip(sorted(mine.items()), sorted(theirs.items(), key=lambda kv: _key_order(kv[0], mine)), strict=True)
        return all(close(ka, kb, key=True) and close(va, vb) for (ka, va), (kb, vb) in pairs)
    return mine == theirs


def _same_number(a: str, b: str) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-15)
    except ValueError:
        return False


def _key_order(key: str, mine: dict[str, Any]) -> str:
    """OPA's key, sorted where the matching key of regokite's falls."""
    for candidate in mine:
        if close(candidate, key, key=True):
            return candidate
    return key


def unordered(value: Any) -> Any:
    """`value` with every array's order dropped: a set serialised in another order than OPA's
    (regorus orders a set of objects and sets otherwise) compares equal."""
    if isinstance(value, list):
        return sorted((unordered(v) for v in value), key=canonical)
    if isinstance(value, dict):
        return {k: unordered(v) for k, v in value.items()}
    return value


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def run_module(rng: random.Random, tally: Tally, inputs: int, strict: bool = True) -> None:
    text, names = module(rng)
    run_bundle(tally, text, names, [random_input(rng) for _ in range(inputs)], strict=strict)


def run_bundle(
    tally: Tally,
    text: str,
    names: list[str],
    inputs: list[Any],
    form: tuple[str, str] | None = None,
    *,
    strict: bool = True,
) -> None:
    """Each rule of the module `text` on each input, in both engines, both with strict builtin errors or both
    with OPA's default (a builtin's error makes its call undefined); `form` (builtin, form) counts them there."""
    bundle = Bundle((Module("fuzz.rego", text),))
    try:
        oracle = OracleEngine(bundle, strict_builtin_errors=strict)
    except Exception:  # a compile error (PolicyLoadError), or the oracle's library refused it another way
        tally.refused_by_opa += 1
        if form:
            tally.count(*form, "refused by OPA")
        return
    try:
        try:
            engine = open_engine(bundle, EngineSettings(strict_builtin_errors=strict))
        except PolicyLoadError as exc:
            engine, refusal = None, cause("load: " + exc.message)
        tally.modules += 1
        package = "forms" if form else "fuzz"
        for value in inputs:
            for name in names:
                ref = f"data.{package}.{name}"
                theirs = oracle_answer(oracle, ref, value)
                mine = (ERROR, refusal) if engine is None else regokite_answer(engine, ref, value)
                kind = record(tally, text, value, ref, mine, theirs, form)
                if form:
                    tally.count(*form, kind)
    finally:
        oracle.close()


def run_forms(rng: random.Random, tally: Tally, builtin: str, shapes: bool, strict: bool = True) -> None:
    """`builtin` in every calling form (and, when `shapes`, each statement shape once)."""
    cases = rego_forms.builtin_cases(rng, builtin) + (rego_forms.shape_cases(rng) if shapes else [])
    for case in cases:
        names = ["r", "r2"] if "\nr2 " in case.module else ["r"]
        run_bundle(tally, case.module, names, list(case.inputs), (case.subject, case.form), strict=strict)


def record(
    tally: Tally, text: str, value: Any, ref: str, mine: Any, theirs: Any, form: tuple[str, str] | None = None
) -> str:
    kind = classify(mine, theirs)
    tally.cases += 1
    tally.classes[kind] += 1
    if kind == "fail-closed":
        tally.causes[mine[1]] += 1
    elif kind in ("answers where OPA errors", "different"):
        finding = {"class": kind, "module": text, "input": value, "rule": ref, "regokite": mine, "opa": theirs}
        if form:
            finding["builtin"], finding["form"] = form
        tally.findings.append(finding)
    return kind


def fuzz(
    seconds: float,
    seed: int,
    inputs: int = 3,
    max_modules: int | None = None,
    forms: bool = True,
    modules: bool = True,
    strict: bool = True,
) -> Tally:
    """Random modules until `seconds` or `max_modules` rounds; with `forms`, after each a builtin in every
    calling form (the builtins in turn, from a place the seed picks) and every tenth time the statement
    shapes. `modules` False: the forms alone. `strict`: both engines with strict builtin errors (as regokite
    asks of a sidecar OPA), else both with OPA's default (`opa eval`, Gatekeeper: the erring call undefined)."""
    rng = random.Random(seed)
    tally = Tally()
    deadline = time.monotonic() + seconds
    builtins = rego_forms.builtins()
    start = rng.randrange(len(builtins))
    count = 0
    while time.monotonic() < deadline and (max_modules is None or count < max_modules):
        if modules:
            run_module(rng, tally, inputs, strict)
        if forms:
            run_forms(rng, tally, builtins[(start + count) % len(builtins)], count % 10 == 0, strict)
        count += 1
    return tally


def report(tally: Tally, seconds: float, seed: int) -> str:
    lines = [
        f"seed {seed}: {tally.cases} cases ({tally.modules} modules x rules x inputs) in {seconds:.0f} s, "
        f"{tally.cases / max(seconds, 1e-9):.1f} cases/s; {tally.refused_by_opa} generated modules OPA refuses "
        "to compile (not cases)",
    ]
    lines += [f"  {name:26} {tally.classes[name]}" for name in CLASSES]
    if tally.causes:
        lines.append("fail-closed causes:")
        lines += [f"  {n:6} {c}" for c, n in tally.causes.most_common(25)]
    lines += form_table(tally)
    for finding in tally.findings[:5]:
        lines.append(f"--- {finding['class']}: {finding['rule']}")
        lines.append(finding["module"])
        lines.append(f"input: {canonical(finding['input'])}")
        lines.append(f"regokite: {canonical(finding['regokite'])}\nopa:      {canonical(finding['opa'])}")
    return "\n".join(lines)


FORM_COLUMNS = (
    ("same", "same"), ("order", "same set, other order"), ("numkey", "same but a number key's text"),
    ("botherr", "both error"), ("failclosed", "fail-closed"), ("answers", "answers where OPA errors"),
    ("DIFF", "different"), ("opa-refused", "refused by OPA"),
)  # fmt: skip


def form_table(tally: Tally) -> list[str]:
    """Cases per form (over every builtin and shape), then per builtin (over its forms)."""
    if not tally.by_form:
        return []
    header = f"  {'':34}" + "".join(f"{short:>12}" for short, _ in FORM_COLUMNS)
    lines = ["calling forms (cases per form, every builtin):", header]
    for title, key in (("form", 1), ("builtin or shape", 0)):
        totals: dict[str, Counter[str]] = {}
        for subject_form, counts in tally.by_form.items():
            totals.setdefault(subject_form[key], Counter()).update(counts)
        if key == 0:
            lines += [f"per {title}:", header]
        for name in sorted(totals):
            lines.append(f"  {name:34}" + "".join(f"{totals[name][full]:>12}" for _, full in FORM_COLUMNS))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--inputs", type=int, default=3, help="inputs per module")
    parser.add_argument("--save", type=Path, help="write each finding (different, answers where OPA errors) here")
    parser.add_argument("--no-forms", action="store_true", help="random modules only, no calling forms")
    parser.add_argument("--table", type=Path, help="write the per-builtin, per-form counts here as JSON")
    parser.add_argument(
        "--builtin-errors",
        choices=("strict", "default"),
        default="strict",
        help="strict: both engines with strict builtin errors; default: both as OPA's default (the call undefined)",
    )
    args = parser.parse_args(argv)
    started = time.monotonic()
    tally = fuzz(args.seconds, args.seed, args.inputs, forms=not args.no_forms, strict=args.builtin_errors == "strict")
    print(report(tally, time.monotonic() - started, args.seed))
    if args.table:
        table = [{"subject": k[0], "form": k[1], **v} for k, v in sorted(tally.by_form.items())]
        args.table.write_text(json.dumps(table, indent=1))
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for i, finding in enumerate(tally.findings):
            (args.save / f"finding-{args.seed}-{i}.json").write_text(json.dumps(finding, indent=1, ensure_ascii=False))
    return 1 if tally.findings else 0


if __name__ == "__main__":
    sys.exit(main())
