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
from regokite.gatekeeper.exempt import IGNORE_LABEL, Exemptions
from regokite.gatekeeper.expansion import MESSAGE_PREFIX
from regokite.gatekeeper.match import NamespaceUnknown, namespace_object, review_namespace
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
    action: str = ""  # the enforcement it was judged under (a constraint's enforcementAction, or its expansion's)
    actions: tuple[str, ...] = ()  # what it did with a violation here: deny, warn, dryrun (several when scoped)


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
    if mode == "validate" and only is None and review.process == "webhook":  # the webhook's, not audit's or gator's
        refused = policy_objects_refusal(policy_set, review)
        if refused is not None:
            return refused
    verdict = Verdict()
    outcomes: list[PolicyOutcome] = []
    original = review.object
    working = original
    inputs = _Inputs(policy_set, review)
    evaluated: list[_Evaluated] = []  # applied once all ran: a constraint's evaluation error is its kind's
    for policy in select(policy_set, mode, only):
        started = time.monotonic()
        actions = policy.actions_at(review.process)
        if not actions or not policy.judges_operation(review.process, review.operation):
            continue  # not applied by this process (scoped enforcement points), nor to this operation
        done = _Evaluated(policy, actions)
        try:
            if not policy.match.applies_to(review):
                continue
        except NamespaceUnknown as exc:  # a constraint's namespaceSelector without its Namespace
            done.unmatched = exc
        evaluated.append(done)
        if done.unmatched is not None:
            continue
        if on_policy is not None:
            on_policy(policy.name)
        try:
            if policy.name in policy_set.unavailable:
                raise RegokiteError(policy_set.unavailable[policy.name])
            if deadline is not None and started > deadline:
                raise DeadlineExceeded("evaluation deadline passed before this policy ran")
            bound = inputs.bound(policy, working)
            with call_deadline(deadline):  # external_data calls end within the webhook's budget
                done.result = _evaluate(policy, bound, mode, review.uid)
            if mode == "mutate" and policy.enforcement != "dryrun":
                working = _mutate(policy, working, done.result)
        except (RegokiteError, PolicyOutputError) as exc:
            done.error, done.violation = str(exc), _violation(policy, policy_set, exc)
        done.seconds = time.monotonic() - started
    outcomes += _applied(evaluated, verdict, review.process)
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
    constraints = [
        p
        for p in select(policy_set, "validate", only)
        if p.constraint_kind is not None
        and p.actions_at(review.process)
        and p.judges_operation(review.process, review.operation)
    ]
    for resultant in results:
        child = resultant_review(review, resultant["object"])
        namespace = namespace_object(child.request, policy_set.namespaces)
        bound = policy_set.engine.bind(with_namespace(child.raw, namespace[1]))
        prefix = MESSAGE_PREFIX.format(resultant["template"])
        override = resultant["enforcementAction"]  # the ExpansionTemplate's, over the constraint's
        evaluated: list[_Evaluated] = []
        for policy in constraints:
            applied = replace(policy, enforcement=override) if override else policy
            done = _Evaluated(applied, (override,) if override else policy.actions_at(review.process), prefix=prefix)
            try:
                if not policy.match.applies_to(child, source="Generated"):
                    continue
            except NamespaceUnknown as exc:  # its namespaceSelector without the Namespace
                done.unmatched = exc
            evaluated.append(done)
            if done.unmatched is not None:
                continue
            try:
                if policy.name in policy_set.unavailable:
                    raise RegokiteError(policy_set.unavailable[policy.name])
                required_namespace(policy, namespace, review.process)
                done.result = _evaluate(policy, bound, "validate", child.uid)
                done.result.denials = [f"{prefix} {m}" for m in done.result.denials]
            except NamespaceUnknown as exc:
                done.unmatched = exc
            except (RegokiteError, PolicyOutputError) as exc:
                violation = _violation(policy, policy_set, exc)
                done.error, done.violation = f"{prefix} {exc}", violation and f"{prefix} {violation}"
        outcomes += _applied(evaluated, verdict, review.process)
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
    return Review({**review.raw, "request": request}, process=review.process)


