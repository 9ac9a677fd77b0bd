"""Validating and mutating webhook configurations from the policies' `match` declarations.

One webhook per policy, pointing at `/validate/<package>` or
`/mutate/<package>`, so each policy's rules, selectors and failure policy
are applied by the API server itself and a request is sent only to the
policies that want it. Gatekeeper constraints get one webhook per
constraint kind (`/validate/<kind lowercased>`) for the API groups their
`kinds` name; their namespace criteria are checked by regokite.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from regokite.admission.match import Match
from regokite.admission.policies import AdmissionPolicy
from regokite.admission.webhook_knobs import WebhookKnobs, WebhookSettings, merge_selectors, parse_knobs
from regokite.errors import RegokiteError

NAME_LABEL = "kubernetes.io/metadata.name"
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class WebhookTarget:
    """Where the API server reaches regokite: a Service, or a URL for out-of-cluster servers."""

    name: str
    namespace: str
    service: str | None = None
    port: int = 443
    url: str | None = None
    ca_bundle: str | None = None
    cert_manager_certificate: str | None = None
    timeout_seconds: int = 5
    settings: WebhookSettings = field(default_factory=WebhookSettings)  # the knobs over what policies compute


def webhook_configurations(policies: list[AdmissionPolicy], target: WebhookTarget) -> list[dict[str, Any]]:
    configs = []
    for kind, mode, wanted in (
        ("ValidatingWebhookConfiguration", "validate", [p for p in policies if p.validating]),
        ("MutatingWebhookConfiguration", "mutate", [p for p in policies if p.mutating]),
    ):
        if not wanted:
            continue
        metadata: dict[str, Any] = {"name": target.name, "labels": {"app.kubernetes.io/name": "regokite"}}
        if target.cert_manager_certificate:
            metadata["annotations"] = {"cert-manager.io/inject-ca-from": target.cert_manager_certificate}
        configs.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": metadata,
                "webhooks": _webhooks(wanted, mode, target),
            }
        )
    return configs


GATEKEEPER_IGNORE_LABEL = "admission.gatekeeper.sh/ignore"
# `*` names no subresource: Gatekeeper's webhook lists these (kubectl exec is CONNECT of pods/exec)
GATEKEEPER_SUBRESOURCES = (
    "pods/ephemeralcontainers", "pods/exec", "pods/log", "pods/eviction", "pods/portforward", "pods/proxy",
    "pods/attach", "pods/binding", "pods/resize", "deployments/scale", "replicasets/scale", "statefulsets/scale",
    "replicationcontrollers/scale", "services/proxy", "nodes/proxy", "services/status",
)  # fmt: skip


def catch_all_configuration(
    target: WebhookTarget, mode: str = "validate", operations: tuple[str, ...] = ("CREATE", "UPDATE")
) -> dict[str, Any]:
    """One webhook for CREATE and UPDATE (validation: plus DELETE or CONNECT when asked) of every resource
    to `/validate` (or `/mutate`), as Gatekeeper registers its own (failurePolicy Ignore, namespaces
    labelled admission.gatekeeper.sh/ignore skipped; mutation: reinvocationPolicy Never, as its chart):
    constraints and mutators are matched in process, so they come and go without a new webhook. Beside
    the validating one, Gatekeeper's namespace-label webhook (failurePolicy Fail): only the
    --exempt-namespace* namespaces may carry that label."""
    name = target.name if mode == "validate" else f"{target.name}-mutating"
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/name": "regokite"}}
    if target.cert_manager_certificate:
        metadata["annotations"] = {"cert-manager.io/inject-ca-from": target.cert_manager_certificate}
    validating = mode == "validate"
    rule = {
        "operations": list(operations if validating else ("CREATE", "UPDATE")),
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": ["*", *GATEKEEPER_SUBRESOURCES] if validating else ["*"],
        "scope": "*",
    }
    policy = AdmissionPolicy("all", (), Match(), failure_policy="Ignore")
    base = webhook_base(policy, mode, rules=[rule])
    base["path"] = f"/{mode}"
    base["namespaceExpressions"] = [{"key": GATEKEEPER_IGNORE_LABEL, "operator": "DoesNotExist"}]
    point = "validation" if mode == "validate" else "mutation"
    base["name"] = f"{point}.{target.name}.regokite.dev"
    hook = render_webhook(base, mode, target)
    if mode == "mutate":
        hook["reinvocationPolicy"] = "Never"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration" if mode == "validate" else "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [hook, _label_webhook(target)] if validating else [hook],
    }


def _label_webhook(target: WebhookTarget) -> dict[str, Any]:
    """Gatekeeper's check-ignore-label webhook: CREATE and UPDATE of Namespaces, failing closed."""
    policy = AdmissionPolicy("label", (), Match(), failure_policy="Fail")
    rule = {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["namespaces"]}
    base = webhook_base(policy, "validate", rules=[rule])
    base.update(path="/v1/admitlabel", name=f"check-ignore-label.{target.name}.regokite.dev")
    hook = render_webhook(base, "validate", replace(target, settings=WebhookSettings()))
    hook["matchPolicy"] = "Exact"
    return hook


