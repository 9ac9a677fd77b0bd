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
from dataclasses import dataclass
from typing import Any

from regokite.admission.match import Match
from regokite.admission.policies import AdmissionPolicy
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
    policy = AdmissionPolicy("all", (), Match(), failure_policy="Ignore")
    hook = _webhook(policy, mode, target)
    clients = hook["clientConfig"]
    if "service" in clients:
        clients["service"]["path"] = f"/{mode}"
    else:
        clients["url"] = target.url.rstrip("/") + f"/{mode}"  # type: ignore[union-attr]
    selector = _namespace_selector(None, (), (), target.namespace)
    selector["matchExpressions"].append({"key": GATEKEEPER_IGNORE_LABEL, "operator": "DoesNotExist"})
    validating = mode == "validate"
    rule = {
        "operations": list(operations) if validating else ["CREATE", "UPDATE"],
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": ["*", *GATEKEEPER_SUBRESOURCES] if validating else ["*"],
        "scope": "*",
    }
    point = "validation" if mode == "validate" else "mutation"
    hook.update(name=f"{point}.{target.name}.regokite.dev", rules=[rule], namespaceSelector=selector)
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
    hook = _webhook(policy, "validate", target)
    clients = hook["clientConfig"]
    if "service" in clients:
        clients["service"]["path"] = "/v1/admitlabel"
    else:
        clients["url"] = target.url.rstrip("/") + "/v1/admitlabel"  # type: ignore[union-attr]
    rule = {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["namespaces"]}
    hook.update(name=f"check-ignore-label.{target.name}.regokite.dev", rules=[rule], matchPolicy="Exact")
    return hook


def _webhooks(policies: list[AdmissionPolicy], mode: str, target: WebhookTarget) -> list[dict[str, Any]]:
    hooks = [_webhook(p, mode, target) for p in policies if p.constraint_kind is None]
    kinds = sorted({p.constraint_kind for p in policies if p.constraint_kind is not None})
    for kind in kinds:
        hooks.append(_constraint_webhook(kind, [p for p in policies if p.constraint_kind == kind], target))
    return hooks


def _constraint_webhook(kind: str, constraints: list[AdmissionPolicy], target: WebhookTarget) -> dict[str, Any]:
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
    hook = _webhook(constraints[0], "validate", target, path_name=kind.lower())
    hook.update(
        name=f"{kind.lower()}.constraints.regokite.dev",
        rules=[rule],
        namespaceSelector=_namespace_selector(None, (), (), target.namespace),
    )
    hook.pop("objectSelector", None)
    return hook


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


def _webhook(policy: AdmissionPolicy, mode: str, target: WebhookTarget, path_name: str | None = None) -> dict[str, Any]:
    path = service_path(mode, path_name or policy.name)
    client: dict[str, Any]
    if target.url:
        client = {"url": target.url.rstrip("/") + path}
    else:
        client = {"service": {"name": target.service, "namespace": target.namespace, "port": target.port, "path": path}}
    if target.ca_bundle is not None and not target.cert_manager_certificate:
        client["caBundle"] = target.ca_bundle
    match = policy.match
    if not isinstance(match, Match):  # a constraint: its caller sets rules and selectors
        match = Match()
    webhook: dict[str, Any] = {
        "name": f"{policy.name.replace('_', '-')}.{mode}.regokite.dev",
        "clientConfig": client,
        "rules": [rule.as_webhook_rule() for rule in match.rules],
        "namespaceSelector": _namespace_selector(
            match.namespace_selector, match.namespaces, match.excluded_namespaces, target.namespace
        ),
        "failurePolicy": policy.failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1", "v1beta1"],
        "timeoutSeconds": target.timeout_seconds,
        "matchPolicy": "Equivalent",
    }
    if match.object_selector is not None:
        webhook["objectSelector"] = match.object_selector
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
