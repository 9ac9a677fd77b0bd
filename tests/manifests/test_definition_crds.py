"""The definition CRDs: every field of every shipped definition is declared by its schema (nothing a user
writes is pruned by the API server), required fields match what regokite's loader requires, and
`regokite manifests controller` ships them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from regokite import yamldoc
from regokite.controllers import definitions
from regokite.manifests import definition_crds, deploy, generate

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "policies").glob("*/*/*.yaml"))


def undeclared(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Paths in `value` that the structural schema would prune (not declared, no preserve-unknown-fields)."""
    if isinstance(value, dict) and schema.get("type") == "object":
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return []
        if "additionalProperties" in schema:
            return [p for k, v in value.items() for p in undeclared(schema["additionalProperties"], v, f"{path}.{k}")]
        props = schema.get("properties", {})
        if not props:  # metadata: kept whole by the API server
            return []
        return [
            p
            for k, v in value.items()
            for p in (undeclared(props[k], v, f"{path}.{k}") if k in props else [f"{path}.{k}"])
        ]
    if isinstance(value, list) and schema.get("type") == "array":
        return [p for i, v in enumerate(value) for p in undeclared(schema["items"], v, f"{path}[{i}]")]
    return []


def crd_for(doc: dict[str, Any]) -> dict[str, Any]:
    group = doc["apiVersion"].split("/")[0]
    return next(
        c for c in definition_crds.crds() if c["spec"]["group"] == group and c["spec"]["names"]["kind"] == doc["kind"]
    )


def shipped_definitions() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for file in SHIPPED:
        for doc in yamldoc.load_all(file.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in ("CompositeController", "DecoratorController", "Watch"):
                found.append((f"{file.relative_to(ROOT)}: {doc['metadata']['name']}", doc))
    return found


def test_there_are_shipped_definitions_of_every_kind() -> None:
    kinds = {doc["kind"] for _, doc in shipped_definitions()}
    assert kinds == {"CompositeController", "DecoratorController", "Watch"}


@pytest.mark.parametrize(("where", "doc"), shipped_definitions(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_field_of_a_shipped_definition_is_declared(where: str, doc: dict[str, Any]) -> None:
    schema = crd_for(doc)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    # spec keeps unknown fields for regokite's checker to refuse by path; check against the declared ones alone
    strict = {**schema, "properties": {**schema["properties"], "spec": dict(schema["properties"]["spec"])}}
    strict["properties"]["spec"].pop("x-kubernetes-preserve-unknown-fields")
    assert undeclared(strict, doc) == [], where


def test_the_schema_declares_every_field_the_loader_accepts() -> None:
    composite = definition_crds.composite_controller()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = composite["properties"]["spec"]
    assert set(spec["properties"]) == {
        "parentResource",
        "childResources",
        "resyncPeriodSeconds",
        "generateSelector",
        "hooks",
    }
    assert spec["required"] == ["parentResource"]
    hook = spec["properties"]["hooks"]["properties"]["sync"]["properties"]
    assert set(hook) == {"version", "webhook", "rego"}
    assert composite["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_names_scope_and_status_subresource() -> None:
    by_name = {c["metadata"]["name"]: c for c in definition_crds.crds()}
    assert set(by_name) == {
        f"compositecontrollers.{definitions.API_GROUP}",
        f"decoratorcontrollers.{definitions.API_GROUP}",
        "watches.regokite.dev",
    }
    assert by_name["compositecontrollers.metacontroller.k8s.io"]["spec"]["scope"] == "Cluster"
    assert by_name["compositecontrollers.metacontroller.k8s.io"]["spec"]["names"]["shortNames"] == ["cc", "cctl"]
    assert by_name["watches.regokite.dev"]["spec"]["scope"] == "Namespaced"
    for crd in by_name.values():
        assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_manifests_controller_ships_them_unless_no_crds() -> None:
    def crd_names(objects: list[dict[str, Any]]) -> list[str]:
        return [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]

    with_crds = crd_names(generate.controller_manifests(deploy.controller_options()))
    for crd in definition_crds.crds():
        assert with_crds.count(crd["metadata"]["name"]) == 1
    assert crd_names(generate.controller_manifests(deploy.controller_options(include_crds=False))) == []