SOURCES_PATH = "/v1/admitsource"  # regokite.sources.applied answers it
# kube-mgmt's labels (regokite.sources.configmap_policies follows ConfigMaps carrying them)
CONFIGMAP_LABELS = (("policy", ("openpolicyagent.org/policy", "rego")), ("data", ("openpolicyagent.org/data", "opa")))
DEFINITION_RULES = (
    ("metacontroller.k8s.io", ["compositecontrollers", "decoratorcontrollers"]),
    ("regokite.dev", ["watches"]),
)


def policy_source_configuration(target: WebhookTarget, namespaces: Sequence[str], definitions: bool) -> dict[str, Any]:
    """The webhooks that refuse at apply what a server would refuse to load (`/v1/admitsource`): policy and data
    ConfigMaps of `namespaces` (`*`: all), each webhook limited by an objectSelector to its label so the
    cluster's other ConfigMaps never reach it; with `definitions`, CompositeControllers, DecoratorControllers
    and Watches, whose hooks the server resolves in the policies it serves. failurePolicy Fail: only these
    objects wait on the server, and one that reaches a server anyway is refused there (the last good set
    keeps serving)."""
    target = replace(target, settings=WebhookSettings())  # no knob: these fail closed, for these objects only
    hooks = [
        render_webhook(base, "validate", target) for base in policy_source_bases(target.name, namespaces, definitions)
    ]
    metadata: dict[str, Any] = {
        "name": f"{target.name}-policy-sources",
        "labels": {"app.kubernetes.io/name": "regokite"},
    }
    if target.cert_manager_certificate:
        metadata["annotations"] = {"cert-manager.io/inject-ca-from": target.cert_manager_certificate}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": hooks,
    }


def policy_source_bases(server: str, namespaces: Sequence[str], definitions: bool) -> list[dict[str, Any]]:
    """`policy_source_configuration`'s webhooks before rendering (the chart's admission.webhooks.sources)."""
    bases = []
    rule = {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}
    named = [] if "*" in namespaces else [{"key": NAME_LABEL, "operator": "In", "values": sorted(set(namespaces))}]
    for what, (key, value) in CONFIGMAP_LABELS if namespaces else ():
        bases.append(_source_base(f"{what}-configmaps", [rule], server, named, {"matchLabels": {key: value}}))
    if definitions:
        rules = [
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": [group],
                "apiVersions": ["v1alpha1"],
                "resources": plurals,
            }
            for group, plurals in DEFINITION_RULES
        ]
        bases.append(_source_base("definitions", rules, server, [], None))
    return bases


