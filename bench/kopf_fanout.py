"""The bench's Fanout job as a Kopf operator, written the way Kopf's docs show.

A peer for `bench.controller_converge`: per Fanout, three ConfigMaps owned by
it (`kopf.adopt`, created with the `kubernetes` client, replaced when they
exist) and `status.configMaps` through the handler's `patch`. Events are off
(regokite's bench controller posts none either); everything else is Kopf's
default, progress annotations included. Run by the bench as
`python -m kopf run --standalone --namespace NS bench/kopf_fanout.py`.
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.enabled = False
    kubernetes.config.load_kube_config()


@kopf.on.create("example.com", "v1", "fanouts")
@kopf.on.update("example.com", "v1", "fanouts", field="spec.value")
@kopf.on.resume("example.com", "v1", "fanouts")
def fanout(spec: kopf.Spec, name: str, namespace: str, body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    api = kubernetes.client.CoreV1Api()
    for i in range(3):
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-{i}"},
            "data": {"value": spec.get("value", "")},
        }
        kopf.adopt(child, owner=body)
        try:
            api.create_namespaced_config_map(namespace, child)
        except kubernetes.client.ApiException as exc:
            if exc.status != 409:
                raise
            api.replace_namespaced_config_map(child["metadata"]["name"], namespace, child)
    patch.status["configMaps"] = 3
