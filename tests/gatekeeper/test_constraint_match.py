"""Gatekeeper's spec.match, criterion by criterion."""

from __future__ import annotations

import pytest

from regokite.gatekeeper.match import ConstraintMatchError, NamespaceUnknown, parse_constraint_match
from regokite.selectors import glob_matches

POD_KINDS = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}


def request(kind: str = "Pod", group: str = "", name: str = "p", namespace: str = "", labels=None) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {}), **({"labels": labels} if labels else {})}
    req = {"kind": {"group": group, "version": "v1", "kind": kind}, "name": name, "object": {"metadata": meta}}
    return {**req, "namespace": namespace} if namespace else req


def matches(match: dict, req: dict, lookup=None) -> bool:
    return parse_constraint_match(match, "spec.match", lookup).matches(req)


def test_kinds_name_groups_and_kinds_with_wildcards() -> None:
    assert matches(POD_KINDS, request("Pod", namespace="a"))
    assert not matches(POD_KINDS, request("Deployment", "apps", namespace="a"))
    assert matches({"kinds": [{"apiGroups": ["*"], "kinds": ["Deployment"]}]}, request("Deployment", "apps"))
    assert matches({}, request("Anything", "x.io"))


def test_scope() -> None:
    assert matches({"scope": "Namespaced"}, request(namespace="a"))
    assert not matches({"scope": "Namespaced"}, request("Node"))
    assert matches({"scope": "Cluster"}, request("Node"))


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [("kube-*", "kube-system", True), ("*-system", "gatekeeper-system", True), ("kube-*", "my-kube", False),
     ("prod", "prod", True), ("prod", "production", False)],
)  # fmt: skip
def test_namespace_globs(pattern: str, value: str, expected: bool) -> None:
    assert glob_matches(pattern, value) is expected


def test_namespaces_apply_to_a_namespace_by_its_own_name_and_not_to_other_cluster_objects() -> None:
    only_prod = {"namespaces": ["prod-*"]}
    assert matches(only_prod, request(namespace="prod-a"))
    assert not matches(only_prod, request(namespace="dev"))
    assert matches(only_prod, request("Namespace", name="prod-b"))
    assert not matches(only_prod, request("Namespace", name="dev"))
    assert matches(only_prod, request("Node", name="n1"))  # cluster-scoped: namespaces do not apply
    assert not matches({"excludedNamespaces": ["kube-*"]}, request("Namespace", name="kube-system"))
    assert not matches({"excludedNamespaces": ["*-system"]}, request(namespace="gatekeeper-system"))


def test_label_selector_and_name() -> None:
    selector = {"labelSelector": {"matchLabels": {"app": "web"}}}
    assert matches(selector, request(labels={"app": "web"}))
    assert not matches(selector, request(labels={"app": "db"}))
    assert matches({"name": "web-*"}, request(name="web-1"))
    assert not matches({"name": "web-*"}, request(name="db-1"))


def test_namespace_selector_reads_the_namespace_or_says_it_is_missing() -> None:
    strict = {"namespaceSelector": {"matchLabels": {"strict": "true"}}}
    namespaces = {"a": {"metadata": {"name": "a", "labels": {"strict": "true"}}}, "b": {"metadata": {"name": "b"}}}
    assert matches(strict, request(namespace="a"), namespaces.get)
    assert not matches(strict, request(namespace="b"), namespaces.get)
    assert matches(strict, request("Namespace", name="c", labels={"strict": "true"}))  # its own labels
    with pytest.raises(NamespaceUnknown, match=r"missing Namespace \('c': replicate v1/namespaces") as raised:
        matches(strict, request(namespace="c"), namespaces.get)
    assert raised.value.gatekeeper == (  # Gatekeeper's autorejection, word for word
        "unable to match constraints: error matching the requested object: p :failed to run Match criteria:"
        " namespace selector for namespace-scoped object but missing Namespace"
    )


def test_bad_match_fields_are_named() -> None:
    with pytest.raises(ConstraintMatchError, match="unknown field"):
        parse_constraint_match({"kind": []}, "spec.match")
    with pytest.raises(ConstraintMatchError, match="scope must be"):
        parse_constraint_match({"scope": "Everywhere"}, "spec.match")
