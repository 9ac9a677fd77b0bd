"""What a cluster holds for Gatekeeper's contract: the CRDs and the template status.

Pure: the ConstraintTemplate CRD itself (so `kubectl apply` of a template
works where Gatekeeper is not installed), one Constraint CRD per template
(its `spec.parameters` validated by the template's schema, as Gatekeeper
does, so `kubectl` refuses a constraint with bad parameters), and the
template's `status` in Gatekeeper's shape (`created`, `byPod[].errors`).
"""

from __future__ import annotations

import copy
from typing import Any

from regokite import crd
from regokite.gatekeeper import resources
from regokite.gatekeeper.constraint_schema import constraint_schema

POD_ID = "regokite"  # the byPod id of the webhook side (`regokite gatekeeper` beside the admission server)
AUDIT_POD_ID = "regokite-audit"  # and of `regokite audit`
MANAGED_BY = {"app.kubernetes.io/managed-by": "regokite", "gatekeeper.sh/constraint": "yes"}
_ANY = {"x-kubernetes-preserve-unknown-fields": True}
_ANY_OBJECT = {"type": "object", **_ANY}


def _versions(names: tuple[str, ...], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """All served with one schema and a status subresource; the first stored, as Gatekeeper's CRDs do."""
    return [
        {
            "name": v,
            "served": True,
            "storage": v == names[0],
            "schema": copy.deepcopy(schema),
            "subresources": {"status": {}},
        }
        for v in names
    ]


def template_crd() -> dict[str, Any]:
    """The CRD of ConstraintTemplate (templates.gatekeeper.sh v1, v1beta1, v1alpha1). Its fields are kept as
    given (regokite checks them) but for `spec.crd.spec.validation.legacySchema`, defaulted per version as
    Gatekeeper's CRD defaults it (false for v1, true before): it decides the constraints' schema, and a
    template applied as v1beta1 is read back as v1."""
    versions = []
    for version in ("v1", "v1beta1", "v1alpha1"):
        legacy = version != "v1"
        validation = {
            **_ANY_OBJECT,
            "default": {"legacySchema": legacy},
            "properties": {"legacySchema": {"type": "boolean", "default": legacy}},
        }
        crd_spec = {**_ANY_OBJECT, "properties": {"validation": validation}}
        spec = {**_ANY_OBJECT, "properties": {"crd": {**_ANY_OBJECT, "properties": {"spec": crd_spec}}}}
        schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec, "status": _ANY_OBJECT}}}
        versions += _versions((version,), schema)
    for entry in versions:
        entry["storage"] = entry["name"] == "v1"
    return _crd(resources.TEMPLATE_GROUP, "ConstraintTemplate", "constrainttemplates", "Cluster", versions)


def config_crd() -> dict[str, Any]:
    """The CRD of Gatekeeper's Config (config.gatekeeper.sh v1alpha1, namespaced)."""
    return _open_crd(resources.CONFIG_GROUP, "Config", "Namespaced", ("v1alpha1",))


# Gatekeeper's mutator kinds: plural (as its CRDs name them) and versions, the stored one first
MUTATOR_KINDS = {
    "Assign": ("assign", ("v1", "v1beta1", "v1alpha1")),
    "AssignMetadata": ("assignmetadata", ("v1", "v1beta1", "v1alpha1")),
    "ModifySet": ("modifyset", ("v1", "v1beta1", "v1alpha1")),
    "AssignImage": ("assignimage", ("v1alpha1",)),
}
MUTATOR_PLURALS = tuple(plural for plural, _ in MUTATOR_KINDS.values())
EXPANSION_PLURAL = "expansiontemplate"
_STRINGS = {"type": "array", "items": {"type": "string"}}
# applyTo entries are checked by regokite (the mutator's status says what is wrong): the API server
# the tests run (1.20, scripts/controlplane.py) refuses "" where a schema types a string, so the
# core group (`groups: [""]`) could not be written; Gatekeeper's own CRD is refused there the same way
_APPLY_TO = {"type": "array", "items": _ANY_OBJECT}
_BY_POD = {
    "type": "object",
    "properties": {
        "byPod": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "observedGeneration": {"type": "integer", "format": "int64"},
                    "operations": _STRINGS,
                    "enforced": {"type": "boolean"},
                    "errors": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {"message": {"type": "string"}, "type": {"type": "string"}},
                        },
                    },
                },
            },
        }
    },
}


