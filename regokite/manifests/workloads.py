"""Namespace, ServiceAccount, ConfigMaps of policies, Deployment, Service and PodDisruptionBudget.

The pods follow the `restricted` Pod Security Standard: non-root, read-only
root filesystem (writes go to an emptyDir at /tmp: self-signed certificates,
Prometheus' multiprocess directory), no capabilities, no privilege
escalation, the runtime's default seccomp profile.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regokite.bundle import DATA_FILES
from regokite.errors import RegokiteError
from regokite.gatekeeper.resources import may_hold_resources

Obj = dict[str, Any]

UID = 10001
OPA_IMAGE = "openpolicyagent/opa:1.4.2"
OPA_URL = "http://127.0.0.1:8181"
OPA_DIAGNOSTIC_PORT = 8282
CONFIGMAP_LIMIT = 1024 * 1024  # the API server refuses larger ConfigMaps (etcd's object limit)
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")


def labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "regokite", "app.kubernetes.io/component": component}


def namespace(name: str) -> Obj:
    # The name label is set by API servers >= 1.21 anyway; older ones need it for webhook namespaceSelectors.
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/metadata.name": name,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            },
        },
    }


def service_account(name: str, ns: str, component: str, *, automount: bool) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns, "labels": labels(component)},
        "automountServiceAccountToken": automount,
    }


# ------------------------------------------------------------------ ConfigMaps of files


@dataclass(frozen=True)
class MountedFiles:
    """A ConfigMap and the volume that rebuilds its directory tree (keys cannot contain `/`)."""

    config_map: Obj
    volume: Obj


def bundle_files(roots: list[str]) -> list[tuple[str, str]]:
    """(path under the mount, text) of every served module and data file of the policy roots.

    One root is mounted as is; several get a directory each (`0/`, `1/`, ...),
    because data files are placed by their path below their own root. Tests
    (`*_test.rego`) are left out: they are never served. YAML holding
    Gatekeeper templates or constraints is served, so it goes too.
    """
    files: list[tuple[str, str]] = []
    for index, root in enumerate(roots):
        base = Path(root)
        prefix = "" if len(roots) == 1 else f"{index}/"
        if base.is_file():
            files.append((prefix + base.name, base.read_text(encoding="utf-8")))
            continue
        if not base.is_dir():
            raise RegokiteError(f"{root}: no such file or directory")
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if name.startswith(".") or name.endswith("_test.rego"):
                    continue
                file = Path(dirpath) / name
                if (
                    name.endswith(".rego")
                    or name in DATA_FILES
                    or (file.suffix in (".yaml", ".yml") and may_hold_resources(file))
                ):
                    files.append((prefix + file.relative_to(base).as_posix(), file.read_text(encoding="utf-8")))
    return files


def config_map_key(path: str, taken: set[str]) -> str:
    """A valid ConfigMap key for `path`: `/` becomes `.`, other odd characters `-`, clashes get a hash."""
    key = _KEY_CHARS.sub("-", path.replace("/", ".")).lstrip(".") or "file"
    if key in taken or len(key) > 253:
        digest = hashlib.sha256(path.encode()).hexdigest()[:8]
        key = f"{key[:240]}-{digest}"
    taken.add(key)
    return key


def mounted_files(name: str, ns: str, component: str, volume: str, files: list[tuple[str, str]]) -> MountedFiles:
    taken: set[str] = set()
    data: dict[str, str] = {}
    items = []
    for path, text in files:
        key = config_map_key(path, taken)
        data[key] = text
        items.append({"key": key, "path": path})
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise RegokiteError(
            f"the files for ConfigMap {name} take {size} bytes, over the 1 MiB a ConfigMap may hold: "
            "bake them into the image (/policies) instead"
        )
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels(component)},
        "data": data,
    }
    return MountedFiles(config_map, {"name": volume, "configMap": {"name": name, "items": items}})


# ------------------------------------------------------------------------- containers


def pod_security_context() -> Obj:
    return {
        "runAsNonRoot": True,
        "runAsUser": UID,
        "runAsGroup": UID,
        "fsGroup": UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> Obj:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def probe(path: str, port: str | int, scheme: str = "HTTP", *, period: int = 10, failures: int = 3) -> Obj:
    return {
        "httpGet": {"path": path, "port": port, "scheme": scheme},
        "periodSeconds": period,
        "timeoutSeconds": 3,
        "failureThreshold": failures,
    }


def resources(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> Obj:
    return {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu_limit, "memory": memory_limit}}


def opa_container(*, image: str = OPA_IMAGE, v0_compatible: bool = False) -> Obj:
    """OPA serving its REST API on the pod's loopback only: nothing outside the pod can push policies.

    Its /health is served on a separate, read-only diagnostic address for the kubelet's probes.
    """
    args = [
        "run",
        "--server",
        f"--addr={OPA_URL.removeprefix('http://')}",
        f"--diagnostic-addr=0.0.0.0:{OPA_DIAGNOSTIC_PORT}",
        "--disable-telemetry",
        "--log-format=json",
    ]
    if v0_compatible:
        args.append("--v0-compatible")
    return {
        "name": "opa",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": args,
        "ports": [{"name": "opa-health", "containerPort": OPA_DIAGNOSTIC_PORT, "protocol": "TCP"}],
        "livenessProbe": probe("/health", "opa-health"),
        "readinessProbe": probe("/health", "opa-health", period=5),
        "resources": resources("50m", "64Mi", "1", "256Mi"),
        "securityContext": container_security_context(),
    }


def pod_env() -> list[Obj]:
    return [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]


def deployment(
    name: str,
    ns: str,
    component: str,
    *,
    replicas: int,
    service_account: str,
    containers: list[Obj],
    volumes: list[Obj],
    automount_token: bool,
) -> Obj:
    selector = {"app.kubernetes.io/name": "regokite", "app.kubernetes.io/instance": name}
    pod_labels = {**labels(component), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": pod_labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": service_account,
                    "automountServiceAccountToken": automount_token,
                    "securityContext": pod_security_context(),
                    "terminationGracePeriodSeconds": 30,
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": selector},
                        }
                    ],
                    "containers": containers,
                    "volumes": volumes,
                },
            },
        },
    }


def tmp_volume() -> Obj:
    return {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}


def service(name: str, ns: str, component: str, *, port: int, target: str, port_name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns, "labels": labels(component)},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app.kubernetes.io/name": "regokite", "app.kubernetes.io/instance": name},
            "ports": [{"name": port_name, "port": port, "targetPort": target, "protocol": "TCP"}],
        },
    }


def pod_disruption_budget(name: str, ns: str, component: str) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ns, "labels": labels(component)},
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "regokite", "app.kubernetes.io/instance": name}},
        },
    }


def placeholder_ca_bundle() -> str:
    """A valid base64 caBundle that says what to put there (the API server accepts it; TLS will not)."""
    text = "# regokite placeholder: replace with the base64 PEM CA that signed the admission serving certificate\n"
    return base64.b64encode(text.encode()).decode()
