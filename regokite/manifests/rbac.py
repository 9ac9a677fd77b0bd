"""Least-privilege RBAC computed from controller definitions, without asking the API server.

Every definition names its resources as `apiVersion` + plural `resource`,
which is all an RBAC rule needs (`apiGroups` + `resources`), so the role is
derived offline, discovery-free:

* parents: get, list, watch; `<resource>/status` update, patch (the status
  write); `<resource>/finalizers` update when the controller has children
  (its children carry `blockOwnerDeletion`, which clusters with the
  OwnerReferencesPermissionEnforcement admission plugin only allow to
  someone who may update the owner's finalizers); patch on the parent itself
  when a finalize hook exists (regokite adds and removes its finalizer with a
  merge patch) or when the parent's CRD, found beside the definitions, has no
  status subresource (the status is then written on the object itself);
* children: get, list, watch, create, update, patch, delete;
* related resources: get, list, watch;
* events: create, patch (regokite records Events on parents);
* leases (`coordination.k8s.io`): create, and get, update of the one Lease
  (`resourceNames`), only in regokite's own namespace, only with leader election.

Related resources come from a customize hook at run time, so they cannot be
read off the definitions: name them (`related`) to grant get, list, watch.

Never a wildcard, but for the resources of `constraints.gatekeeper.sh`: a group that holds only
Constraint kinds, one per ConstraintTemplate, created at run time (Gatekeeper grants the same).
API discovery (`/api`, `/apis`) needs no rule: Kubernetes'
default `system:discovery` role grants it to every authenticated user.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

READ = ("get", "list", "watch")
ANY_RESOURCE_GROUPS = {"constraints.gatekeeper.sh"}  # every resource of these groups is made at run time
CRUD = ("get", "list", "watch", "create", "update", "patch", "delete")
SHARD_LEASES = ("get", "list", "create", "update", "delete")  # --shards: membership Leases named after pods
VERB_ORDER = {v: i for i, v in enumerate((*CRUD, "deletecollection"))}

# Cluster-scoped built-in resources, for `--namespace` roles (CRDs tell their own scope).
CLUSTER_SCOPED = {
    ("", "namespaces"),
    ("", "nodes"),
    ("", "persistentvolumes"),
    ("rbac.authorization.k8s.io", "clusterroles"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("apiregistration.k8s.io", "apiservices"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "volumeattachments"),
    ("scheduling.k8s.io", "priorityclasses"),
    ("node.k8s.io", "runtimeclasses"),
    ("networking.k8s.io", "ingressclasses"),
    ("certificates.k8s.io", "certificatesigningrequests"),
}


@dataclass(frozen=True)
class Crd:
    """What a CustomResourceDefinition kept beside the definitions tells about its resource."""

    group: str
    plural: str
    namespaced: bool
    status_subresource: bool


@dataclass
class Permissions:
    """Verbs per (apiGroup, resource), split by where they must be granted."""

    cluster: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    namespaced: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    own_namespace: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    lease_name: str | None = None

    def grant(self, where: dict[tuple[str, str], set[str]], group: str, resource: str, verbs: Iterable[str]) -> None:
        where.setdefault((group, resource), set()).update(verbs)


def crds_from_documents(docs: Iterable[Any]) -> dict[tuple[str, str], Crd]:
    found: dict[tuple[str, str], Crd] = {}
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc.get("spec") or {}
        group, plural = spec.get("group"), (spec.get("names") or {}).get("plural")
        if not group or not plural:
            continue
        versions = spec.get("versions") or []
        status = any("status" in (v.get("subresources") or {}) for v in versions) or "status" in (
            spec.get("subresources") or {}
        )
        found[(group, plural)] = Crd(group, plural, spec.get("scope", "Namespaced") != "Cluster", status)
    return found


def _rules_of(definition: Any) -> tuple[list[Any], list[Any], list[Any], bool]:
    """(parents, children, related, has finalize hook) of a definition, whatever its kind.

    CompositeController: `parent`, `children`. Definitions of other kinds are
    read by the same names where they exist (`resources` / `attachments` of a
    DecoratorController, `related` rules declared up front).
    """
    parents = [definition.parent] if getattr(definition, "parent", None) is not None else []
    parents += list(getattr(definition, "resources", ()) or ())
    children = list(getattr(definition, "children", ()) or ()) + list(getattr(definition, "attachments", ()) or ())
    related = list(getattr(definition, "related", ()) or ())
    hooks = getattr(definition, "hooks", None)
    return parents, children, related, getattr(hooks, "finalize", None) is not None


def controller_permissions(
    definitions: Iterable[Any],
    *,
    crds: dict[tuple[str, str], Crd] | None = None,
    namespace_scoped: bool = False,
    leader_election: bool = False,
    lease_name: str = "regokite-controller",
    related: Iterable[Any] = (),
    watched: Iterable[Any] = (),
    written: Iterable[Any] = (),
    events: bool = True,
) -> Permissions:
    """The access the controllers need; with `namespace_scoped`, namespaced resources go in a Role."""
    crds = crds or {}
    perms = Permissions()
    related_extra = list(related)

    def where(group: str, resource: str) -> dict[tuple[str, str], set[str]]:
        if not namespace_scoped:
            return perms.cluster
        crd = crds.get((group, resource))
        cluster_scoped = (group, resource) in CLUSTER_SCOPED or (crd is not None and not crd.namespaced)
        return perms.cluster if cluster_scoped else perms.namespaced

    for definition in definitions:
        parents, children, related, finalize = _rules_of(definition)
        for p in parents:
            target = where(p.group, p.resource)
            perms.grant(target, p.group, p.resource, READ)
            perms.grant(target, p.group, f"{p.resource}/status", ("update", "patch"))
            crd = crds.get((p.group, p.resource))
            if finalize or (crd is not None and not crd.status_subresource):
                perms.grant(target, p.group, p.resource, ("patch",))
            if children:
                perms.grant(target, p.group, f"{p.resource}/finalizers", ("update",))
        for c in children:
            perms.grant(where(c.group, c.resource), c.group, c.resource, CRUD)
        for r in related:
            perms.grant(where(r.group, r.resource), r.group, r.resource, READ)
    for r in related_extra:
        perms.grant(where(r.group, r.resource), r.group, r.resource, READ)
    for r in watched:  # a watch reads its resource and patches the watched objects
        perms.grant(where(r.group, r.resource), r.group, r.resource, (*READ, "patch", "update"))
    for r in written:  # what watch policies apply or delete: not in the definitions, so named by hand
        perms.grant(where(r.group, r.resource), r.group, r.resource, CRUD)
    if events:
        perms.grant(perms.namespaced if namespace_scoped else perms.cluster, "", "events", ("create", "patch"))
    if leader_election:
        perms.lease_name = lease_name
    return perms


def watched_rule(watch: Any) -> Any:
    """The ResourceRule of a Watch's resource; from its kind, the plural is the usual English one."""
    from regokite.controllers.definitions import ResourceRule

    r = watch.resource
    return ResourceRule(r.api_version, r.resource or _plural(r.kind or ""))


