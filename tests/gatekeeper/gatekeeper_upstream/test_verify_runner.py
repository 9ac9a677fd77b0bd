"""gator verify's runner table tests (pkg/gator/verify/runner_test.go), run by `regokite verify`.

Each row of TestRunner_Run (a Suite, the files it reads, a filter, the
SuiteResult gator wants) and of TestRunner_RunCase (template, constraint,
object, assertions, the CaseResult wanted) becomes a suite directory of its
own; regokite's results must have gator's shape: the same tests and cases,
skipped where gator skips, failed (with any error) exactly where gator's
result holds an error. TestRunner_Run_Print's print() output is compared as
text. TestRunner_Run_ClientError injects a failing Go client: no input
reaches it, so it is no case of `regokite verify`.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from regokite.gatekeeper.verify import SUITE_API, Result, run_suite
from tests.gatekeeper.gatekeeper_upstream.go_literals import Call, Composite, Ref, string_constants, table
from tests.gatekeeper.gatekeeper_upstream.harness import gatekeeper, judge, material

RUNNER = "pkg/gator/verify/runner_test.go"
FIXTURES = "pkg/gator/fixtures/fixtures.go"


@cache
def rows(function: str) -> list[Composite]:
    return table((gatekeeper() / RUNNER).read_text(encoding="utf-8"), function)


@cache
def fixtures() -> dict[str, str]:
    return string_constants((gatekeeper() / FIXTURES).read_text(encoding="utf-8"))


def case_names(function: str) -> list[str]:
    path = material(RUNNER)
    if path is None or not path.is_file():
        return []
    return [str(row.fields["name"]) for row in rows(function)]


def text(value: Any) -> str:
    """A file's content as the table writes it: `[]byte(fixtures.X)`, `[]byte("...")` or a constant."""
    if isinstance(value, Call):
        return text(value.args[0])
    if isinstance(value, Ref):
        return fixtures()[value.name.rpartition(".")[2]]
    return str(value)


def assertion(a: Composite) -> dict[str, Any]:
    out: dict[str, Any] = {}
    violations = a.fields.get("Violations")
    if isinstance(violations, Call):  # gator.IntStrFromStr("no"), gator.IntStrFromInt(1)
        out["violations"] = violations.args[0]
    elif isinstance(violations, Composite):  # &intstr.IntOrString{Type: intstr.String, StrVal: "other"}
        kind = violations.fields.get("Type")
        # a Type that is neither Int nor String: in YAML, a value of neither kind
        out["violations"] = violations.fields.get("StrVal", "") if kind == Ref("intstr.String") else [kind]
    if "Message" in a.fields:
        out["message"] = a.fields["Message"].args[0]  # ptr.To[string]("...")
    return out


FIELDS = {"Name": "name", "Template": "template", "Constraint": "constraint", "Expansion": "expansion",
          "Invalid": "invalid", "Skip": "skip", "Object": "object"}  # fmt: skip


def suite_doc(suite: Composite) -> dict[str, Any]:
    """gator's Suite struct as the YAML a user writes."""
    doc: dict[str, Any] = {"kind": "Suite", "apiVersion": SUITE_API}
    if suite.fields.get("Skip"):
        doc["skip"] = True
    tests = []
    for t in suite.fields["Tests"].items if "Tests" in suite.fields else ():
        test = {FIELDS[k]: v for k, v in t.fields.items() if k in FIELDS}
        cases = []
        for c in t.fields["Cases"].items if "Cases" in t.fields else ():
            case = {FIELDS[k]: v for k, v in c.fields.items() if k in FIELDS}
            if "Inventory" in c.fields:
                case["inventory"] = list(c.fields["Inventory"].items)
            if "Assertions" in c.fields:
                case["assertions"] = [assertion(a) for a in c.fields["Assertions"].items]
            cases.append(case)
        if cases:
            test["cases"] = cases
        tests.append(test)
    doc["tests"] = tests
    return doc


