"""OPA's conformance cases through regokite's full path, judged as OPA's own runner judges them.

The cases are OPA's YAML files (v1/test/cases/testdata/{v1,v0}), read unchanged from
`../shared/upstream/opa-conformance/cases` beside the repository. Each runs as `regokite eval`
runs a query: its modules written as `test-<i>.rego` (and its `data` as `data.json`) into a
directory, `EngineSettings.load` (v0 folders parsed as Rego v0), `open_engine`, `query`. The
result is judged as OPA's `testRun` / `testAssertResultSet` (v1/topdown/exported_test.go) do:

* `want_result` is a SET of binding objects, one per solution (a query without variables gives
  `[{}]` when it succeeds, `[]` when it is undefined); a query's expression whose value is
  `false` fails that solution (topdown), generated variables (`__localq*`, `$*`) are not part of
  it, numbers compare by value;
* `sort_bindings`: every array bound in a solution is sorted (OPA's order) before comparing;
* `want_error` / `want_error_code`: the evaluation must fail (any error: the text is OPA's);
* `input_term`: a Rego term; one JSON cannot hold (a set) is given as `with input as <term>`;
* `strict_error`: a builtin's error is an error; otherwise OPA makes the call undefined.

Every case lands in one class: `pass`, `fail-closed` (regokite refused where OPA answers: at
load or as an evaluation error), `different` (both answered, otherwise) or `answered` (regokite
answered where OPA errs). tests/engine/test_opa_conformance.py holds the rules;
`python3 -m tests.engine.opa_conformance` prints the classes (`--show CLASS` each case of one,
`--update` rewrites the listed file: its header says how).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import cmp_to_key
from pathlib import Path
from typing import Any

import yaml

from regokite import yamldoc
from regokite.engine import UNDEFINED, EngineSettings, open_engine
from regokite.errors import RegokiteError

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT.parent / "shared" / "upstream" / "opa-conformance" / "cases"
LISTED = Path(__file__).with_name("opa_conformance_listed.yaml")

PASS, FAIL_CLOSED, DIFFERENT, ANSWERED = "pass", "fail-closed", "different", "answered-where-OPA-errors"
CLASSES = (PASS, FAIL_CLOSED, DIFFERENT, ANSWERED)


@dataclass(frozen=True)
class Case:
    id: str  # v1/<dir>/<file>.yaml#<index>: stable, since the files are OPA's, unchanged
    note: str
    variant: str  # "v1" or "v0": how the modules are parsed
    spec: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    case: Case
    kind: str  # one of CLASSES
    detail: str  # the refusal, or what differs


def cases(root: Path = CASES) -> Iterator[Case]:
    """Every case of every file, in file order."""
    for file in sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml")):
        relative = file.relative_to(root).as_posix()
        for index, spec in enumerate(yamldoc.load(file.read_text(encoding="utf-8"))["cases"]):
            yield Case(f"{relative}#{index}", spec["note"], relative.split("/")[0], spec)


def run(case: Case) -> Verdict:
    spec = case.spec
    wants_error = spec.get("want_error") is not None or spec.get("want_error_code") is not None
    with tempfile.TemporaryDirectory(prefix="opa-case-") as directory:
        try:
            solutions = _solutions(case, Path(directory))
        except Exception as exc:  # a RegokiteError, or regokite failed without saying why: no answer either way
            said = str(exc) if isinstance(exc, RegokiteError) else f"uncaught {type(exc).__name__}: {exc}"
            return Verdict(case, PASS if wants_error else FAIL_CLOSED, said.replace(f"{directory}/", ""))
    if wants_error:
        return Verdict(case, ANSWERED, f"OPA errs ({_wanted_error(spec)}); regokite: {_short(solutions)}")
    wanted = {_canonical(_solution(b, sort=False)) for b in spec["want_result"]}
    sort = bool(spec.get("sort_bindings"))
    got = {_canonical(_solution(b, sort=sort)) for b in solutions}
    if got == wanted:
        return Verdict(case, PASS, "")
    return Verdict(case, DIFFERENT, f"OPA {_short(spec['want_result'])}; regokite {_short(solutions)}")


def _solutions(case: Case, directory: Path) -> list[dict[str, Any]]:
    """The query's solutions in regokite, as `regokite eval -d directory` computes them (with
    `--strict-builtin-errors` where the case is strict)."""
    spec = case.spec
    query, input = spec["query"], spec.get("input", UNDEFINED)
    if spec.get("input_term") is not None:
        query, input = _with_input_term(query, spec["input_term"])
    for index, module in enumerate(spec.get("modules") or ()):
        (directory / f"test-{index}.rego").write_text(module, encoding="utf-8")
    if spec.get("data") is not None:
        (directory / "data.json").write_text(json.dumps(spec["data"]), encoding="utf-8")
    # regokite eval, with --strict-builtin-errors where the case is strict (OPA's default otherwise)
    settings = EngineSettings(v0_compatible=case.variant == "v0", strict_builtin_errors=bool(spec.get("strict_error")))
    bundle = settings.load([directory]).without_tests()
    engine = open_engine(bundle, settings)
    try:
        results = engine.query(query, input)
    finally:
        engine.close()
    # topdown: an expression that is `false` fails the solution; regorus reports its value
    return [r.get("bindings") or {} for r in results if all(e.get("value") is not False for e in r["expressions"])]


def _with_input_term(query: str, term: str) -> tuple[str, Any]:
    try:
        return query, json.loads(term)
    except ValueError:
        pass
    if ";" in query or "\n" in query.strip():
        raise AssertionError(f"harness: input_term {term!r} with a query of several expressions: {query!r}")
    return f"{query} with input as {term}", UNDEFINED


def _wanted_error(spec: dict[str, Any]) -> str:
    return " ".join(str(spec[k]) for k in ("want_error_code", "want_error") if spec.get(k) is not None)


def _generated(name: str) -> bool:
    return name.startswith(("__localq", "$"))


def _solution(bindings: dict[str, Any], *, sort: bool) -> dict[str, Any]:
    out = {}
    for name, value in bindings.items():
        if _generated(name):
            continue
        out[name] = sorted(value, key=cmp_to_key(opa_compare)) if sort and isinstance(value, list) else value
    return out


_ORDER = {type(None): 0, bool: 1, int: 2, float: 2, str: 3, list: 4, dict: 5}


def opa_compare(a: Any, b: Any) -> int:
    """OPA's order of JSON values: null < booleans < numbers < strings < arrays < objects."""
    ra, rb = _ORDER[type(a)], _ORDER[type(b)]
    if ra != rb:
        return -1 if ra < rb else 1
    if ra == 2:
        a, b = Decimal(str(a)), Decimal(str(b))
    elif ra == 4:
        for x, y in zip(a, b, strict=False):
            if c := opa_compare(x, y):
                return c
        a, b = len(a), len(b)
    elif ra == 5:
        ka, kb = sorted(a), sorted(b)
        for x, y in zip(ka, kb, strict=False):
            if c := opa_compare(x, y) or opa_compare(a[x], b[y]):
                return c
        a, b = len(ka), len(kb)
    return (a > b) - (a < b)


