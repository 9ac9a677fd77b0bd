"""What audit looks at, and the results of one object: pure decisions, no I/O.

An existing object is put to the policies as the CREATE review the API
server would send for it now, through the admission server's own decision
code, so `match`, `enforcement` and `failure_policy` mean what they mean at
admission. Policies that match only other operations are not audited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from regokite.admission.decide import decide
from regokite.admission.match import Match
from regokite.admission.policies import PolicySet
from regokite.admission.review import creation_review
from regokite.clusterdata.store import ResourceRef
from regokite.gatekeeper.match import ConstraintMatch

Obj = dict[str, Any]
Results = tuple["Result", ...]


@dataclass(frozen=True)
class Result:
    """One finding of one policy on one object (a PolicyReport result)."""

    policy: str
    result: str  # fail | warn | error
    message: str
    enforcement: str  # the policy's enforcement (a constraint's enforcementAction, or its expansion's)
    details: Any = field(default=None, hash=False)  # a Gatekeeper violation's `details`, for its log line
    actions: tuple[str, ...] = ()  # the actions taken at the audit's enforcement point (several when scoped)


@dataclass(frozen=True)
class Subject:
    """The object a result is about (a PolicyReport result's `resources` entry)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    labels: tuple[tuple[str, str], ...] | None = field(default=None, compare=False)  # None: it has none

    @classmethod
    def of(cls, obj: Obj) -> Subject:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels")
        return cls(
            obj.get("apiVersion", ""),
            obj.get("kind", ""),
            meta.get("namespace") or "",
            meta.get("name", ""),
            meta.get("uid", ""),
            tuple(sorted(labels.items())) if isinstance(labels, dict) and labels else None,
        )

    def reference(self) -> dict[str, str]:
        ref = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}
        return {**ref, "namespace": self.namespace} if self.namespace else ref


KindResolver = Callable[[str, str], "ResourceRef | None"]  # (group, kind) -> its resource, None: not served
# every listable resource of the cluster, the group's preferred version: (group, kind, its resource)
EveryKind = Callable[[], "list[tuple[str, str, ResourceRef]]"]


def audited_resources(
    policy_set: PolicySet,
    preferred_version: Callable[[str], str],
    resolve_kind: KindResolver | None = None,
    every_kind: EveryKind | None = None,
) -> tuple[list[ResourceRef], list[str]]:
    """The resources the validating policies' `match` names for CREATE, and what cannot be audited.

    Audit lists what it checks, so a rule must name its groups and resources:
    a `*` group or resource, or a policy without `match`, is reported as not
    audited rather than guessed. A `*` version means the group's preferred one.
    A Gatekeeper constraint names kinds: `resolve_kind` (discovery) finds their
    resources; without it (offline) constraints are not audited. One with no
    kinds, or a `*` group or kind, is audited on every listable resource that
    fits (`every_kind`, discovery), as Gatekeeper's audit does. The workloads
    Gatekeeper's ExpansionTemplates expand are audited too (their resources
    judged as Generated ones).
    """
    found: set[ResourceRef] = set()
    skipped: list[str] = []
    for policy in policy_set.policies:
        if not policy.validating:
            continue
        match = policy.match
        if isinstance(match, ConstraintMatch):
            refs, reason = constraint_resources(match, resolve_kind, every_kind)
            found |= refs
            if reason:
                skipped.append(f"{policy.name}: {reason}")
            continue
        if not isinstance(match, Match) or not match.raw:
            skipped.append(f"{policy.name}: no match declaration (it would have to list every resource)")
            continue
        for rule in match.rules:
            if "*" not in rule.operations and "CREATE" not in rule.operations:
                continue
            if "*" in rule.api_groups or any(r.split("/")[0] == "*" for r in rule.resources):
                skipped.append(f"{policy.name}: a rule with a * group or resource")
                continue
            for group in rule.api_groups:
                versions = [preferred_version(group)] if "*" in rule.api_versions else list(rule.api_versions[:1])
                for resource in rule.resources:
                    if "/" not in resource:  # subresources are not objects of their own
                        found.add(ResourceRef(group, versions[0], resource, rule.scope != "Cluster"))
    if policy_set.expanded_kinds:  # workloads an ExpansionTemplate expands: their resources are judged too
        if resolve_kind is None:
            skipped.append("ExpansionTemplates: the workloads they expand need discovery (audit a cluster)")
        for group, kind in policy_set.expanded_kinds if resolve_kind is not None else ():
            ref = resolve_kind(group, kind)
            if ref is not None:
                found.add(ref)
    return sorted(found), skipped


def constraint_resources(
    match: Any, resolve_kind: KindResolver | None, every_kind: EveryKind | None = None
) -> tuple[set[ResourceRef], str]:
    """The resources of a constraint's `match.kinds` (every listable one that fits, for no kinds or a
    `*`), and why some cannot be audited (or "")."""
    if resolve_kind is None:
        return set(), "a constraint: its kinds need discovery (audit a cluster)"
    wildcard = not match.kinds or any("*" in groups or "*" in kinds for groups, kinds in match.kinds)
    if wildcard:
        if every_kind is None:
            return set(), "a constraint matching every kind (no kinds, or a * group or kind) needs discovery"
        return {
            ref
            for group, kind, ref in every_kind()
            if not match.kinds
            or any(("*" in gs or group in gs) and ("*" in ks or kind in ks) for gs, ks in match.kinds)
        }, ""
    found: set[ResourceRef] = set()
    for groups, kinds in match.kinds:
        for group in groups:
            for kind in kinds:
                ref = resolve_kind(group, kind)
                if ref is not None:
                    found.add(ref)
    return found, ""


def audit_object(policy_set: PolicySet, obj: Obj, ref: ResourceRef) -> Results:
    """Every finding of the validating policies on `obj`, a `ref` object, as if it were created now."""
    review = creation_review(obj, (ref.group, ref.version, ref.resource), "audit", process="audit")
    decision = decide(policy_set, review, mode="validate")
    policies = {p.name: p for p in policy_set.policies}
    found: list[Result] = []
    for outcome in decision.outcomes:
        policy = policies.get(outcome.policy)  # None: the expansion step itself failed
        enforcement = outcome.action or (policy.enforcement if policy is not None else "deny")
        if outcome.decision == "error":
            found.append(Result(outcome.policy, "error", outcome.error or "policy error", enforcement))
            continue
        verdict = "fail" if outcome.decision == "denied" else "warn"
        details = outcome.details or [None] * len(outcome.messages)
        for message, detail in zip(outcome.messages, details, strict=True):
            found.append(Result(outcome.policy, verdict, message, enforcement, detail, outcome.actions))
        tag = f"[{outcome.policy}] "
        for warning in decision.verdict.warnings:  # the policy's `warn` documents
            text = warning.removeprefix(tag)
            if text != warning and text not in outcome.messages and not text.startswith("policy error ignored"):
                found.append(Result(outcome.policy, "warn", text, enforcement, actions=outcome.actions))
    return tuple(found)


def violations(results: Iterable[Results]) -> dict[tuple[str, str], int]:
    """Counts of fail and warn results by (policy, enforcement): `regokite_audit_violations`."""
    counts: dict[tuple[str, str], int] = {}
    for per_object in results:
        for r in per_object:
            if r.result in ("fail", "warn"):
                counts[(r.policy, r.enforcement)] = counts.get((r.policy, r.enforcement), 0) + 1
    return counts
