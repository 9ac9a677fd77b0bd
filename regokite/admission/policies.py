"""Admission policies found in a bundle, with their declarations read once.

A package is an admission policy when it defines any admission document
(`deny`, `warn`, `allow`, `patch`, `mutated`, `audit_annotations`, or a whole
`main` / `response` in the style of OPA's Kubernetes tutorial), unless it also
answers with documents of another contract (`events`, `log`, `children`, ...)
and has none that only admission uses: then it is a controller or watch hook. Its `match`,
`enforcement`, `failure_policy`, `webhook` and `replicate` constants are evaluated at load time, so a
bad declaration fails the load (and a reload keeps the last good set).
Gatekeeper Constraints in YAML beside the Rego are admission policies too,
one per constraint, named by the constraint (regokite.gatekeeper).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from regokite.admission.match import Match, Matcher, MatchError, parse_match
from regokite.admission.webhook_knobs import KnobError, WebhookKnobs, parse_knobs
from regokite.bundle import Bundle, Module
from regokite.clusterdata.store import ReplicaStore, ReplicationError, ResourceRef, parse_resource, replica_root
from regokite.engine import UNDEFINED, Capability, Engine, EngineSettings, open_engine
from regokite.errors import PolicyLoadError, RegokiteError
from regokite.gatekeeper.constraints import (
    REVIEW_RULE_TEXT,
    GatekeeperSet,
    GatekeeperSources,
    constraint_rule,
    prepare,
    read_sources,
)
from regokite.gatekeeper.enforcement import POINT_OF_PROCESS, Enforcement
from regokite.gatekeeper.expansion import PACKAGE as EXPANSION
from regokite.gatekeeper.expansion import generated_modules, without_cycles
from regokite.gatekeeper.inventory import InventoryView, ReplicatedNamespaces
from regokite.gatekeeper.match import ConstraintMatch
from regokite.gatekeeper.mutation.compile import SYSTEM, decision_rule, reads_namespaces
from regokite.gatekeeper.mutation.conflicts import conflicting
from regokite.gatekeeper.policy_objects import PolicyObjects
from regokite.outline import outline, packages

VALIDATING = ("deny", "warn", "allow", "audit_annotations")
# Documents of regokite's other contracts (controller and watch hooks). A
# package answering with any of them and with no document only admission has
# is some other hook (a watch policy's `patch`, say), not an admission policy.
OTHER_CONTRACTS = (
    "children", "status", "finalized", "resyncAfterSeconds", "relatedResources",
    "labels", "annotations", "attachments", "apply", "delete", "log", "events",
)  # fmt: skip
ADMISSION_ONLY = ("deny", "warn", "allow", "audit_annotations", "mutated", "main", "response", "match")
MUTATING = ("patch", "mutated")
MUTATION_ERRORS = "mutation_errors"  # Gatekeeper's mutation system: why it could not mutate
WHOLE_RESPONSE = ("main", "response")
ENFORCEMENTS = ("deny", "warn", "dryrun")
DECISIONS_PACKAGE = "regokite_admission_decisions"
NAMESPACES = parse_resource("v1/namespaces", namespaced=False)  # what Gatekeeper reads a request's Namespace from
FAILURE_POLICIES = ("Fail", "Ignore")


@dataclass(frozen=True)
class AdmissionPolicy:
    name: str
    documents: tuple[str, ...]
    match: Matcher
    enforcement: str = "deny"
    failure_policy: str = "Fail"
    slot: int = 0  # its rules in the generated decisions module
    replicate: tuple[ResourceRef, ...] = ()  # the cluster data it reads
    constraint_kind: str | None = None  # a Gatekeeper constraint's kind
    # its metadata.annotations but kubectl's last-applied one (None: it has none), for Gatekeeper's audit lines
    constraint_annotations: tuple[tuple[str, str], ...] | None = None
    gatekeeper: Enforcement | None = None  # a constraint's actions at each of Gatekeeper's enforcement points
    operations: tuple[str, ...] = ()  # a constraint's template's: what the webhook judges (none: every operation)
    reads_namespace: bool = False  # a constraint's template reads input.review.namespaceObject
    webhook: WebhookKnobs = field(default_factory=WebhookKnobs)  # its `webhook` and `failure_policy`

    def actions_at(self, process: str) -> tuple[str, ...]:
        """What a violation does in `process` (webhook, audit, gator): its enforcement, or a constraint's
        actions at that process's Gatekeeper enforcement point; none: not applied there."""
        if self.gatekeeper is None:
            return (self.enforcement,)
        return self.gatekeeper.at(POINT_OF_PROCESS[process])

    def judges_operation(self, process: str, operation: str) -> bool:
        """A template's `operations` limit what Gatekeeper's webhook judges; audit and gator judge all."""
        return process != "webhook" or not self.operations or bool({"*", operation} & set(self.operations))

    def selected_by(self, only: str) -> bool:
        """`/validate/<only>` names a policy, or a constraint kind (all its constraints;
        lowercased, as webhook paths are)."""
        kind = self.constraint_kind
        if kind is None:
            return only == self.name
        # the server reads `-` in a path as `_`; constraint names have `-` and no `_`
        return only.replace("_", "-") == self.name or only in (kind, kind.lower())

    def decision_ref(self, mode: str) -> str:
        """The generated rule holding every document this mode needs, in one evaluation."""
        return f"data.{DECISIONS_PACKAGE}.{mode}_{self.slot}"

    @property
    def whole_response(self) -> str | None:
        """`main` or `response` when the policy answers with a whole response."""
        return next((d for d in WHOLE_RESPONSE if d in self.documents), None)

    @property
    def mutating(self) -> bool:
        return any(d in self.documents for d in MUTATING) or self.whole_response is not None

    @property
    def validating(self) -> bool:
        return any(d in self.documents for d in (*VALIDATING, "violation")) or self.whole_response is not None

    def refs(self, documents: Sequence[str]) -> list[str]:
        return [f"data.{self.name}.{d}" for d in documents]