def mutator_crds() -> list[dict[str, Any]]:
    """The CRDs of Assign, AssignMetadata, ModifySet and AssignImage, in the shape of Gatekeeper's:
    cluster-scoped, `applyTo`, `match`, `location`, `parameters`, `status.byPod`."""
    crds = []
    for kind, (plural, versions) in MUTATOR_KINDS.items():
        spec: dict[str, Any] = {
            "type": "object",
            "properties": {"match": _ANY_OBJECT, "location": {"type": "string"}, "parameters": _ANY_OBJECT},
        }
        if kind != "AssignMetadata":
            spec["properties"]["applyTo"] = _APPLY_TO
        schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec, "status": _BY_POD}}}
        crds.append(_crd(resources.MUTATION_GROUP, kind, plural, "Cluster", _versions(versions, schema)))
    return crds


def expansion_crd() -> dict[str, Any]:
    """The CRD of ExpansionTemplate (v1beta1 stored, v1alpha1 served), as Gatekeeper's."""
    spec = {
        "type": "object",
        "properties": {
            "applyTo": _APPLY_TO,
            "templateSource": {"type": "string"},
            "generatedGVK": _ANY_OBJECT,  # its group is "" for core kinds (see _APPLY_TO)
            "enforcementAction": {"type": "string"},
        },
    }
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec, "status": _ANY_OBJECT}}}
    versions = _versions(("v1beta1", "v1alpha1"), schema)
    return _crd(resources.EXPANSION_GROUP, "ExpansionTemplate", EXPANSION_PLURAL, "Cluster", versions)


def mutator_status(
    generation: int | None, errors: list[str], *, enforced: bool | None = None, error_type: str = "ingest_error"
) -> dict[str, Any]:
    """Gatekeeper's mutator status: one `byPod` entry, enforced unless it did not load (`enforced`: whether a
    version of it serves, its last good one when this one did not load); `error_type` is Gatekeeper's
    (`ErrConflictingSchema` for a schema conflict)."""
    by_pod: dict[str, Any] = {
        "id": POD_ID,
        "observedGeneration": generation,
        "operations": ["mutation-webhook"],
        "enforced": not errors if enforced is None else enforced,
    }
    if errors:
        by_pod["errors"] = [{"type": error_type, "message": message} for message in errors]
    return {"byPod": [by_pod]}


def _crd(group: str, kind: str, plural: str, scope: str, versions: list[dict[str, Any]]) -> dict[str, Any]:
    names = {"kind": kind, "plural": plural, "singular": kind.lower()}
    return crd.document(group, names, scope, versions, labels={"app.kubernetes.io/name": "regokite"})


def provider_crd() -> dict[str, Any]:
    """The CRD of external data's Provider (externaldata.gatekeeper.sh v1beta1, v1alpha1; cluster-scoped)."""
    return _open_crd(resources.PROVIDER_GROUP, "Provider", "Cluster", ("v1beta1", "v1alpha1"))


def syncset_crd() -> dict[str, Any]:
    """The CRD of SyncSet (syncset.gatekeeper.sh v1alpha1, cluster-scoped): more of what to replicate."""
    return _open_crd(resources.SYNCSET_GROUP, "SyncSet", "Cluster", ("v1alpha1",))


def expansion_status(meta: dict[str, Any], error: str | None) -> dict[str, Any]:
    """Gatekeeper's ExpansionTemplate status: one `byPod` entry naming the template's uid, and why it is
    not applied (`template forms expansion cycle` for each template of a cycle)."""
    by_pod: dict[str, Any] = {
        "id": POD_ID,
        "templateUID": meta.get("uid"),
        "observedGeneration": meta.get("generation"),
        "operations": ["webhook"],
    }
    if error is not None:
        by_pod["errors"] = [{"message": error}]
    return {"byPod": [by_pod]}


