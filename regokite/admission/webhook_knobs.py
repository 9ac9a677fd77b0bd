"""What a user sets on a webhook beyond what the policies compute: failure policy, timeout, selectors,
CEL match conditions, operations and rules.

One vocabulary, the field names of `admissionregistration.k8s.io/v1` webhooks, read from three places:
a policy's own `webhook` declaration (with its `failure_policy`), the Helm chart's values
(`validatingWebhook*`, `mutatingWebhook*`, `webhookPolicies.<policy>`) and `regokite manifests --values`,
which reads the same values file, so the chart and the command cannot mean different things.
Layers apply lowest first (built-in < global < the policy's declaration < per-policy values): a set
scalar replaces, selectors' matchLabels merge, matchExpressions and matchConditions add up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from regokite.errors import RegokiteError

Obj = dict[str, Any]
FAILURE_POLICIES = ("Fail", "Ignore")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
KEYS = (
    "failurePolicy", "timeoutSeconds", "namespaceSelector", "objectSelector", "matchConditions", "operations",
    "rules",
)  # fmt: skip


class KnobError(RegokiteError):
    pass


@dataclass(frozen=True)
class WebhookKnobs:
    failure_policy: str | None = None
    timeout_seconds: int | None = None
    namespace_expressions: tuple[Obj, ...] = ()  # namespaceSelector.matchExpressions, added
    object_selector: Obj | None = None
    match_conditions: tuple[Obj, ...] = ()
    operations: tuple[str, ...] = ()  # replace the operations of every rule
    rules: tuple[Obj, ...] = ()  # replace the rules computed from the policy's match

    def over(self, base: WebhookKnobs) -> WebhookKnobs:
        """These knobs applied on top of `base`."""
        return WebhookKnobs(
            failure_policy=self.failure_policy or base.failure_policy,
            timeout_seconds=self.timeout_seconds if self.timeout_seconds is not None else base.timeout_seconds,
            namespace_expressions=(*base.namespace_expressions, *self.namespace_expressions),
            object_selector=merge_selectors(base.object_selector, self.object_selector),
            match_conditions=(*base.match_conditions, *self.match_conditions),
            operations=self.operations or base.operations,
            rules=self.rules or base.rules,
        )

    def with_failure_policy(self, failure_policy: str | None) -> WebhookKnobs:
        return replace(self, failure_policy=failure_policy or self.failure_policy)


def merge_selectors(base: Mapping[str, Any] | None, extra: Mapping[str, Any] | None) -> Obj | None:
    """Both label selectors at once: matchLabels merged (extra's win), matchExpressions added up."""
    if base is None and extra is None:
        return None
    base, extra = dict(base or {}), dict(extra or {})
    merged: Obj = {}
    labels = {**(base.get("matchLabels") or {}), **(extra.get("matchLabels") or {})}
    if labels:
        merged["matchLabels"] = labels
    expressions = [*(base.get("matchExpressions") or []), *(extra.get("matchExpressions") or [])]
    if expressions:
        merged["matchExpressions"] = expressions
    return merged


def parse_knobs(doc: Any, where: str) -> WebhookKnobs:
    """`{"failurePolicy": "Ignore", "timeoutSeconds": 3, "objectSelector": {...}, ...}` (None: none set)."""
    if doc is None:
        return WebhookKnobs()
    if not isinstance(doc, Mapping):
        raise KnobError(f"{where} must be an object with keys among {', '.join(KEYS)}, got {doc!r}")
    unknown = sorted(set(doc) - set(KEYS))
    if unknown:
        raise KnobError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    failure = doc.get("failurePolicy")
    if failure is not None and failure not in FAILURE_POLICIES:
        raise KnobError(f"{where}.failurePolicy must be one of {', '.join(FAILURE_POLICIES)}, got {failure!r}")
    timeout = doc.get("timeoutSeconds")
    if timeout is not None and (type(timeout) is not int or not 1 <= timeout <= 30):
        raise KnobError(f"{where}.timeoutSeconds must be an integer from 1 to 30, got {timeout!r}")
    return WebhookKnobs(
        failure_policy=failure,
        timeout_seconds=timeout,
        namespace_expressions=_expressions(doc.get("namespaceSelector"), f"{where}.namespaceSelector"),
        object_selector=_selector(doc.get("objectSelector"), f"{where}.objectSelector"),
        match_conditions=_conditions(doc.get("matchConditions"), f"{where}.matchConditions"),
        operations=_operations(doc.get("operations"), f"{where}.operations"),
        rules=tuple(_objects(doc.get("rules"), f"{where}.rules")),
    )


def _objects(value: Any, where: str) -> list[Obj]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise KnobError(f"{where} must be a list of objects, got {value!r}")
    return [dict(v) for v in value]


def _selector(value: Any, where: str) -> Obj | None:
    if value is None or value == {}:
        return None
    if not isinstance(value, Mapping) or not set(value) <= {"matchLabels", "matchExpressions"}:
        raise KnobError(f"{where} must be a label selector (matchLabels, matchExpressions), got {value!r}")
    if not isinstance(value.get("matchLabels") or {}, Mapping):
        raise KnobError(f"{where}.matchLabels must be an object, got {value['matchLabels']!r}")
    _objects(value.get("matchExpressions"), f"{where}.matchExpressions")
    return dict(value)


def _expressions(value: Any, where: str) -> tuple[Obj, ...]:
    """A namespaceSelector to add: only matchExpressions (regokite's own exemptions are expressions too)."""
    if value is None or value == {}:
        return ()
    if not isinstance(value, Mapping) or set(value) - {"matchExpressions"}:
        raise KnobError(f"{where} takes matchExpressions only (they are added to regokite's), got {value!r}")
    return tuple(_objects(value.get("matchExpressions"), f"{where}.matchExpressions"))


def _conditions(value: Any, where: str) -> tuple[Obj, ...]:
    conditions = _objects(value, where)
    for i, condition in enumerate(conditions):
        if set(condition) != {"name", "expression"} or not all(isinstance(v, str) for v in condition.values()):
            raise KnobError(f"{where}[{i}] must be {{name, expression}} (strings), got {condition!r}")
    return tuple(conditions)


def _operations(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not set(value) <= set(OPERATIONS):
        raise KnobError(f"{where} must be a non-empty list of {', '.join(OPERATIONS)}, got {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class WebhookSettings:
    """Every knob of a set of webhooks: per mode, the regokite namespaces exempted, per policy."""

    validating: WebhookKnobs = field(default_factory=WebhookKnobs)
    mutating: WebhookKnobs = field(default_factory=WebhookKnobs)
    exempt_namespaces: tuple[str, ...] = ()
    policies: Mapping[str, WebhookKnobs] | None = None

    def for_mode(self, mode: str) -> WebhookKnobs:
        return self.validating if mode == "validate" else self.mutating

    def for_policy(self, mode: str, policy: str, declared: WebhookKnobs) -> WebhookKnobs:
        """Global, then the policy's declaration, then the values' entry for the policy."""
        own = (self.policies or {}).get(policy, WebhookKnobs())
        return own.over(declared.over(self.for_mode(mode)))


def settings_from_values(values: Mapping[str, Any], where: str = "values") -> WebhookSettings:
    """The webhook knobs of a chart values document (the chart's names)."""
    modes = {}
    for mode in ("validating", "mutating"):
        prefix = f"{mode}Webhook"
        doc = {
            key: values[f"{prefix}{key[0].upper()}{key[1:]}"]
            for key in KEYS
            if values.get(f"{prefix}{key[0].upper()}{key[1:]}") not in (None, {}, [])
        }
        modes[mode] = parse_knobs(doc, f"{where}.{prefix}*")
    exempt = values.get("exemptNamespaces") or []
    if not isinstance(exempt, list) or not all(isinstance(n, str) for n in exempt):
        raise KnobError(f"{where}.exemptNamespaces must be a list of namespace names, got {exempt!r}")
    per_policy = values.get("webhookPolicies") or {}
    if not isinstance(per_policy, Mapping):
        raise KnobError(f"{where}.webhookPolicies must map policy names to webhook knobs, got {per_policy!r}")
    return WebhookSettings(
        validating=modes["validating"],
        mutating=modes["mutating"],
        exempt_namespaces=tuple(exempt),
        policies={name: parse_knobs(doc, f"{where}.webhookPolicies.{name}") for name, doc in per_policy.items()},
    )
