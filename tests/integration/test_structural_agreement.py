"""regokite's structural schema check agrees with the API server's, on the API server.

One CRD whose schema uses each kind of check; each case is created on the real
API server and its answer (refused with which errors, or stored) compared with
`regokite.structural` on the same object after the API server's pruning. The
cases are those whose wording the API server of the tests (1.20) shares with
today's; the few that changed since (`Too long`, `Too many`, indexed item
paths, range errors of non-integral numbers) follow today's and are pinned in
tests/structural/test_validation.py.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import kube
import pytest
from kubernetes import client

from regokite.structural.field_errors import aggregate
from regokite.structural.objects import prune
from regokite.structural.schema import parse
from regokite.structural.validation import validate

GROUP = "agreement.regokite.dev"
SPEC = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "minLength": 2, "pattern": "^a"},
        "e": {"type": "string", "enum": ["x", "y"]},
        "ei": {"type": "integer", "enum": [1, 2]},
        "i": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
        "ix": {"type": "integer", "exclusiveMinimum": True, "minimum": 1, "exclusiveMaximum": True, "maximum": 10},
        "n": {"type": "number", "maximum": 1.5, "minimum": 0.5},
        "b": {"type": "boolean"},
        "a": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "set": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "o": {"type": "object", "required": ["r"], "properties": {"r": {"type": "string"}}},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        "ios": {"x-kubernetes-int-or-string": True},
        "nul": {"type": "string", "nullable": True},
        "any": {"type": "string", "anyOf": [{"minLength": 5}, {"pattern": "^b"}]},
        "uuid": {"type": "string", "format": "uuid"},
        "one": {"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 7}]},
        "no": {"type": "string", "not": {"pattern": "^z"}},
        "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
CASES: list[dict[str, Any]] = [
    {"s": 5},
    {"s": "b"},
    {"s": "bcd"},
    {"s": "abc"},
    {"e": "z"},
    {"ei": 3},
    {"ei": "1"},
    {"i": 11},
    {"i": 0},
    {"i": 3},
    {"i": 4.0},
    {"ix": 1},
    {"ix": 10},
    {"n": 2.5},
    {"n": 0.25},
    {"n": "x"},
    {"b": "true"},
    {"a": []},
    {"a": "x"},
    {"set": ["a", "a"]},
    {"o": {"x": 1}},
    {"o": "s"},
    {"m": {"a": "x"}},
    {"ios": True},
    {"ios": 1.5},
    {"ios": "80%"},
    {"nul": None},
    {"any": "ccc"},
    {"uuid": "nope"},
    {"one": 6},
    {"one": 1},
    {"no": "zed"},
    {"open": {"anything": [1]}, "unknown": 1},
    {"s": 5, "e": "z", "b": 1},
]


@pytest.fixture(scope="module")
def things(api: client.ApiClient) -> str:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"things.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": SPEC}}},
                }
            ],
        },
    }
    kube.install_crd(api, crd)
    return f"/apis/{GROUP}/v1/things"


def test_the_api_server_and_regokite_refuse_the_same_objects_with_the_same_errors(
    api: client.ApiClient, things: str
) -> None:
    schema = parse({"type": "object", "properties": {"spec": SPEC}}, "openAPIV3Schema")
    differences = []
    for i, spec in enumerate(CASES):
        obj = {"apiVersion": f"{GROUP}/v1", "kind": "Thing", "metadata": {"name": kube.unique_name(f"c{i}")}}
        obj["spec"] = copy.deepcopy(spec)
        try:
            kube.create(api, things, obj)
            theirs = "stored"
        except client.ApiException as exc:
            assert exc.status == 422, exc.body
            theirs = json.loads(exc.body)["message"].partition(" is invalid: ")[2]
        pruned = copy.deepcopy(obj)
        prune(pruned, schema, root=True)
        if spec.get("nul", 1) is None:  # a nullable null is kept, and valid
            assert pruned["spec"]["nul"] is None
        errors = validate(pruned, schema)
        ours = aggregate(errors) if errors else "stored"
        if _sorted(ours) != _sorted(theirs):
            differences.append(f"{json.dumps(spec)}\n  api server: {theirs}\n  regokite:   {ours}")
    assert not differences, "\n".join(differences)


def _sorted(message: str) -> list[str]:
    """Several errors in the API server's order (Go's map order for an object's fields): compared as a set."""
    if message.startswith("[") and message.endswith("]"):
        return sorted(message[1:-1].split(", "))
    return [message]