def provider_status(generation: int | None, error: str | None) -> dict[str, Any]:
    """Gatekeeper's Provider status: per pod, `active` and the errors that kept it out of use."""
    by_pod: dict[str, Any] = {
        "id": POD_ID,
        "active": error is None,
        "observedGeneration": generation,
        "operations": ["webhook", "audit"],
    }
    if error is not None:
        by_pod["errors"] = [{"type": "UpsertCache", "message": error}]
    return {"byPod": [by_pod]}


def _open_crd(group: str, kind: str, scope: str, versions: tuple[str, ...]) -> dict[str, Any]:
    """A CRD of one of Gatekeeper's own kinds: `spec` and `status` kept as given (regokite checks them)."""
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": _ANY_OBJECT, "status": _ANY_OBJECT}}}
    return _crd(group, kind, kind.lower() + "s", scope, _versions(versions, schema))


def constraint_plural(kind: str) -> str:
    return kind.lower()


def constraint_crd_name(kind: str) -> str:
    return f"{constraint_plural(kind)}.{resources.CONSTRAINT_GROUP}"


def constraint_crd(template: resources.Template) -> dict[str, Any]:
    """The CRD of a template's constraints (v1beta1 stored, v1alpha1 served), cluster-scoped, with the schema
    Gatekeeper gives it (`constraint_schema`: the one every loader checks constraints against, but `kinds`)."""
    openapi = constraint_schema(template)
    # `kinds[].apiGroups` holds "" for the core group: left untyped here, as applyTo above (the loaders and
    # the policy-object webhook check it typed, as Gatekeeper's CRD does)
    openapi["properties"]["spec"]["properties"]["match"]["properties"]["kinds"] = _APPLY_TO
    schema = {"openAPIV3Schema": openapi}
    versions = _versions(("v1beta1", "v1alpha1"), schema)
    plural = constraint_plural(template.kind)
    names = {"kind": template.kind, "plural": plural, "singular": plural, "categories": ["constraint", "constraints"]}
    return crd.document(resources.CONSTRAINT_GROUP, names, "Cluster", versions, labels=dict(MANAGED_BY))


def template_status(generation: int | None, errors: list[str], *, created: bool | None = None) -> dict[str, Any]:
    """Gatekeeper's template status: `created` once its constraints' CRD exists (by default: when
    there are no errors; an edit refused while the last good version serves keeps it), errors per pod."""
    by_pod: dict[str, Any] = {"id": POD_ID, "observedGeneration": generation, "operations": ["webhook"]}
    if errors:
        by_pod["errors"] = [{"code": "ingest_error", "message": message} for message in errors]
    return {"created": not errors if created is None else created, "byPod": [by_pod]}


def constraint_pod_status(
    generation: int | None,
    error: str | None,
    *,
    enforced: bool,
    pod_id: str = POD_ID,
    operations: tuple[str, ...] = ("webhook",),
) -> dict[str, Any]:
    """One process's entry in a constraint's or Config's `status.byPod`, as Gatekeeper writes one per
    pod: whether it is enforced there, and why not (or why an edit was refused while the last good
    one serves). The webhook side (`regokite gatekeeper`) and the audit each write their own."""
    entry: dict[str, Any] = {
        "id": pod_id,
        "observedGeneration": generation,
        "enforced": enforced,
        "operations": list(operations),
    }
    if error:
        entry["errors"] = [{"code": "ingest_error", "message": error}]
    return entry


def with_pod_entry(by_pod: Any, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """`status.byPod` with `entry` in place of its process's last one, the others kept, sorted by id
    as Gatekeeper's status controller lists them."""
    others = [p for p in by_pod or [] if isinstance(p, dict) and p.get("id") != entry["id"]]
    return sorted([*others, entry], key=lambda p: str(p.get("id", "")))
