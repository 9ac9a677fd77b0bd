"""The CustomResourceDefinitions of the definitions `regokite controller` reads: Metacontroller's
CompositeController and DecoratorController (`metacontroller.k8s.io/v1alpha1`, cluster-scoped, short
names as Metacontroller's) and regokite's Watch (`regokite.dev/v1alpha1`, namespaced).

The schemas type every field Metacontroller's API types declare, so `kubectl explain` and
server-side validation work; `spec` keeps unknown fields (`x-kubernetes-preserve-unknown-fields`)
instead of letting the API server prune them silently, so regokite's own checker can refuse them
with their field path. `status` is open: a definition's status is written by its controller.
"""

from __future__ import annotations

from typing import Any

from regokite import crd
from regokite.controllers import definitions
from regokite.controllers.watch import decisions as watch

Obj = dict[str, Any]

_STRING: Obj = {"type": "string"}
_OPEN: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _object(properties: Obj, required: tuple[str, ...] = (), *, keep_unknown: bool = False) -> Obj:
    out: Obj = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    if keep_unknown:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _array(items: Obj) -> Obj:
    return {"type": "array", "items": items}


_LABEL_SELECTOR = _object(
    {
        "matchLabels": {"type": "object", "additionalProperties": _STRING},
        "matchExpressions": _array(
            _object(
                {"key": _STRING, "operator": _STRING, "values": _array(_STRING)},
                ("key", "operator"),
            )
        ),
    }
)
_ANNOTATION_SELECTOR = _object(
    {
        "matchAnnotations": {"type": "object", "additionalProperties": _STRING},
        "matchExpressions": _LABEL_SELECTOR["properties"]["matchExpressions"],
    }
)
_WEBHOOK = _object(
    {
        "url": _STRING,
        "timeout": _STRING,
        "path": _STRING,
        "service": _object(
            {"name": _STRING, "namespace": _STRING, "port": {"type": "integer"}, "protocol": _STRING}, ("name",)
        ),
        "etag": _OPEN,
        "responseUnMarshallMode": _STRING,
        "caBundle": _STRING,
    }
)
_HOOK = _object(
    {
        "version": _STRING,
        "webhook": _WEBHOOK,
        "rego": _object({"package": _STRING, "timeout": _STRING}, ("package",)),  # regokite's addition
    }
)
_HOOKS = _object({"sync": _HOOK, "finalize": _HOOK, "customize": _HOOK}, keep_unknown=True)
_STATUS_CHECKS = _object(
    {"conditions": _array(_object({"type": _STRING, "status": _STRING, "reason": _STRING}, ("type",)))}
)
_UPDATE_STRATEGY = _object({"method": _STRING, "statusChecks": _STATUS_CHECKS})
_RULE = {"apiVersion": _STRING, "resource": _STRING}
_RESYNC = {"type": "number"}


def _annotations(group: str) -> Obj:
    """The API server refuses CRDs in *.k8s.io groups without the approval annotation; Metacontroller's carry it."""
    if group.endswith(".k8s.io"):
        return {"annotations": {"api-approved.kubernetes.io": "unapproved, request not yet submitted"}}
    return {}


def _crd(group: str, kind: str, plural: str, *, scope: str, short: list[str], spec: Obj, printer: list[Obj]) -> Obj:
    schema = _object(
        {"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": spec, "status": _OPEN},
        ("spec",),
    )
    version = {
        "name": "v1alpha1",
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": printer,
        "schema": {"openAPIV3Schema": schema},
    }
    return crd.document(group, crd.spec_names(kind, plural, *short), scope, [version], **_annotations(group))


def _accepted_column() -> Obj:
    return {"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Accepted')].status"}


def _metacontroller_crd(kind: str, short: list[str], spec: Obj, columns: list[Obj]) -> Obj:
    """Metacontroller's kinds are cluster-scoped; `kubectl get` shows `columns`, Accepted and Age."""
    age = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    printer = [*columns, _accepted_column(), age]
    return _crd(
        definitions.API_GROUP, kind, kind.lower() + "s", scope="Cluster", short=short, spec=spec, printer=printer
    )


def composite_controller() -> Obj:
    parent = _object(
        {
            **_RULE,
            "labelSelector": _LABEL_SELECTOR,
            "revisionHistory": _object({"fieldPaths": _array(_STRING)}),
            "ignoreStatusChanges": {"type": "boolean"},
        },
        ("apiVersion", "resource"),
    )
    child = _object({**_RULE, "updateStrategy": _UPDATE_STRATEGY}, ("apiVersion", "resource"))
    spec = _object(
        {
            "parentResource": parent,
            "childResources": _array(child),
            "resyncPeriodSeconds": _RESYNC,
            "generateSelector": {"type": "boolean"},
            "hooks": _HOOKS,
        },
        ("parentResource",),
        keep_unknown=True,
    )
    parent_column = {"name": "Parent", "type": "string", "jsonPath": ".spec.parentResource.resource"}
    return _metacontroller_crd("CompositeController", ["cc", "cctl"], spec, [parent_column])


def decorator_controller() -> Obj:
    resource = _object(
        {
            **_RULE,
            "labelSelector": _LABEL_SELECTOR,
            "annotationSelector": _ANNOTATION_SELECTOR,
            "ignoreStatusChanges": {"type": "boolean"},
        },
        ("apiVersion", "resource"),
    )
    attachment = _object({**_RULE, "updateStrategy": _UPDATE_STRATEGY}, ("apiVersion", "resource"))
    spec = _object(
        {
            "resources": _array(resource),
            "attachments": _array(attachment),
            "resyncPeriodSeconds": _RESYNC,
            "hooks": _HOOKS,
        },
        ("resources",),
        keep_unknown=True,
    )
    return _metacontroller_crd("DecoratorController", ["dec", "decorators"], spec, [])


def watch_crd() -> Obj:
    spec = _object(
        {
            "resource": _object({"apiVersion": _STRING, "resource": _STRING, "kind": _STRING}, ("apiVersion",)),
            "namespace": _STRING,
            "labelSelector": _LABEL_SELECTOR,
            "fieldSelector": _STRING,
            "resyncPeriodSeconds": _RESYNC,
            "workers": {"type": "integer", "minimum": 1, "maximum": 64},
            "policy": _object({"package": _STRING}, ("package",)),
            "params": _OPEN,
        },
        ("resource", "policy"),
        keep_unknown=True,
    )
    printer = [
        {"name": "Resource", "type": "string", "jsonPath": ".spec.resource.resource"},
        {"name": "Policy", "type": "string", "jsonPath": ".spec.policy.package"},
        _accepted_column(),
    ]
    return _crd(watch.API_GROUP, watch.KIND, "watches", scope="Namespaced", short=["rkw"], spec=spec, printer=printer)


def crds() -> list[Obj]:
    """All three, in the order `regokite manifests controller` and `deploy/` list them."""
    return [composite_controller(), decorator_controller(), watch_crd()]