def _source_base(
    name: str,
    rules: list[dict[str, Any]],
    server: str,
    namespaces: list[dict[str, Any]],
    objects: dict[str, Any] | None,
) -> dict[str, Any]:
    base = webhook_base(AdmissionPolicy(name, (), Match(), failure_policy="Fail"), "validate", rules=rules)
    base.update(path=SOURCES_PATH, name=f"{name}.{server}.regokite.dev", namespaceExpressions=namespaces)
    if objects is not None:
        base["objectSelector"] = objects
    return base


def _webhooks(policies: list[AdmissionPolicy], mode: str, target: WebhookTarget) -> list[dict[str, Any]]:
    hooks = [render_webhook(base, mode, target) for base in webhook_bases(policies, mode)]
    return hooks


def webhook_bases(policies: list[AdmissionPolicy], mode: str) -> list[dict[str, Any]]:
    """The `webhook_base` of every policy wanting `mode`, then one per constraint kind."""
    bases = [webhook_base(p, mode) for p in policies if p.constraint_kind is None]
    kinds = sorted({p.constraint_kind for p in policies if p.constraint_kind is not None})
    for kind in kinds:
        bases.append(_constraint_base(kind, [p for p in policies if p.constraint_kind == kind]))
    return bases


def _constraint_base(kind: str, constraints: list[AdmissionPolicy]) -> dict[str, Any]:
    """All constraints of one kind: every resource of the groups their `kinds` name."""
    groups: set[str] = set()
    for policy in constraints:
        kinds = getattr(policy.match, "kinds", ())
        groups.update(g for entry in kinds for g in entry[0]) if kinds else groups.add("*")
    rule = {
        "operations": ["CREATE", "UPDATE"],
        "apiGroups": ["*"] if "*" in groups else sorted(groups),
        "apiVersions": ["*"],
        "resources": ["*"],
        "scope": "*",
    }
    first = replace(constraints[0], match=Match(), webhook=WebhookKnobs())
    base = webhook_base(first, "validate", path_name=kind.lower(), policy_name=kind.lower(), rules=[rule])
    base["name"] = f"{kind.lower()}.constraints.regokite.dev"
    return base


def service_path(mode: str, policy: str) -> str:
    """`/validate/admission.max-replicas` for package `admission.max_replicas`.

    The API server wants every segment of a Service path to be a lowercase DNS
    subdomain (no `_`); regokite reads `-` back as `_` (Rego package names
    never contain `-`).
    """
    name = policy.replace("_", "-")
    if not _SUBDOMAIN.match(name):
        raise RegokiteError(
            f"policy {policy}: its package name cannot be a webhook path (lowercase letters, digits, '_' and '.')"
        )
    return f"/{mode}/{name}"