def lay_out(root: Path, files: Composite, suite: dict[str, Any]) -> Path:
    for name, entry in files.fields.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text(entry.fields.get("Data", "")), encoding="utf-8")
    path = root / "regokite-suite.yaml"  # the table's suite has no file; no table file is named so
    path.write_text(yaml.safe_dump(suite, sort_keys=False), encoding="utf-8")
    return path


def differences(got: Result, want: Composite | None, where: str) -> list[str]:
    """Where regokite's result has another shape than gator's: skipped, failed, tests and cases, names."""
    fields = want.fields if want is not None else {}
    out = []
    if bool(fields.get("Skipped")) != got.skipped:
        out.append(f"{where}: skipped {got.skipped}, gator {bool(fields.get('Skipped'))}")
    if "Name" in fields and fields["Name"] != got.name:
        out.append(f"{where}: named {got.name!r}, gator {fields['Name']!r}")
    own_error = got.error is not None
    if ("Error" in fields and fields["Error"] is not None) != own_error:
        out.append(f"{where}: error {got.error!r}, gator {fields.get('Error')}")
    children_field = next((f for f in ("TestResults", "CaseResults") if f in fields), None)
    wanted = list(fields[children_field].items) if children_field else []
    if len(wanted) != len(got.children):
        return [*out, f"{where}: {len(got.children)} results, gator {len(wanted)}"]
    for i, (mine, theirs) in enumerate(zip(got.children, wanted, strict=True)):
        out += differences(mine, theirs, f"{where}[{i}]")
    return out


@pytest.mark.parametrize("name", case_names("TestRunner_Run"))
def test_runner_table(name: str, tmp_path: Path) -> None:
    row = next(r for r in rows("TestRunner_Run") if r.fields["name"] == name)

    def run() -> str | None:
        path = lay_out(tmp_path, row.fields.get("f") or Composite("", {}, ()), suite_doc(row.fields["suite"]))
        got = run_suite(path, run=row.fields.get("filter") or None)
        return "; ".join(differences(got, row.fields["want"], "suite")) or None

    judge(f"verify-runner/{name}", run)


def one_case(tmp_path: Path, files: dict[str, str], case: dict[str, Any]) -> Result:
    """The result of a suite with one test (template.yaml, constraint.yaml) and one case."""
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    test = {"template": "template.yaml", "constraint": "constraint.yaml", "cases": [case]}
    path = tmp_path / "regokite-suite.yaml"
    path.write_text(yaml.safe_dump({"kind": "Suite", "apiVersion": SUITE_API, "tests": [test]}), encoding="utf-8")
    (result,) = run_suite(path).children
    return result


@pytest.mark.parametrize("name", case_names("TestRunner_RunCase"))
def test_runner_case_table(name: str, tmp_path: Path) -> None:
    row = next(r for r in rows("TestRunner_RunCase") if r.fields["name"] == name)

    def run() -> str | None:
        files = {f"{f}.yaml": text(row.fields[f]) for f in ("template", "constraint", "object")}
        case: dict[str, Any] = {"object": "object.yaml"}
        if row.fields.get("assertions") is not None:
            case["assertions"] = [assertion(a) for a in row.fields["assertions"].items]
        test = one_case(tmp_path, files, case)
        if test.error is not None:
            return f"the test failed: {test.error}"
        return "; ".join(differences(test.children[0], row.fields["want"], "case")) or None

    judge(f"verify-runner-case/{name}", run)


def test_runner_print(tmp_path: Path) -> None:
    """TestRunner_Run_Print: a case's print() output is its result's Print (shown by -v)."""

    def run() -> str | None:
        names = {"template": "TemplateAlwaysValidate", "constraint": "ConstraintAlwaysValidate", "object": "Object"}
        files = {f"{f}.yaml": fixtures()[n] for f, n in names.items()}
        (got,) = one_case(tmp_path, files, {"object": "object.yaml", "assertions": [{"violations": "no"}]}).children
        want = "a debug message (Object)\n"
        return None if got.error is None and got.printed == want else f"printed {got.printed!r}, error {got.error}"

    judge("verify-runner/TestRunner_Run_Print", run)
