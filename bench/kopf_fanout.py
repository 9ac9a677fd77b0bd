"""The bench's Fanout job as a Kopf operator, written the way Kopf's users write it.

A peer for `bench.controller_converge`: per Fanout, three ConfigMaps owned by
it (`kopf.adopt`, created with the `kubernetes` client, replaced when they
exist: create-then-patch on 409) and `status.configMaps` through the handler's
`patch`. Events are off (regokite's bench controller posts none either);
everything else is Kopf's default, progress annotations included. Run by the
bench as `python -m kopf run --standalone --namespace NS bench/kopf_fanout.py`.

One `kubernetes` API client for the operator's life, built once the
credentials are loaded at startup: `CoreV1Api()` in every handler call (as
this peer had it) builds a new ApiClient each time, with its own connection
pool, so every parent paid new TLS handshakes and a fresh configuration copy,
which made Kopf look 1.4-1.5x slower than regokite for a cost no Kopf operator
that keeps its client pays. The client is thread-safe (urllib3's pool), and
Kopf runs sync handlers on its thread pool.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes

API: kubernetes.client.CoreV1Api | None = None  # the operator's one client, from startup on


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    global API
    settings.posting.enabled = False
    kubernetes.config.load_kube_config()
    API = kubernetes.client.CoreV1Api()


@kopf.on.create("example.com", "v1", "fanouts")
@kopf.on.update("example.com", "v1", "fanouts", field="spec.value")
@kopf.on.resume("example.com", "v1", "fanouts")
def fanout(spec: kopf.Spec, name: str, namespace: str, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    assert API is not None, "startup loads the credentials first"
    for i in range(3):
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-{i}"},
            "data": {"value": spec.get("value", "")},
        }
        kopf.adopt(child, owner=body)
        try:
            API.create_namespaced_config_map(namespace, child)
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
            API.patch_namespaced_config_map(child["metadata"]["name"], namespace, child)
    patch.status["configMaps"] = 3