def _with_object(raw: dict[str, Any], obj: Any) -> dict[str, Any]:
    return {**raw, "request": {**raw["request"], "object": obj}}


class _Inputs:
    """A review's input bound to the engine: as the API server sent it for every policy (the object as
    the mutating policies before left it), and for Gatekeeper's constraints with the request's
    `namespaceObject` too, as Gatekeeper's review carries it (not in the others' input: kube-mgmt's
    contract is the AdmissionReview as sent). Each is bound once, when first needed."""

    def __init__(self, policy_set: PolicySet, review: Review) -> None:
        self.policy_set, self.review = policy_set, review
        self._plain: tuple[Any, Bound] | None = None  # (the object it holds, the engine bound to it)
        self._constraints: Bound | None = None
        self._namespace: tuple[str, Any] | None = None

    def bound(self, policy: AdmissionPolicy, working: Any) -> Bound:
        if policy.constraint_kind is None:
            if self._plain is None or self._plain[0] is not working:
                raw = self.review.raw if working is self.review.object else _with_object(self.review.raw, working)
                self._plain = (working, self.policy_set.engine.bind(raw))
            return self._plain[1]
        if self._namespace is None:
            self._namespace = namespace_object(self.review.request, self.policy_set.namespaces)
        required_namespace(policy, self._namespace, self.review.process)
        if self._constraints is None:
            self._constraints = self.policy_set.engine.bind(with_namespace(self.review.raw, self._namespace[1]))
        return self._constraints


def required_namespace(policy: AdmissionPolicy, namespace: tuple[str, Any], process: str) -> None:
    """A template that reads `namespaceObject` is not evaluated on a namespaced object whose Namespace
    regokite has not got (not yet replicated, or gone): Gatekeeper's webhook reads it from the API server
    and fails the request when it is not found, in its words; gator (check) leaves it empty."""
    name, found = namespace
    if policy.reads_namespace and name and found is None and process != "gator":
        raise RegokiteError(
            f'failed to create augmentedReview: namespaces "{name}" not found (input.review.namespaceObject:'
            " regokite reads Namespaces from its replica of v1/namespaces)"
        )


def with_namespace(raw: dict[str, Any], namespace: Any) -> dict[str, Any]:
    """The review with Gatekeeper's `namespaceObject` in its request (see review_namespace)."""
    return {**raw, "request": {**raw["request"], "namespaceObject": review_namespace(namespace)}}


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


def _apply(policy: AdmissionPolicy, verdict: Verdict, result: PolicyResult, actions: tuple[str, ...]) -> PolicyOutcome:
    """A policy's result under `actions`: `deny` refuses, `warn` warns (a scoped constraint may do
    both, as Gatekeeper's webhook does), any other (`dryrun`, an action only gator reads) only counts."""
    tag = f"[{policy.name}]"
    outcome = PolicyOutcome(
        policy.name,
        "allowed",
        0.0,
        messages=result.denials,
        details=result.details,
        action=policy.enforcement,
        actions=actions,
    )
    if "deny" not in actions and "warn" not in actions:
        if result.denials:
            outcome.decision = "dryrun"
        return outcome
    verdict.warnings.extend(f"{tag} {w}" for w in result.warnings)
    verdict.audit_annotations.update(result.audit_annotations)
    if not result.denials:
        return outcome
    if "warn" in actions:
        verdict.warnings.extend(f"{tag} {m}" for m in result.denials)
        outcome.decision = "warned"
    if "deny" in actions:
        verdict.allowed = False
        verdict.messages.extend(f"{tag} {m}" for m in result.denials)
        outcome.decision = "denied"
    return outcome


