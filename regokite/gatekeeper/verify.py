"""`regokite verify`: run gator's Suite files (`test.gatekeeper.sh/v1alpha1`).

A Suite lists tests (a template, a constraint) and cases (an object, or an
AdmissionReview, under review; inventory objects for `data.inventory`;
assertions `violations: yes|no|N`, optionally only counting messages that
match a `message` regex). Each case is judged as Gatekeeper would: the
constraint's match first, then the template's `violation` under
`input.review` and `input.parameters`. Output and exit code follow
`gator verify`: `ok`/`FAIL` per suite, `--- FAIL:` lines per test and case,
1 when anything failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regokite import yamldoc
from regokite.bundle import Bundle, Module
from regokite.engine import UNDEFINED, Engine, EngineSettings, open_engine
from regokite.engine.embedded import print_log
from regokite.errors import EvaluationError, RegokiteError
from regokite.gatekeeper.compile import violation_ref
from regokite.gatekeeper.constraints import prepare, read_sources
from regokite.gatekeeper.enforcement import GATOR
from regokite.gatekeeper.expand import ExpansionFailed, expand_resource
from regokite.gatekeeper.expansion import MESSAGE_PREFIX, generated_modules, refuse_cycles
from regokite.gatekeeper.inventory import inventory, namespaces
from regokite.gatekeeper.match import (
    ConstraintMatch,
    NamespaceLookup,
    NamespaceUnknown,
    namespace_object,
    review_namespace,
)
from regokite.gatekeeper.resources import is_constraint, is_template, parse_constraint, parse_template, read_documents
from regokite.gatekeeper.violations import evaluation_violation, go_duration

SUITE_GROUP = "test.gatekeeper.sh"
SCHEMA_ERROR = "spec.parameters"  # a constraint refused by its template's parameters schema names the field
SUITE_API = f"{SUITE_GROUP}/v1alpha1"


@dataclass
class Result:
    name: str
    seconds: float = 0.0
    error: str | None = None
    skipped: bool = False
    children: list[Result] = field(default_factory=list)
    printed: str = ""  # what the policies print()ed in a case, a line each (gator's Print)

    @property
    def failed(self) -> bool:
        return self.error is not None or any(c.failed for c in self.children)


class CaseFailure(RegokiteError):
    pass


def find_suites(paths: Iterable[str]) -> list[Path]:
    """Suite files below `paths`, as gator finds them: `.yaml`/`.yml` files whose first document is
    of kind `Suite` in the `test.gatekeeper.sh` group (YAML or JSON text). `DIR/...` (gator's form)
    and `DIR` both search DIR and every directory below it."""
    found = []
    for given in paths:
        recursive = given.endswith("/...") or given == "..."
        root = Path(given[: -len("...")] or ".") if recursive else Path(given)
        if not root.exists():
            raise RegokiteError(f"{given}: no such file or directory")
        if recursive and not root.is_dir():
            raise RegokiteError(f"can only recursively traverse directories, not a directory: {str(root)!r}")
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml"))
        found += [path for path in files if _is_suite(path)]
    return found


def _is_suite(path: Path) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace")
    if SUITE_GROUP not in text:
        return False  # cheap: no Suite names its group otherwise
    try:
        doc = next(iter(yamldoc.load_all(text)), None)
    except yamldoc.YAMLError as exc:
        raise RegokiteError(f"invalid yaml: parsing yaml file {str(path)!r}: {exc}") from None
    api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
    return isinstance(api_version, str) and api_version.partition("/")[0] == SUITE_GROUP and doc.get("kind") == "Suite"


def run_suite(path: Path, *, run: str | None = None, engine: EngineSettings | None = None) -> Result:
    started = time.monotonic()
    result = Result(str(path))
    try:
        suite = next(iter(yamldoc.load_all(path.read_text(encoding="utf-8"))), None)
        tests = suite.get("tests") or [] if isinstance(suite, dict) else None
        if not isinstance(tests, list):
            raise RegokiteError(f"{path}: tests must be a list")
        if suite.get("skip") is True:  # gator skips the whole suite
            result.skipped = True
            return result
        chosen = RunFilter(run)
        for test in tests:
            skipped = bool(test.get("skip")) or not chosen.test(test)
            name = str(test.get("name", ""))
            result.children.append(
                Result(name, skipped=True) if skipped else _run_test(path.parent, test, chosen, engine)
            )
    except (RegokiteError, OSError, yamldoc.YAMLError, AttributeError) as exc:
        result.error = str(exc)
    result.seconds = time.monotonic() - started
    return result


class RunFilter:
    """gator's `--run`: `TEST//CASE` runs the cases matching CASE in tests matching TEST; a single
    regex runs the tests and cases whose name (or whose test's name) matches. The rest are skipped."""

    def __init__(self, run: str | None) -> None:
        parts = run.split("//") if run else []
        if len(parts) > 2:
            raise RegokiteError('invalid test filter: a filter may include at most one "//"')
        try:
            self._patterns = [re.compile(p) for p in parts]
        except re.error as exc:
            raise RegokiteError(f"invalid test filter: {exc}") from None

    def test(self, test: dict[str, Any]) -> bool:
        name = str(test.get("name", ""))
        if len(self._patterns) == 2:
            return bool(self._patterns[0].search(name))
        return any(self.case(name, str(c.get("name", ""))) for c in test.get("cases") or []) or self.case(name, "")

    def case(self, test: str, case: str) -> bool:
        if not self._patterns:
            return True
        if len(self._patterns) == 2:
            return bool(self._patterns[0].search(test) and self._patterns[1].search(case))
        return bool(self._patterns[0].search(case) or self._patterns[0].search(test))


def _run_test(base: Path, test: dict[str, Any], chosen: RunFilter, engine: EngineSettings | None) -> Result:
    started = time.monotonic()
    result = Result(str(test.get("name", "")))
    try:
        template = _one(base, test.get("template"), is_template, "template", "ConstraintTemplate")
        constraint = _one(base, test.get("constraint"), is_constraint, "constraint", "Constraint")
        tpl = parse_template(template[0], template[1], str(base / test["template"]))
        con = parse_constraint(constraint[0], str(base / test["constraint"]))
        ready = prepare([tpl], [con], engine=engine)
        if test.get("invalid") is True:  # the constraint must fail its template's parameters schema
            _want_schema_error(ready.problems)
            result.seconds = time.monotonic() - started
            return result
        if ready.problems:
            raise RegokiteError("\n".join(ready.problems))
        expansion = _expansion(base, test.get("expansion"))
        judge = _Judge(ready, engine, expansion)
        for case in test.get("cases") or []:
            name = str(case.get("name", ""))
            selected = not case.get("skip") and chosen.case(result.name, name)
            result.children.append(judge.run(base, case) if selected else Result(name, skipped=True))
    except (RegokiteError, OSError, yamldoc.YAMLError, KeyError) as exc:
        result.error = str(exc)
    result.seconds = time.monotonic() - started
    return result


def _one(base: Path, relative: Any, accept: Any, field: str, what: str) -> tuple[dict[str, Any], Any]:
    """The one object of a test's `template` or `constraint` file (gator's errors when not)."""
    if not isinstance(relative, str) or not relative:
        raise RegokiteError(f"invalid Suite: missing {field}")
    path = base / relative
    if not path.is_file():
        raise RegokiteError(f"open {path}: no such file or directory")
    found = [(d, n) for d, n in read_documents(path, str(path)) if d is not None]
    if len(found) != 1:
        raise RegokiteError(f"{path}: object file must contain exactly one object, found {len(found)}")
    if not accept(found[0][0]):
        raise RegokiteError(f"not a {what}: {path}")
    return found[0]


def _want_schema_error(problems: Sequence[str]) -> None:
    """A test marked `invalid: true` passes only when its constraint is refused by the template's
    parameters schema, as gator's (no other error will do)."""
    schema = [p for p in problems if SCHEMA_ERROR in p]
    if not schema:
        got = "; ".join(problems) or "none"
        raise RegokiteError(f"constraint should have failed schema validation: got error {got} but want schema error")


def _expansion(base: Path, relative: Any) -> tuple[Module, ...]:
    """A test's `expansion` file (ExpansionTemplates, and mutators for the expanded resources) as Rego."""
    if relative is None:
        return ()
    if not isinstance(relative, str):
        raise RegokiteError("the test's expansion must name a file")
    sources = read_sources([base / relative])
    if sources.problems:
        raise RegokiteError("\n".join(sources.problems))
    if not sources.expansions:
        raise RegokiteError(f"{base / relative}: no ExpansionTemplate")
    refuse_cycles(sources.expansions)
    return generated_modules(sources.mutators, sources.expansions)


class _Judge:
    """Evaluates cases of one test; one engine per distinct inventory."""

    def __init__(self, ready: Any, engine: EngineSettings | None, expansion: tuple[Module, ...] = ()) -> None:
        self.ready = ready
        self.constraint = ready.constraints[0]
        self.engine = engine
        self.expansion = expansion
        self._engines: dict[tuple[str, ...], Engine] = {}

    def run(self, base: Path, case: dict[str, Any]) -> Result:
        started = time.monotonic()
        result = Result(str(case.get("name", "")))
        try:
            with _printed(result):
                self._judge(base, case)
        except (RegokiteError, OSError, yamldoc.YAMLError) as exc:
            result.error = str(exc)
        result.seconds = time.monotonic() - started
        return result

    def _judge(self, base: Path, case: dict[str, Any]) -> None:
        if not case.get("object"):
            raise CaseFailure("invalid Case: must define object")
        assertions = case.get("assertions") or []
        if not assertions:
            raise CaseFailure("invalid Case: assertions must be non-empty")
        messages = self._violations(base, case)
        for assertion in assertions:
            _check(assertion, messages)

    def _violations(self, base: Path, case: dict[str, Any]) -> list[str]:
        inventory_files = tuple(case.get("inventory") or ())
        objects = [_load_object(base / f) for f in inventory_files]
        lookup = namespaces(objects).get
        match = dataclasses.replace(self.constraint.match, lookup=lookup)
        request = with_namespace(review_request(_load_object(base / str(case.get("object")))), lookup)
        engine = self._engines.get(inventory_files)
        if engine is None:
            data = {"inventory": inventory(objects), "kubernetes": {"namespaces": namespaces(objects)}}
            bundle = Bundle((*self.ready.modules, *self.expansion), data)
            engine = self._engines[inventory_files] = open_engine(bundle, self.engine)
        if not self.constraint.constraint.enforcement.at(GATOR):
            return []  # a scoped constraint whose enforcement points leave out gator: not applied
        messages = self._matching(engine, match, request, "Original")
        if not self.expansion:
            return messages
        try:
            results = expand_resource(engine, request, namespaces(objects))
        except ExpansionFailed as exc:
            raise CaseFailure(f"expanding resource {request.get('name', '')}: {exc}") from None
        for resultant in results:
            prefix = MESSAGE_PREFIX.format(resultant["template"])
            child = with_namespace(review_request(resultant["object"]), lookup)
            messages += [f"{prefix} {m}" for m in self._matching(engine, match, child, "Generated")]
        return messages

    def _matching(self, engine: Engine, match: ConstraintMatch, request: dict[str, Any], source: str) -> list[str]:
        """The violations of a request the constraint matches; one that cannot be matched (its Namespace
        missing) is Gatekeeper's autorejection, which gator counts as a violation."""
        try:
            if not match.matches(request, source=source):
                return []
        except NamespaceUnknown as exc:
            return [exc.gatekeeper]
        return self._judged(engine, request)

    def _judged(self, engine: Engine, request: dict[str, Any]) -> list[str]:
        parameters = self.constraint.constraint.parameters
        try:
            value = engine.evaluate(
                violation_ref(self.constraint.constraint.kind),
                {"review": request, "parameters": parameters if parameters is not None else {}},
            )
        except EvaluationError as exc:
            strict = self.engine is not None and self.engine.strict_builtin_errors
            violation = evaluation_violation(exc, strict)  # gator's driver: the template's error is a violation
            if violation is None:
                raise
            return [violation]
        if value is UNDEFINED:
            return []
        messages = []
        for v in value:
            if not (isinstance(v, dict) and isinstance(v.get("msg"), str)):
                raise CaseFailure(f'a violation must be an object with a string "msg", got {v!r}')
            messages.append(v["msg"])
        return messages


@contextlib.contextmanager
def _printed(result: Result) -> Iterator[None]:
    """What the policies print() while a case runs, kept in its result (gator shows it with -v) instead
    of the log (embedded engine: its `policy print` lines)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(str(getattr(record, "output", record.getMessage())))

    handler, saved = Collect(), (print_log.level, print_log.propagate)
    print_log.addHandler(handler)
    print_log.setLevel(logging.INFO)
    print_log.propagate = False
    try:
        yield
    finally:
        print_log.removeHandler(handler)
        print_log.setLevel(saved[0])
        print_log.propagate = saved[1]
        result.printed = "".join(f"{line}\n" for line in lines)


def _load_object(path: Path) -> dict[str, Any]:
    docs = [d for d in yamldoc.load_all(path.read_text(encoding="utf-8")) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise RegokiteError(f"{path}: expected one Kubernetes object")
    return docs[0]


def review_request(obj: dict[str, Any]) -> dict[str, Any]:
    """The AdmissionRequest gator reviews: an AdmissionReview's request, or one made for an object."""
    if obj.get("kind") == "AdmissionReview" and isinstance(obj.get("request"), dict):
        request = dict(obj["request"])
        subject = request.get("object") or request.get("oldObject") or {}
        request.setdefault("kind", _gvk(subject))
        return request
    meta = obj.get("metadata") or {}
    request = {"kind": _gvk(obj), "operation": "CREATE", "object": obj, "name": meta.get("name", "")}
    if meta.get("namespace"):
        request["namespace"] = meta["namespace"]
    return request


def with_namespace(request: dict[str, Any], lookup: NamespaceLookup) -> dict[str, Any]:
    """The request with `namespaceObject`: its Namespace when the case's inventory holds it, else `{}`
    (gator's always: a Namespace given is what the cluster would fill it with)."""
    if "namespaceObject" in request:
        return request
    return {**request, "namespaceObject": review_namespace(namespace_object(request, lookup)[1])}


def _gvk(obj: Any) -> dict[str, str]:
    if not isinstance(obj, dict):
        return {}
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    return {"group": group, "version": version, "kind": str(obj.get("kind", ""))}


def _check(assertion: dict[str, Any], messages: list[str]) -> None:
    """One assertion, with gator's errors: `violations` yes (the default), no, or a count of the
    messages matching `message` (a regular expression; unset or empty, every message)."""
    pattern = assertion.get("message")
    try:
        counted = [m for m in messages if re.search(pattern, m)] if pattern else messages
    except (re.error, TypeError) as exc:
        raise CaseFailure(f"message contains invalid regular expression: {exc}: {pattern!r}") from None
    want = assertion.get("violations", "yes")
    about = f" containing {json.dumps(pattern)}" if pattern else ""
    if want is True or want == "yes":
        ok, expected = bool(counted), "at least 1"
    elif want is False or want == "no":
        ok, expected = not counted, "none"
    elif isinstance(want, int) and want >= 0:
        ok, expected = len(counted) == want, f"exactly {want}"
    else:
        raise CaseFailure('invalid yaml: assertion.violation, if set, must be a nonnegative integer, "yes", or "no"')
    if not ok:
        raise CaseFailure(
            f"unexpected number of violations: got {len(counted)} violations{about} but want {expected}: "
            f"got messages [{' '.join(messages)}]"
        )


def format_results(results: Sequence[Result], *, verbose: bool = False) -> str:
    """gator's text (its Go printer): per failing test and case `--- FAIL:` with the error, per
    suite `ok` or `FAIL`, then PASS or FAIL; `-v` adds `=== RUN`, `=== SKIP` and `--- PASS:`."""
    lines: list[str] = []
    for suite in results:
        for test in suite.children:
            _test_lines(test, verbose, lines)
        lines.append(f"{'FAIL' if suite.failed else 'ok'}\t{suite.name}\t{go_duration(suite.seconds)}")
        if suite.error:
            lines.append(f"  {suite.error}")
    lines.append("FAIL" if any(r.failed for r in results) else "PASS")
    return "\n".join(lines)


def _test_lines(test: Result, verbose: bool, out: list[str]) -> None:
    if verbose:
        out.append(f"=== {'SKIP ' if test.skipped else 'RUN  '} {test.name}")
        if test.skipped:
            return
    for case in test.children:
        if verbose:
            out.append(f"    === {'SKIP ' if case.skipped else 'RUN  '} {case.name}")
            if case.skipped:
                continue
            if case.printed:
                out += ["        === PRINT ===", *(f"        {line}" for line in case.printed.splitlines())]
        if case.error is not None:
            out.append(f"    --- FAIL: {case.name}\t({go_duration(case.seconds)})")
            out.extend(f"        {line}" for line in case.error.splitlines())
        elif verbose and not case.skipped:
            out.append(f"    --- PASS: {case.name}\t({go_duration(case.seconds)})")
    if test.failed:
        out.append(f"--- FAIL: {test.name}\t({go_duration(test.seconds)})")
        if test.error:
            out.extend(f"  {line}" for line in test.error.splitlines())
    elif verbose:
        out.append(f"--- PASS: {test.name}\t({go_duration(test.seconds)})")


def counts(results: Sequence[Result]) -> dict[str, int]:
    """Suites, tests and cases run and passed."""
    tests = [t for s in results for t in s.children if not t.skipped]
    cases = [c for t in tests for c in t.children if not c.skipped]
    return {
        "suites": len(results),
        "suites_passed": sum(not s.failed for s in results),
        "tests": len(tests),
        "tests_passed": sum(not t.failed for t in tests),
        "cases": len(cases),
        "cases_passed": sum(not c.failed for c in cases),
    }
