"""Render charts/regokite with Helm's own library (helm-python-sdk: Helm v4's Go SDK over ctypes) and set its
objects beside `regokite manifests`' for the same settings."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from regokite import yamldoc
from regokite.admission.webhook_knobs import settings_from_values
from regokite.manifests import bundles, chart, generate

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (the test extra) renders the chart")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "regokite"
RELEASE, NAMESPACE = "regokite", "regokite-system"
HELM_LABELS = ("app.kubernetes.io/managed-by", "helm.sh/chart")
Obj = dict[str, Any]


def merged(*layers: Obj) -> Obj:
    """Values layered as `helm -f a -f b` does: maps merge, anything else replaces."""
    out: Obj = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = copy.deepcopy(value)
    return out


def render(values: Obj, *, namespace: str = NAMESPACE) -> list[Obj]:
    rendered = helm.Chart.load(str(CHART)).render(values, name=RELEASE, namespace=namespace)
    objects = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        objects += [doc for doc in yamldoc.load_all(text) if doc]
    return objects


def comparable(objects: list[Obj]) -> dict[tuple[str, str], Obj]:
    """(kind, name) -> object without what only one side writes: Helm's labels, the webhooks' CA (the chart's
    is real, the command's a placeholder), the chart's generated TLS Secret; OPA's configuration file in the
    bundles' Secret as the document it holds (Helm's toYaml and PyYAML write it differently)."""
    out = {}
    for obj in copy.deepcopy(objects):
        labels = obj["metadata"].get("labels") or {}
        for label in HELM_LABELS:
            labels.pop(label, None)
        if obj["kind"] == "Secret" and obj["metadata"]["name"].endswith("-tls"):
            continue
        if obj["kind"] == "Secret" and obj["metadata"]["name"].endswith("-bundles"):
            obj["data"] = {k: yamldoc.load(base64.b64decode(v).decode()) for k, v in obj["data"].items()}
        for hook in obj.get("webhooks") or []:
            hook["clientConfig"].pop("caBundle", None)
        out[(obj["kind"], obj["metadata"]["name"])] = obj
    return out


def generated(role: str, values: Obj, **options: Any) -> tuple[list[Obj], Obj]:
    """`regokite manifests <role>`'s objects for the chart's `values` and the command's `options`, and the
    values the chart gets from `--helm-values` for them."""
    common = {"namespace": NAMESPACE, "include_namespace": False, "log_level": values.get("logLevel")}
    settings = settings_from_values(values)
    if role == "admission":
        options.setdefault("bundles", bundles.from_values(values))
        opts = generate.AdmissionOptions(**common, **options, webhook_settings=settings)
        return generate.admission_manifests(opts), chart.admission_values(opts)
    if role == "gatekeeper":
        exempt = (*values.get("exemptNamespaces", ()), *(f"{p}*" for p in values.get("exemptNamespacePrefixes", ())))
        operations = ("CREATE", "UPDATE", *chart.gatekeeper_operations(values))
        opts = generate.GatekeeperOptions(
            **common, **options, webhook_settings=settings, exempt_namespaces=exempt, operations=operations
        )
        return generate.gatekeeper_manifests(opts), chart.gatekeeper_values(opts)
    if role == "audit":
        audit = {
            "audit_interval": values.get("auditInterval"),
            "constraint_violations_limit": values.get("constraintViolationsLimit"),
            "audit_chunk_size": values.get("auditChunkSize"),
        }
        opts = generate.AuditOptions(**common, **options, **audit)
        return generate.audit_manifests(opts), chart.audit_values(opts)
    opts = generate.ControllerOptions(**common, **options, watch_definitions=True)
    return generate.controller_manifests(opts), chart.controller_values(opts)


def without_crds(objects: list[Obj]) -> list[Obj]:
    """The chart ships CRDs in crds/ (installed, never templated)."""
    return [o for o in objects if o["kind"] != "CustomResourceDefinition"]
