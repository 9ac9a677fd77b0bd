"""Builders of AdmissionReviews as the API server sends them."""

from __future__ import annotations

import copy
import uuid
from typing import Any

RESOURCES = {
    "Deployment": ("apps", "v1", "deployments"),
    "Pod": ("", "v1", "pods"),
    "ConfigMap": ("", "v1", "configmaps"),
    "Namespace": ("", "v1", "namespaces"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
    "Scale": ("apps", "v1", "deployments"),  # the scale subresource of a Deployment
}
KIND_GROUPS = {"Scale": "autoscaling"}  # where the object's group is not its resource's


def deployment(name: str = "web", labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default", **({"labels": labels} if labels is not None else {})},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
            },
            **spec,
        },
    }


def review(
    obj: Any,
    *,
    operation: str = "CREATE",
    old: Any = None,
    api_version: str = "admission.k8s.io/v1",
    dry_run: bool = False,
    sub_resource: str | None = None,
) -> dict[str, Any]:
    subject = obj if isinstance(obj, dict) else old if isinstance(old, dict) else {}
    kind = subject.get("kind") if subject.get("kind") in RESOURCES else "Deployment"
    group, version, resource = RESOURCES[kind]
    meta = subject.get("metadata") if isinstance(subject.get("metadata"), dict) else {}
    kind_group = KIND_GROUPS.get(kind, group)
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": kind_group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": kind_group, "version": version, "kind": kind},
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": copy.deepcopy(obj),
        "oldObject": copy.deepcopy(old),
        "dryRun": dry_run,
        "options": None,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": request}


# a validating and a mutating policy the server tests serve
REPLICAS = """package admission.replicas

deny contains msg if {
	input.request.object.spec.replicas > 3
	msg := sprintf("replicas %d is more than 3", [input.request.object.spec.replicas])
}
"""


def label_policy(package: str) -> str:
    """A mutating policy in `package`: the team label added where an object has no labels."""
    return f"""package {package}

patch contains {{"op": "add", "path": "/metadata/labels", "value": {{"team": "core"}}}} if {{
	not input.request.object.metadata.labels
}}
"""
