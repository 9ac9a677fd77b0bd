"""Evaluate the admission policies that apply to a review and combine their answers.

Pure decision logic: an engine in, a Verdict out, no I/O. Validating
policies all see the same review; mutating policies run in name order, each
seeing the object as the previous one left it, and the final patch is the
difference between the original object and the result.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import jsonpatch

from regokite.admission import outputs
from regokite.admission.match import Match
from regokite.admission.outputs import PolicyOutputError, PolicyResult
from regokite.admission.policies import EXPANSION, MUTATION_ERRORS, AdmissionPolicy, PolicySet
from regokite.admission.review import Review, Verdict
from regokite.engine import UNDEFINED, Bound
from regokite.engine.extensions.external_data import call_deadline
from regokite.errors import RegokiteError
from regokite.gatekeeper.expansion import MESSAGE_PREFIX
from regokite.gatekeeper.violations import evaluation_violation

Mode = Literal["validate", "mutate"]


@dataclass
class PolicyOutcome:
    policy: str
    decision: str  # allowed | denied | warned | dryrun | error
    seconds: float
    error: str | None = None
    messages: list[str] = field(default_factory=list)
    details: list[Any] = field(default_factory=list)  # a constraint's violation `details`, by message


@dataclass
class Decision:
    verdict: Verdict
    outcomes: list[PolicyOutcome]


class DeadlineExceeded(RegokiteError):
    pass


def select(policy_set: PolicySet, mode: Mode, only: str | None = None) -> list[AdmissionPolicy]:
    candidates = policy_set.policies if only is None else [p for p in policy_set.policies if p.selected_by(only)]
    return [p for p in candidates if (p.mutating if mode == "mutate" else p.validating)]


def decide(
    policy_set: PolicySet,
    review: Review,
    *,
    mode: Mode,
    only: str | None = None,
    deadline: float | None = None,
    on_policy: Callable[[str], None] | None = None,
) -> Decision:
    """Run the applicable policies; `deadline` is a time.monotonic() instant.

    The deadline is checked before each policy: an in-process evaluation
    cannot be interrupted, so one runaway policy finishes late, but no more
    policies start after the budget is spent. `on_policy` hears each policy's
    name before it runs (the watchdog's view of a worker).
    """
    if mode == "validate" and only is None:
        refused = policy_objects_refusal(policy_set, review)
        if refused is not None:
            return refused
    verdict = Verdict()
    outcomes: list[PolicyOutcome] = []
    original = review.object
    working = original
    bound: Bound | None = None
    bound_to: Any = None
    evaluated: list[_Evaluated] = []  # validating: applied once all ran (Gatekeeper's errors go to their kind)
    for policy in select(policy_set, mode, only):
        started = time.monotonic()
        try:
            if not policy.match.applies_to(review):
                continue
        except RegokiteError as exc:  # a constraint's namespaceSelector without its Namespace
            evaluated.append(_Evaluated(policy, 0.0, error=str(exc)))
            continue
        if on_policy is not None:
            on_policy(policy.name)
        done = _Evaluated(policy, 0.0)
        try:
            if policy.name in policy_set.unavailable:
                raise RegokiteError(policy_set.unavailable[policy.name])
            if deadline is not None and started > deadline:
                raise DeadlineExceeded("evaluation deadline passed before this policy ran")
            if bound is None or bound_to is not working:
                raw = review.raw if working is original else _with_object(review.raw, working)
                bound, bound_to = policy_set.engine.bind(raw), working
            with call_deadline(deadline):  # external_data calls end within the webhook's budget
                done.result = _evaluate(policy, bound, mode, review.uid)
            if mode == "mutate" and policy.enforcement != "dryrun":
                working = _mutate(policy, working, done.result)
        except (RegokiteError, PolicyOutputError) as exc:
            done.error, done.violation = str(exc), _violation(policy, policy_set, exc)
        done.seconds = time.monotonic() - started
        evaluated.append(done)
    outcomes += _applied(evaluated, verdict)
    if mode == "validate" and policy_set.expands and isinstance(original, dict):
        outcomes += judge_expanded(policy_set, review, verdict, only)
    if mode == "mutate" and verdict.allowed and working is not original and original is not None:
        verdict.patch = jsonpatch.make_patch(original, working).patch
    if not verdict.allowed and not any(o.decision == "denied" for o in outcomes):
        verdict.code = 500  # refused only because policies failed
    return Decision(verdict, outcomes)


POLICY_OBJECTS = "regokite_gatekeeper.policy_objects"


def policy_objects_refusal(policy_set: PolicySet, review: Review) -> Decision | None:
    """Gatekeeper's objects are checked before any policy reviews them, as Gatekeeper's webhook checks
    its own: one that would not load is refused (422) with why, and nothing else runs."""
    started = time.monotonic()
    refused = policy_set.policy_objects.refusal(review.request)
    if refused is None:
        return None
    verdict = Verdict(allowed=False, messages=[refused.message], code=refused.code)
    outcome = PolicyOutcome(POLICY_OBJECTS, "denied", time.monotonic() - started, messages=[refused.message])
    return Decision(verdict, [outcome])


def judge_expanded(policy_set: PolicySet, review: Review, verdict: Verdict, only: str | None) -> list[PolicyOutcome]:
    """Gatekeeper's expansion: the resources a workload yields (Rego expands and mutates them), judged
    by the constraints that match Generated resources, messages `[Implied by <template>]`."""
    started = time.monotonic()
    expansion = AdmissionPolicy(EXPANSION, (), Match())
    try:
        if EXPANSION in policy_set.unavailable:
            raise RegokiteError(policy_set.unavailable[EXPANSION])
        results = policy_set.engine.bind(review.raw).evaluate(f"data.{EXPANSION}.results")
        errors = [r["error"] for r in results if "error" in r] if isinstance(results, list) else [str(results)]
        if errors:
            raise RegokiteError("unable to expand object: " + "; ".join(errors))
    except RegokiteError as exc:
        failed = _failed(expansion, verdict, str(exc))
        failed.seconds = time.monotonic() - started
        return [failed]
    outcomes = []
    evaluated: list[_Evaluated] = []
    constraints = [p for p in select(policy_set, "validate", only) if p.constraint_kind is not None]
    for resultant in results:
        child = resultant_review(review, resultant["object"])
        bound = policy_set.engine.bind(child.raw)
        prefix = MESSAGE_PREFIX.format(resultant["template"])
        for policy in constraints:
            applied = replace(policy, enforcement=resultant["enforcementAction"] or policy.enforcement)
            done = _Evaluated(applied, 0.0)
            try:
                skipped = policy.match.skipped(review.process)  # type: ignore[union-attr]
                if not policy.match.matches(child.request, source="Generated", skipped=skipped):  # type: ignore[call-arg]
                    continue
                if policy.name in policy_set.unavailable:
                    raise RegokiteError(policy_set.unavailable[policy.name])
                done.result = _evaluate(policy, bound, "validate", child.uid)
                done.result.denials = [f"{prefix} {m}" for m in done.result.denials]
            except (RegokiteError, PolicyOutputError) as exc:
                violation = _violation(policy, policy_set, exc)
                done.error, done.violation = f"{prefix} {exc}", violation and f"{prefix} {violation}"
            evaluated.append(done)
        outcomes += _applied(evaluated, verdict)
        evaluated = []
    return outcomes


def resultant_review(review: Review, obj: dict[str, Any]) -> Review:
    """The review of an expanded resource: the parent's request with the resultant as its object."""
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    kind = {"group": group, "version": version, "kind": obj.get("kind", "")}
    meta = obj.get("metadata") or {}
    request = {
        **review.request,
        "kind": kind,
        "requestKind": kind,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace") or "",
        "object": obj,
        "oldObject": None,
    }
    return Review({**review.raw, "request": request})


def _with_object(raw: dict[str, Any], obj: Any) -> dict[str, Any]:
    return {**raw, "request": {**raw["request"], "object": obj}}


def _evaluate(policy: AdmissionPolicy, bound: Bound, mode: Mode, uid: str) -> PolicyResult:
    name = policy.name
    if policy.whole_response:
        value = bound.evaluate(f"data.{name}.{policy.whole_response}")
        if value is UNDEFINED:
            raise PolicyOutputError(name, policy.whole_response, "must be defined for every request", None)
        result = outputs.review_response(value, name, policy.whole_response, uid)
        if mode == "validate":
            result.patch = None
        return result
    wrapped = bound.evaluate(policy.decision_ref(mode))
    if not isinstance(wrapped, dict):
        raise PolicyOutputError(name, mode, "generated decision rule is undefined", wrapped)
    values = {d: (v[0] if v else UNDEFINED) for d, v in wrapped.items()}
    if values.get(MUTATION_ERRORS):  # Gatekeeper's mutation system could not mutate: an error, as its webhook
        raise RegokiteError("; ".join(map(str, values[MUTATION_ERRORS])))
    result = PolicyResult()
    defined = {d: v for d, v in values.items() if v is not UNDEFINED}
    if "deny" in defined:
        result.denials = outputs.messages(defined["deny"], name, "deny")
    if "violation" in defined:  # a Gatekeeper constraint: a set of {"msg", "details"}
        found = outputs.violations(defined["violation"], name)
        result.denials, result.details = [m for m, _ in found], [d for _, d in found]
    if "warn" in defined:
        result.warnings = outputs.messages(defined["warn"], name, "warn")
    if "allow" in values and values["allow"] is not True:
        if "allow" in defined:
            outputs.boolean(defined["allow"], name, "allow")
        if not result.denials:
            result.denials = ["request not allowed by policy (allow is not true)"]
    if "audit_annotations" in defined:
        result.audit_annotations = outputs.annotations(defined["audit_annotations"], name, "audit_annotations")
    if "patch" in defined:
        result.patch = outputs.patch_ops(defined["patch"], name, "patch")
    if "mutated" in defined:
        result.mutated = outputs.mutated(defined["mutated"], name, "mutated")
    return result


def _mutate(policy: AdmissionPolicy, working: Any, result: PolicyResult) -> Any:
    if working is None or (result.patch is None and result.mutated is None):
        return working
    if result.mutated is not None:
        working = copy.deepcopy(result.mutated)
    if result.patch:
        try:
            working = jsonpatch.apply_patch(working, result.patch)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise PolicyOutputError(
                policy.name, "patch", f"does not apply to the object ({exc})", result.patch
            ) from None
    return working


@dataclass
class _Evaluated:
    """One policy's evaluation, before it is applied to the verdict."""

    policy: AdmissionPolicy
    seconds: float
    result: PolicyResult | None = None
    error: str | None = None  # it failed: fail closed as its failure_policy says
    violation: str | None = None  # a constraint's evaluation error, as Gatekeeper's driver answers it (violations)


def _violation(policy: AdmissionPolicy, policy_set: PolicySet, error: Exception) -> str | None:
    if policy.constraint_kind is None:
        return None
    return evaluation_violation(error, policy_set.engine.strict_builtin_errors)


def _applied(evaluated: list[_Evaluated], verdict: Verdict) -> list[PolicyOutcome]:
    """The evaluations applied to `verdict` in order; where one constraint's evaluation failed, each
    constraint of its kind has that failure as its one violation (Gatekeeper evaluates a kind at once)."""
    failed_kinds: dict[str, str] = {}
    for done in evaluated:
        if done.violation is not None and done.policy.constraint_kind is not None:
            failed_kinds.setdefault(done.policy.constraint_kind, done.violation)
    outcomes = []
    for done in evaluated:
        violation = failed_kinds.get(done.policy.constraint_kind or "")
        if violation is not None and (done.error is None or done.violation is not None):
            outcome = _apply(done.policy, verdict, PolicyResult(denials=[violation], details=[None]))
        elif done.error is not None:
            outcome = _failed(done.policy, verdict, done.error)
        else:
            outcome = _apply(done.policy, verdict, done.result or PolicyResult())
        outcome.seconds = done.seconds
        outcomes.append(outcome)
    return outcomes


def _apply(policy: AdmissionPolicy, verdict: Verdict, result: PolicyResult) -> PolicyOutcome:
    tag = f"[{policy.name}]"
    outcome = PolicyOutcome(policy.name, "allowed", 0.0, messages=result.denials, details=result.details)
    if policy.enforcement == "dryrun":
        if result.denials:
            outcome.decision = "dryrun"
        return outcome
    verdict.warnings.extend(f"{tag} {w}" for w in result.warnings)
    verdict.audit_annotations.update(result.audit_annotations)
    if not result.denials:
        return outcome
    if policy.enforcement == "warn":
        verdict.warnings.extend(f"{tag} {m}" for m in result.denials)
        outcome.decision = "warned"
        return outcome
    verdict.allowed = False
    verdict.messages.extend(f"{tag} {m}" for m in result.denials)
    outcome.decision = "denied"
    return outcome


def _failed(policy: AdmissionPolicy, verdict: Verdict, error: str) -> PolicyOutcome:
    tag = f"[{policy.name}]"
    if policy.failure_policy == "Ignore":
        verdict.warnings.append(f"{tag} policy error ignored (failure_policy Ignore): {error}")
    else:
        verdict.allowed = False
        verdict.messages.append(f"{tag} policy error: {error}")
    return PolicyOutcome(policy.name, "error", 0.0, error=error)
