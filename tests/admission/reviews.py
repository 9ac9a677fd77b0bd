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
}


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
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    api_version: str = "admission.k8s.io/v1",
    dry_run: bool = False,
    sub_resource: str | None = None,
) -> dict[str, Any]:
    subject = obj or old or {}
    kind = subject.get("kind", "Deployment")
    group, version, resource = RESOURCES[kind]
    meta = subject.get("metadata", {})
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
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