def _canonical(value: Any) -> Any:
    """A hashable form equal where OPA's values are equal (1 == 1.0; true != 1)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", Decimal(str(value)).normalize())
    if isinstance(value, list):
        return ("array", tuple(_canonical(v) for v in value))
    return ("object", tuple(sorted((k, _canonical(v)) for k, v in value.items())))


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- the listed file: which cases may fail closed, and why ---


@dataclass
class Group:
    reason: str  # why regokite refuses these cases, and whose work lifts it
    refusal: str  # a regular expression every listed case's refusal matches
    cases: list[str]  # "<id> <note>"

    def matches(self, refusal: str) -> bool:
        return re.search(self.refusal, refusal) is not None


def read_listed(path: Path = LISTED) -> list[Group]:
    document = yamldoc.load(path.read_text(encoding="utf-8")) or {}
    return [Group(g["reason"], g["refusal"], list(g.get("cases") or ())) for g in document.get("listed") or ()]


def listed_ids(groups: list[Group]) -> dict[str, Group]:
    return {entry.split(" ", 1)[0]: group for group in groups for entry in group.cases}


def write_listed(groups: list[Group], path: Path = LISTED) -> None:
    header = (
        "# OPA conformance cases regokite may fail closed on (refuse where OPA answers), each with its reason.\n"
        "# tests/engine/test_opa_conformance.py fails when a case fails closed without being listed here, when a\n"
        "# listed case's refusal does not match its group's `refusal`, and when a listed case passes (delete it).\n"
        "# A case that answers otherwise than OPA, or answers where OPA errs, is never allowed, listed or not.\n"
        "# `python3 -m tests.engine.opa_conformance --update` drops passing cases and adds new refusals.\n"
    )
    document = {"listed": [{"reason": g.reason, "refusal": g.refusal, "cases": g.cases} for g in groups if g.cases]}
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)
    path.write_text(header + text, encoding="utf-8")


def update_listed(verdicts: list[Verdict], groups: list[Group]) -> list[Group]:
    """The groups without the cases that no longer fail closed, and with each new refusal (or one no
    longer matching its group) added to the first group whose `refusal` matches it, else to a new
    group whose reason says to write one."""
    failing = {v.case.id: v for v in verdicts if v.kind == FAIL_CLOSED}
    for group in groups:  # a case now refused for another reason moves to the group of that reason
        group.cases = [c for c in group.cases if c.split(" ", 1)[0] in failing]
        group.cases = [c for c in group.cases if group.matches(failing[c.split(" ", 1)[0]].detail)]
    known = listed_ids(groups)
    for verdict in failing.values():
        if verdict.case.id in known:
            continue
        entry = f"{verdict.case.id} {verdict.case.note}"
        home = next((g for g in groups if g.matches(verdict.detail)), None)
        if home is None:
            home = Group("TODO: say why, and whose work lifts it", re.escape(verdict.detail[:80]), [])
            groups.append(home)
        home.cases.append(entry)
    return groups


def run_all(root: Path = CASES) -> list[Verdict]:
    return [run(case) for case in cases(root)]


def summary(verdicts: list[Verdict]) -> str:
    lines = []
    for variant in sorted({v.case.variant for v in verdicts}, reverse=True):
        counts = Counter(v.kind for v in verdicts if v.case.variant == variant)
        total = sum(counts.values())
        parts = ", ".join(f"{counts[k]} {k}" for k in CLASSES)
        lines.append(f"{variant}: {total} cases: {parts} ({100 * counts[PASS] / total:.1f}% pass)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--show", choices=CLASSES, action="append", default=[], help="list every case of CLASS")
    parser.add_argument("--update", action="store_true", help="rewrite the listed file from this run")
    args = parser.parse_args(argv)
    verdicts = run_all()
    for verdict in verdicts:
        if verdict.kind in args.show:
            print(f"{verdict.kind}: {verdict.case.id} {verdict.case.note}\n    {verdict.detail[:400]}")
    print(summary(verdicts))
    if args.update:
        write_listed(update_listed(verdicts, read_listed()))
        print(f"wrote {LISTED.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