def webhook_base(
    policy: AdmissionPolicy,
    mode: str,
    path_name: str | None = None,
    policy_name: str | None = None,
    rules: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What the policy computes of its webhook, before any knob: the chart's `admission.webhooks` entries
    (`regokite manifests admission --helm-values`) and what `render_webhook` completes."""
    match = policy.match if isinstance(policy.match, Match) else Match()  # a constraint: rules given
    base: dict[str, Any] = {
        "name": f"{policy.name.replace('_', '-')}.{mode}.regokite.dev",
        "policy": policy_name or policy.name,
        "path": service_path(mode, path_name or policy.name),
        "rules": rules or [rule.as_webhook_rule() for rule in match.rules],
        "namespaceExpressions": _namespace_selector(match.namespace_selector, match.namespaces, (), "")[
            "matchExpressions"
        ][:-1],
        "excludedNamespaces": list(match.excluded_namespaces),
        "failurePolicy": policy.failure_policy,
        "declared": knobs_document(policy.webhook),
    }
    if match.object_selector is not None:
        base["objectSelector"] = dict(match.object_selector)
    if (match.namespace_selector or {}).get("matchLabels"):
        base["namespaceMatchLabels"] = dict(match.namespace_selector["matchLabels"])  # type: ignore[index]
    return base


def knobs_document(knobs: WebhookKnobs) -> dict[str, Any]:
    """`knobs` in the values' names (what parse_knobs reads back)."""
    doc: dict[str, Any] = {
        "failurePolicy": knobs.failure_policy,
        "timeoutSeconds": knobs.timeout_seconds,
        "namespaceSelector": {"matchExpressions": list(knobs.namespace_expressions)}
        if knobs.namespace_expressions
        else None,
        "objectSelector": knobs.object_selector,
        "matchConditions": list(knobs.match_conditions),
        "operations": list(knobs.operations),
        "rules": list(knobs.rules),
    }
    return {k: v for k, v in doc.items() if v not in (None, [], {})}


def render_webhook(base: dict[str, Any], mode: str, target: WebhookTarget) -> dict[str, Any]:
    """A webhook of `webhook_base` under the target's knobs: global, the policy's declaration, the values'
    entry for the policy (charts/regokite/templates/_webhooks.tpl does the same; a test compares them)."""
    client: dict[str, Any]
    if target.url:
        client = {"url": target.url.rstrip("/") + base["path"]}
    else:
        service = {"name": target.service, "namespace": target.namespace, "port": target.port, "path": base["path"]}
        client = {"service": service}
    if target.ca_bundle is not None and not target.cert_manager_certificate:
        client["caBundle"] = target.ca_bundle
    declared = parse_knobs(base["declared"], base["policy"])
    knobs = target.settings.for_policy(mode, base["policy"], declared)
    rules = [dict(r) for r in knobs.rules] or [dict(r) for r in base["rules"]]
    if knobs.operations:
        rules = [{**r, "operations": list(knobs.operations)} for r in rules]
    skip = sorted({*base["excludedNamespaces"], *target.settings.exempt_namespaces, target.namespace})
    expressions = [*base["namespaceExpressions"], {"key": NAME_LABEL, "operator": "NotIn", "values": skip}]
    webhook: dict[str, Any] = {
        "name": base["name"],
        "clientConfig": client,
        "rules": rules,
        "namespaceSelector": {
            **({"matchLabels": base["namespaceMatchLabels"]} if "namespaceMatchLabels" in base else {}),
            "matchExpressions": [*expressions, *knobs.namespace_expressions],
        },
        "failurePolicy": knobs.failure_policy or base["failurePolicy"],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1", "v1beta1"],
        "timeoutSeconds": knobs.timeout_seconds if knobs.timeout_seconds is not None else target.timeout_seconds,
        "matchPolicy": "Equivalent",
    }
    object_selector = merge_selectors(base.get("objectSelector"), knobs.object_selector)
    if object_selector is not None:
        webhook["objectSelector"] = object_selector
    if knobs.match_conditions:
        webhook["matchConditions"] = [dict(c) for c in knobs.match_conditions]
    if mode == "mutate":
        webhook["reinvocationPolicy"] = "IfNeeded"
    return webhook


def _namespace_selector(
    selector: Any, namespaces: tuple[str, ...], excluded: tuple[str, ...], own_namespace: str
) -> dict[str, Any]:
    """The policy's selector plus its namespace lists, never regokite's own namespace.

    Namespaces are selected by the `kubernetes.io/metadata.name` label that the
    API server sets since 1.21; regokite also checks the lists itself, so older
    servers only send a few more requests.
    """
    result: dict[str, Any] = {k: v for k, v in dict(selector or {}).items()}
    expressions = list(result.get("matchExpressions") or [])
    if namespaces:
        expressions.append({"key": NAME_LABEL, "operator": "In", "values": list(namespaces)})
    skip = sorted({*excluded, own_namespace})
    expressions.append({"key": NAME_LABEL, "operator": "NotIn", "values": skip})
    result["matchExpressions"] = expressions
    return result