@dataclass(frozen=True)
class PolicySet:
    """An engine and the admission policies it serves; swapped whole on reload."""

    engine: Engine
    policies: tuple[AdmissionPolicy, ...]
    source: tuple[str, ...] = ()
    # policies that cannot decide here, and why (they read cluster data the server
    # cannot replicate; Gatekeeper constraints whose template did not load): each
    # fails as its failure_policy says
    unavailable: Mapping[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # Gatekeeper templates and constraints that did not load
    reads_inventory: bool = False  # some Gatekeeper template reads data.inventory
    namespaces: ReplicatedNamespaces | None = None  # what constraints' namespaceSelectors read
    synced: tuple[ResourceRef, ...] = ()  # what Gatekeeper Configs ask to replicate (syncOnly)
    expands: bool = False  # Gatekeeper ExpansionTemplates: workloads also yield resources constraints judge
    expanded_kinds: tuple[tuple[str, str], ...] = ()  # (group, kind) of the workloads they expand: audited too
    # local mode: policies left out because they read cluster data, and what they read
    not_served: Mapping[str, str] = field(default_factory=dict)
    sync_excluded: tuple[str, ...] = ()  # namespaces a Config keeps out of replication (processes: sync)
    # Gatekeeper's objects applied to the cluster, checked at /validate with what this set serves
    policy_objects: PolicyObjects = field(default_factory=PolicyObjects)
    replica_root: tuple[str, ...] = ("kubernetes",)  # where the generated Rego reads the replica

    def follow(self, store: ReplicaStore, *, stepped: bool = False) -> None:
        """Evaluate on `store`'s objects; as `data.inventory` too when a template reads it
        (`stepped`: loaded whole only by the engine's `load_replica`, outside reviews)."""
        if store.root != self.replica_root:  # the mutators' namespaceSelectors would find no Namespace
            where, built = ".".join(store.root), ".".join(self.replica_root)
            raise RegokiteError(f"the replica is at data.{where}, the policies were built for data.{built}")
        if self.reads_inventory and Capability.INVENTORY not in self.engine.capabilities:
            raise RegokiteError("Gatekeeper templates reading data.inventory need the embedded engine")
        self.engine.follow(InventoryView(store) if self.reads_inventory else store, stepped=stepped)
        if self.namespaces is not None:
            self.namespaces.store = store

    def get(self, name: str) -> AdmissionPolicy | None:
        return next((p for p in self.policies if p.name == name), None)

    @property
    def replicate(self) -> tuple[ResourceRef, ...]:
        """Every resource some policy declares it reads, or a Gatekeeper Config syncs, once each."""
        return tuple(sorted({*self.synced, *(r for p in self.policies for r in p.replicate)}))

    def without_cluster_data(self) -> PolicySet:
        """The set minus every policy that declares cluster data, for a server with no cluster (local mode).

        Those policies are left out whole, never served on no data: a request
        they would match is decided by the others alone.
        """
        left_out = {p.name: reads for p in self.policies if (reads := _cluster_data_read(p))}
        if self.synced:
            left_out["gatekeeper Config syncOnly"] = ", ".join(map(str, self.synced))
        kept = tuple(p for p in self.policies if p.name not in left_out)
        return replace(self, policies=kept, synced=(), not_served=left_out)

    def close(self) -> None:
        self.engine.close()


def _cluster_data_read(policy: AdmissionPolicy) -> str:
    """What cluster data `policy` decides on ("" for none): its `replicate` declaration (a Gatekeeper
    constraint's: the Namespaces its namespaceSelector or its template's namespaceObject reads)."""
    if policy.constraint_kind is not None and policy.replicate:
        reads = [what for what, used in (("namespaceSelector", _selects_namespaces(policy)),
                                         ("namespaceObject", policy.reads_namespace)) if used]  # fmt: skip
        return f"v1/namespaces ({', '.join(reads)})"
    return ", ".join(map(str, policy.replicate))


def _selects_namespaces(policy: AdmissionPolicy) -> bool:
    return isinstance(policy.match, ConstraintMatch) and policy.match.namespace_selector is not None


def load_policy_set(
    paths: Sequence[str],
    engine: EngineSettings | None = None,
    *,
    mutation_annotations: bool = False,
    replicate_path: str = "kubernetes",
) -> PolicySet:
    """Load, compile and inspect `paths` for the engine `engine` builds (default: the embedded one);
    raises RegokiteError naming what is wrong."""
    engine = engine or EngineSettings()
    bundle = engine.load(paths)
    return build_policy_set(
        bundle, engine, source=paths, mutation_annotations=mutation_annotations, replicate_path=replicate_path
    )


def build_policy_set(
    bundle: Bundle,
    engine: EngineSettings | None = None,
    *,
    source: Sequence[str] = (),
    gatekeeper_sources: GatekeeperSources | None = None,
    mutation_annotations: bool = False,
    replicate_path: str = "kubernetes",
) -> PolicySet:
    """Compile and inspect a loaded bundle (the admission server rebuilds its last good one this way).

    Gatekeeper templates and constraints come from `gatekeeper_sources`, or
    are read from the `source` roots when none are given; `mutation_annotations`
    is Gatekeeper's --mutation-annotations; `replicate_path` is where the set
    will follow the replica (mutators' namespaceSelectors read it there).
    """
    bundle = bundle.without_tests()
    engine = engine or EngineSettings()  # one object: the engine's external_data sees these Providers
    rules_by_package = packages(outline(bundle.modules))
    wanted = sorted((name, rules) for name, rules in rules_by_package.items() if is_admission(rules))
    sources = served_mutators(read_sources(source) if gatekeeper_sources is None else gatekeeper_sources, engine)
    synced = sources.synced
    namespaces = ReplicatedNamespaces()
    gatekeeper = prepare(
        list(sources.templates),
        list(sources.constraints),
        lookup=namespaces,
        excluded=sources.excluded,
        engine=engine,
    )
    text = decisions_module([(name, rules) for name, rules in wanted])
    text += constraint_rules(gatekeeper, len(wanted))
    mutation_slot = len(wanted) + len(gatekeeper.constraints)
    expansions, cycles = without_cycles(sources.expansions)
    mutation = generated_modules(
        sources.mutators, expansions, sources.mutation_excluded, mutation_annotations, replicate_path
    )
    if sources.mutators:
        text += "\n".join(["", *decision_rule(f"mutate_{mutation_slot}")])
    expands = bool(expansions or sources.broken_expansions)
    decisions = Module(f"<{DECISIONS_PACKAGE}>.rego", text)
    modules = (*bundle.modules, *gatekeeper.modules, *mutation, decisions)
    built = open_engine(Bundle(modules, bundle.data, bundle.roots), engine)
    try:
        found = [_inspect(built, name, rules, slot) for slot, (name, rules) in enumerate(wanted)]
    except RegokiteError:
        built.close()
        raise
    found += constraint_policies(gatekeeper, len(wanted))
    broken = {c.constraint.name: c.broken for c in gatekeeper.constraints if c.broken}
    if sources.mutators or sources.broken_mutators:
        found.append(mutation_policy(sources, mutation_slot))
    if sources.broken_mutators:
        broken[SYSTEM] = "mutators that did not load: " + "; ".join(sources.broken_mutators)
    if sources.broken_expansions:
        broken[EXPANSION] = "ExpansionTemplates that did not load: " + "; ".join(sources.broken_expansions)
    reads_inventory = any("data.inventory" in m.text for m in gatekeeper.modules)
    problems = [*sources.problems, *gatekeeper.problems, *gatekeeper.refused, *cycles, *mutator_conflicts(sources)]
    expanded = sorted({(g, k) for t in expansions for a in t.apply_to for g in a["groups"] for k in a["kinds"]})
    # the set loaded: its Providers are the ones external_data calls now
    engine.extensions.external_data.set_providers(sources.providers)
    return PolicySet(
        built,
        tuple(found),
        tuple(source),
        broken,
        tuple(problems),
        reads_inventory,
        namespaces,
        synced,
        expands,
        tuple(expanded),
        sync_excluded=sources.excluded_from("sync"),
        policy_objects=PolicyObjects(gatekeeper.schemas, engine),
        replica_root=replica_root(replicate_path),
    )


def served_mutators(sources: GatekeeperSources, engine: EngineSettings) -> GatekeeperSources:
    """The sources with the mutators `engine` cannot evaluate moved to the broken ones: an externalData
    mutator calls its Provider through the embedded engine's builtin (a sidecar OPA has none)."""
    if Capability.EXTERNAL_DATA in engine.capabilities or not any(m.external for m in sources.mutators):
        return sources
    refused = tuple(
        f"{m.file}: {m.kind} {m.name}: assign.externalData is evaluated by the embedded engine only:"
        " serve it without --engine opa"
        for m in sources.mutators
        if m.external
    )
    kept = tuple(m for m in sources.mutators if not m.external)
    return replace(
        sources,
        mutators=kept,
        broken_mutators=(*sources.broken_mutators, *refused),
        problems=(*sources.problems, *refused),
    )


def mutator_conflicts(sources: GatekeeperSources) -> list[str]:
    """Mutators left out for a schema conflict, each named with its file."""
    left_out = conflicting(sources.mutators)
    return [f"{m.file}: {m.kind} {m.name}: not applied: {left_out[m.id]}" for m in sources.mutators if m.id in left_out]


def mutation_policy(sources: GatekeeperSources, slot: int) -> AdmissionPolicy:
    """Gatekeeper's mutators as one mutating policy: its Rego applies them in order, iterating."""
    namespaces = (NAMESPACES,) if reads_namespaces(sources.mutators) else ()
    return AdmissionPolicy(SYSTEM, ("mutated", MUTATION_ERRORS), Match(), slot=slot, replicate=namespaces)


def constraint_rules(gatekeeper: GatekeeperSet, first_slot: int) -> str:
    """Decision rules for the constraints, in slots after the Rego policies'."""
    lines = [REVIEW_RULE_TEXT] if gatekeeper.constraints else [""]
    for i, ready in enumerate(gatekeeper.constraints):
        lines += constraint_rule(f"validate_{first_slot + i}", ready)
    return "\n".join(lines)


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def constraint_policies(gatekeeper: GatekeeperSet, first_slot: int) -> list[AdmissionPolicy]:
    return [
        AdmissionPolicy(
            ready.constraint.name,
            ("violation",),
            ready.match,
            ready.constraint.enforcement.action,
            slot=first_slot + i,
            constraint_kind=ready.constraint.kind,
            constraint_annotations=user_annotations(ready.constraint.raw),
            gatekeeper=ready.constraint.enforcement,
            operations=ready.operations,
            replicate=(NAMESPACES,) if ready.reads_namespace or ready.match.namespace_selector is not None else (),
            reads_namespace=ready.reads_namespace,
        )
        for i, ready in enumerate(gatekeeper.constraints)
    ]


def user_annotations(doc: dict[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """A constraint's annotations as Gatekeeper's audit logs them: kubectl's last-applied copy left out."""
    annotations = (doc.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict):
        return None
    return tuple(sorted((k, str(v)) for k, v in annotations.items() if k != LAST_APPLIED))


def is_admission(rules: set[str]) -> bool:
    """Whether a package with these rules is an admission policy."""
    if not any(d in rules for d in (*VALIDATING, *MUTATING, *WHOLE_RESPONSE)):
        return False
    return any(d in rules for d in ADMISSION_ONLY) or not any(d in rules for d in OTHER_CONTRACTS)


def decisions_module(policies: Sequence[tuple[str, set[str]]]) -> str:
    """A module with, per policy, one rule per mode gathering all its documents.

    One evaluation per policy instead of one per document: rules the documents
    share (the containers of a pod spec, say) are computed once, about a third
    less work on policies/, and one round trip per policy to a sidecar OPA.
    Each document comes wrapped in an array, empty when it is undefined, so
    its value reaches the output checks as the policy wrote it.
    """
    lines = [f"package {DECISIONS_PACKAGE}", ""]
    for slot, (name, rules) in enumerate(policies):
        base = "data" + "".join(f"[{json.dumps(part)}]" for part in name.split("."))
        for mode, documents in (("validate", VALIDATING), ("mutate", (*VALIDATING, *MUTATING))):
            fields = ", ".join(f'"{d}": [x | x := {base}[{json.dumps(d)}]]' for d in documents if d in rules)
            lines += [f"# {name}", f"{mode}_{slot} := {{{fields}}}", ""]
    return "\n".join(lines)


def _inspect(engine: Engine, name: str, rules: set[str], slot: int) -> AdmissionPolicy:
    documents = tuple(d for d in (*VALIDATING, *MUTATING, *WHOLE_RESPONSE) if d in rules)
    declared = [d for d in ("match", "enforcement", "failure_policy", "webhook", "replicate") if d in rules]
    values = {d: engine.evaluate(f"data.{name}.{d}") for d in declared}
    for key, value in values.items():
        if value is UNDEFINED:
            raise PolicyLoadError(f"data.{name}.{key} is undefined without input: declare it as a constant")
    try:
        match = parse_match(values.get("match"), f"data.{name}.match")
    except MatchError as exc:
        raise PolicyLoadError(str(exc)) from None
    enforcement = values.get("enforcement", "deny")
    if enforcement not in ENFORCEMENTS:
        raise PolicyLoadError(f"data.{name}.enforcement must be one of {', '.join(ENFORCEMENTS)}, got {enforcement!r}")
    failure_policy = values.get("failure_policy", "Fail")
    if failure_policy not in FAILURE_POLICIES:
        raise PolicyLoadError(
            f"data.{name}.failure_policy must be one of {', '.join(FAILURE_POLICIES)}, got {failure_policy!r}"
        )
    replicate = parse_replicate(values.get("replicate"), f"data.{name}.replicate")
    try:
        webhook = parse_knobs(values.get("webhook"), f"data.{name}.webhook")
    except KnobError as exc:
        raise PolicyLoadError(str(exc)) from None
    webhook = webhook.with_failure_policy(values.get("failure_policy"))
    return AdmissionPolicy(name, documents, match, enforcement, failure_policy, slot, replicate, webhook=webhook)


def parse_replicate(doc: Any, where: str) -> tuple[ResourceRef, ...]:
    """`replicate := {"namespaced": ["networking.k8s.io/v1/ingresses"], "cluster": ["v1/namespaces"]}`."""
    if doc is None:
        return ()
    if not isinstance(doc, dict) or not set(doc) <= {"namespaced", "cluster"}:
        raise PolicyLoadError(f"{where} must be an object with arrays namespaced and/or cluster, got {doc!r}")
    found = []
    for key, items in doc.items():
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise PolicyLoadError(f"{where}.{key} must be an array of [GROUP/]VERSION/RESOURCE strings")
        try:
            found += [parse_resource(i, namespaced=key == "namespaced") for i in items]
        except ReplicationError as exc:
            raise PolicyLoadError(f"{where}.{key}: {exc}") from None
    return tuple(found)