@dataclass
class _Evaluated:
    """One policy's evaluation, before it is applied to the verdict."""

    policy: AdmissionPolicy
    actions: tuple[str, ...]
    seconds: float = 0.0
    result: PolicyResult | None = None
    error: str | None = None  # it failed: fail closed as its failure_policy says
    violation: str | None = None  # a constraint's evaluation error, as Gatekeeper's driver answers it (violations)
    unmatched: NamespaceUnknown | None = None  # it could not tell whether it matches
    prefix: str = ""  # an expanded resource's `[Implied by <template>]`


def _violation(policy: AdmissionPolicy, policy_set: PolicySet, error: Exception) -> str | None:
    if policy.constraint_kind is None:
        return None
    return evaluation_violation(error, policy_set.engine.strict_builtin_errors)


def _applied(evaluated: list[_Evaluated], verdict: Verdict, process: str) -> list[PolicyOutcome]:
    """The evaluations applied to `verdict` in order; where one constraint's evaluation failed, each
    constraint of its kind has that failure as its one violation (Gatekeeper evaluates a kind at once)."""
    failed_kinds: dict[str, str] = {}
    for done in evaluated:
        if done.violation is not None and done.policy.constraint_kind is not None:
            failed_kinds.setdefault(done.policy.constraint_kind, done.violation)
    outcomes = []
    for done in evaluated:
        violation = failed_kinds.get(done.policy.constraint_kind or "")
        if done.unmatched is not None:
            outcome = _unmatched(done.policy, verdict, done.unmatched, process, done.actions, done.prefix)
        elif violation is not None and (done.error is None or done.violation is not None):
            outcome = _apply(done.policy, verdict, PolicyResult(denials=[violation], details=[None]), done.actions)
        elif done.error is not None:
            outcome = _failed(done.policy, verdict, done.error)
        else:
            outcome = _apply(done.policy, verdict, done.result or PolicyResult(), done.actions)
        outcome.seconds = done.seconds
        outcomes.append(outcome)
    return outcomes


def _unmatched(
    policy: AdmissionPolicy,
    verdict: Verdict,
    exc: NamespaceUnknown,
    process: str,
    actions: tuple[str, ...],
    prefix: str = "",
) -> PolicyOutcome:
    """A constraint that cannot tell whether it matches (its namespaceSelector's Namespace is missing).
    gator reports Gatekeeper's autorejection as a violation under the constraint's actions; the webhook
    and audit refuse with the reason, fail closed, where Gatekeeper would have read the Namespace."""
    if process == "gator":
        return _apply(policy, verdict, PolicyResult(denials=[f"{prefix} {exc.gatekeeper}".lstrip()]), actions)
    return _failed(policy, verdict, f"{prefix} {exc}".lstrip())


def _failed(policy: AdmissionPolicy, verdict: Verdict, error: str) -> PolicyOutcome:
    tag = f"[{policy.name}]"
    if policy.failure_policy == "Ignore":
        verdict.warnings.append(f"{tag} policy error ignored (failure_policy Ignore): {error}")
    else:
        verdict.allowed = False
        verdict.messages.append(f"{tag} policy error: {error}")
    return PolicyOutcome(policy.name, "error", 0.0, error=error)


def label_verdict(review: Review, exemptions: Exemptions) -> Verdict:
    """Gatekeeper's namespace-label check: only an exempt Namespace may carry the ignore label."""
    request = review.request
    kind = request.get("kind") or {}
    if review.operation == "DELETE" or kind.get("group") != "" or kind.get("kind") != "Namespace":
        return Verdict()
    obj = review.object if isinstance(review.object, dict) else {}
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = metadata.get("name") if isinstance(metadata.get("name"), str) else ""
    labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
    if exemptions.exempts(name) or IGNORE_LABEL not in labels:
        return Verdict()
    return Verdict(allowed=False, messages=[f"Only exempt namespace can have the {IGNORE_LABEL} label"])