def _plural(kind: str) -> str:
    word = kind.lower()
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def lease_rules(name: str) -> list[dict[str, Any]]:
    """Create a Lease (a create cannot be limited by name), read and renew only this one."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [name],
            "verbs": ["get", "update"],
        },
    ]


def policy_rules(grants: dict[tuple[str, str], set[str]]) -> list[dict[str, Any]]:
    """RBAC rules, one per apiGroup and verb set, resources sorted: short and stable."""
    merged: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), verbs in grants.items():
        if not verbs or "*" in verbs or (resource == "*" and group not in ANY_RESOURCE_GROUPS) or group == "*":
            raise ValueError(f"refusing a wildcard or empty rule for {group}/{resource}: {sorted(verbs)}")
        ordered = tuple(sorted(verbs, key=lambda v: (VERB_ORDER.get(v, 99), v)))
        merged.setdefault((group, ordered), []).append(resource)
    return [
        {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
        for (group, verbs), resources in sorted(merged.items(), key=lambda kv: (kv[0][0], kv[0][1]))
    ]


def rbac_objects(
    perms: Permissions,
    *,
    name: str,
    namespace: str,
    service_account: str,
    watch_namespace: str | None = None,
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """ClusterRole/Role and their bindings for `perms`; objects only for non-empty grants."""
    labels = labels or {}
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    objects: list[dict[str, Any]] = []

    def pair(
        kind: str, role_name: str, ns: str | None, grants: dict[tuple[str, str], set[str]], lease: str | None = None
    ) -> None:
        if not grants and not lease:
            return
        meta: dict[str, Any] = {"name": role_name, **({"namespace": ns} if ns else {}), "labels": dict(labels)}
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": kind,
                "metadata": meta,
                "rules": policy_rules(grants) + (lease_rules(lease) if lease else []),
            }
        )
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": f"{kind}Binding",
                "metadata": dict(meta),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
                "subjects": subject,
            }
        )

    pair("ClusterRole", name, None, perms.cluster)
    if watch_namespace == namespace:
        own = {k: set(v) for k, v in perms.namespaced.items()}
        for k, v in perms.own_namespace.items():
            own.setdefault(k, set()).update(v)
        pair("Role", name, namespace, own, perms.lease_name)
    else:
        pair("Role", name, watch_namespace, perms.namespaced)
        pair("Role", f"{name}-leader-election", namespace, perms.own_namespace, perms.lease_name)
    return objects


CONFIGMAP_POLICY_VERBS = ("get", "list", "watch", "patch")  # read the labelled ConfigMaps, write their status


def configmap_policy_objects(
    namespaces: Iterable[str], *, name: str, namespace: str, service_account: str, labels: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """What `--policy-namespaces` needs: get/list/watch/patch on ConfigMaps (kube-mgmt's status
    annotation is a patch), in a Role per namespace, or a ClusterRole for `*`."""
    grants = {("", "configmaps"): set(CONFIGMAP_POLICY_VERBS)}
    role_name = f"{name}-policy-configmaps"
    subject = [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]
    scopes: list[str | None] = [None] if "*" in namespaces else sorted(set(namespaces))
    objects: list[dict[str, Any]] = []
    for ns in scopes:
        kind = "ClusterRole" if ns is None else "Role"
        meta: dict[str, Any] = {"name": role_name, **({"namespace": ns} if ns else {}), "labels": dict(labels or {})}
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                        "rules": policy_rules(grants)})  # fmt: skip
        objects.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": f"{kind}Binding", "metadata": dict(meta),
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
                        "subjects": subject})  # fmt: skip
    return objects
