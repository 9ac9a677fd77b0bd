"""A CustomResourceDefinition document: the envelope every CRD regokite writes shares (Gatekeeper's kinds,
the PolicyReport kinds, the controller definitions' kinds), so each builder says only its names, scope
and versions."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def spec_names(kind: str, plural: str, *short_names: str) -> Obj:
    """`spec.names` with the `listKind` and `singular` the API server would default, written out."""
    names: Obj = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    if short_names:
        names["shortNames"] = list(short_names)
    return names


def document(group: str, names: Obj, scope: str, versions: list[Obj], **metadata: Any) -> Obj:
    """The CRD of `names` in `group`, named `<plural>.<group>` as the API server requires; `metadata`
    (labels, annotations) goes beside the name."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{names['plural']}.{group}", **metadata},
        "spec": {"group": group, "names": names, "scope": scope, "versions": versions},
    }
