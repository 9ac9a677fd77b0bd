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

import dataclasses
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regokite import yamldoc
from regokite.bundle import Bundle, Module
from regokite.engine import UNDEFINED, Engine, EngineSettings, open_engine
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
from regokite.gatekeeper.violations import evaluation_violation

SUITE_API = "test.gatekeeper.sh/v1alpha1"


@dataclass
class Result:
    name: str
    seconds: float = 0.0
    error: str | None = None
    skipped: bool = False
    children: list[Result] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.error is not None or any(c.failed for c in self.children)


class CaseFailure(RegokiteError):
    pass


def find_suites(paths: Iterable[str]) -> list[Path]:
    """Suite files below `paths`: YAML whose kind is Suite."""
    found = []
    for root in map(Path, paths):
        if not root.exists():
            raise RegokiteError(f"{root}: no such file or directory")
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml"))
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            if re.search(r"^kind:\s*Suite\s*$", text, re.MULTILINE) and SUITE_API in text:
                found.append(path)
    return found


def run_suite(path: Path, *, run: str | None = None, engine: EngineSettings | None = None) -> Result:
    started = time.monotonic()
    result = Result(str(path))
    try:
        suite = yamldoc.load(path.read_text(encoding="utf-8"))
        tests = suite.get("tests") or [] if isinstance(suite, dict) else None
        if not isinstance(tests, list):
            raise RegokiteError(f"{path}: tests must be a list")
        pattern = re.compile(run) if run else None
        for test in tests:
            name = str(test.get("name", ""))
            cases = test.get("cases") or []
            chosen = [c for c in cases if pattern is None or _selected(pattern, name, str(c.get("name", "")))]
            if pattern is not None and not chosen and not pattern.search(name):
                continue
            result.children.append(_run_test(path.parent, test, chosen, engine))
    except (RegokiteError, OSError, yamldoc.YAMLError, AttributeError) as exc:
        result.error = str(exc)
    result.seconds = time.monotonic() - started
    return result


def _selected(pattern: re.Pattern[str], test: str, case: str) -> bool:
    return bool(pattern.search(test) or pattern.search(case) or pattern.search(f"{test}/{case}"))


def _run_test(
    base: Path, test: dict[str, Any], cases: Sequence[dict[str, Any]], engine: EngineSettings | None
) -> Result:
    started = time.monotonic()
    result = Result(str(test.get("name", "")), skipped=bool(test.get("skip")))
    if result.skipped:
        return result
    try:
        template = _one(base, test.get("template"), is_template, "ConstraintTemplate")
        constraint = _one(base, test.get("constraint"), is_constraint, "constraint")
        tpl = parse_template(template[0], template[1], str(base / test["template"]))
        con = parse_constraint(constraint[0], str(base / test["constraint"]))
        ready = prepare([tpl], [con], engine=engine)
        if ready.problems:
            raise RegokiteError("\n".join(ready.problems))
        expansion = _expansion(base, test.get("expansion"))
        judge = _Judge(ready, engine, expansion)
        for case in cases:
            result.children.append(judge.run(base, case))
    except (RegokiteError, OSError, yamldoc.YAMLError, KeyError) as exc:
        result.error = str(exc)
    result.seconds = time.monotonic() - started
    return result


def _one(base: Path, relative: Any, accept: Any, what: str) -> tuple[dict[str, Any], Any]:
    if not isinstance(relative, str):
        raise RegokiteError(f"the test names no {what} file")
    path = base / relative
    found = [(d, n) for d, n in read_documents(path, str(path)) if accept(d)]
    if len(found) != 1:
        raise RegokiteError(f"{path}: expected one {what}, found {len(found)}")
    return found[0]


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
        result = Result(str(case.get("name", "")), skipped=bool(case.get("skip")))
        if not result.skipped:
            try:
                messages = self._violations(base, case)
                for i, assertion in enumerate(case.get("assertions") or []):
                    _check(assertion, messages, i)
            except (RegokiteError, OSError, yamldoc.YAMLError) as exc:
                result.error = str(exc)
        result.seconds = time.monotonic() - started
        return result

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
            results = expand_resource(engine, request)
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


def _check(assertion: dict[str, Any], messages: list[str], index: int) -> None:
    pattern = assertion.get("message")
    counted = [m for m in messages if re.search(pattern, m)] if isinstance(pattern, str) else messages
    want = assertion.get("violations", "yes")
    about = f" matching {pattern!r}" if isinstance(pattern, str) else ""
    if want is True or want == "yes":
        ok, expected = bool(counted), "at least 1"
    elif want is False or want == "no":
        ok, expected = not counted, "0"
    elif isinstance(want, int):
        ok, expected = len(counted) == want, str(want)
    else:
        raise CaseFailure(f"assertion {index}: violations must be yes, no or a number, got {want!r}")
    if not ok:
        shown = "; ".join(messages) or "none"
        raise CaseFailure(
            f"assertion {index}: got {len(counted)} violations{about}, want {expected} (violations: {shown})"
        )


def format_results(results: Sequence[Result], *, verbose: bool = False) -> str:
    """gator's text: per failing test and case `--- FAIL:`, per suite `ok` or `FAIL`."""
    lines: list[str] = []
    for suite in results:
        if suite.error:
            lines.append(f"    {suite.error}")
        for test in suite.children:
            _lines(test, 0, verbose, lines)
        status = "FAIL" if suite.failed else "ok"
        lines.append(f"{status}\t{suite.name}\t{suite.seconds:.3f}s")
    lines.append("FAIL" if any(r.failed for r in results) else "PASS")
    return "\n".join(lines)


def _lines(result: Result, depth: int, verbose: bool, out: list[str]) -> None:
    pad = "    " * depth
    if verbose:
        out.append(f"{pad}=== RUN   {result.name}")
    if result.skipped:
        out.append(f"{pad}--- SKIP: {result.name} ({result.seconds:.3f}s)")
        return
    if result.failed:
        out.append(f"{pad}--- FAIL: {result.name} ({result.seconds:.3f}s)")
    elif verbose:
        out.append(f"{pad}--- PASS: {result.name} ({result.seconds:.3f}s)")
    if result.error:
        out.extend(f"{pad}    {line}" for line in result.error.splitlines())
    for child in result.children:
        if child.failed or verbose:
            _lines(child, depth + 1, verbose, out)


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
