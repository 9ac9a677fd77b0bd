"""The customize hook, pure parts, and the related-object -> parents index."""

from __future__ import annotations

import pytest

from regokite.controllers import customize
from regokite.controllers.hooks import ChildType
from regokite.controllers.related_resources import RelatedResources
from regokite.errors import HookError

CM = ChildType("v1", "configmaps", "ConfigMap", namespaced=True)
NS = ChildType("v1", "namespaces", "Namespace", namespaced=False)
CLUSTER_PARENT = {"metadata": {"name": "p"}}
NS_PARENT = {"metadata": {"name": "p", "namespace": "team"}}


def cm(ns: str, name: str, labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
    }


def rules(raw: list, parent: dict = CLUSTER_PARENT, namespaced: bool = False) -> tuple:
    return customize.translate_related("pkg", {"relatedResources": raw}, parent=parent, parent_namespaced=namespaced)


def test_names_and_selectors_select_related_objects() -> None:
    [by_name, by_label] = rules(
        [
            {"apiVersion": "v1", "resource": "configmaps", "namespace": "global", "names": ["a"]},
            {"apiVersion": "v1", "resource": "configmaps", "labelSelector": {"matchLabels": {"shared": "yes"}}},
        ]
    )
    assert by_name.matches(cm("global", "a")) and not by_name.matches(cm("other", "a"))
    assert not by_name.matches(cm("global", "b"))
    assert by_label.matches(cm("x", "b", {"shared": "yes"})) and not by_label.matches(cm("x", "b"))


def test_an_empty_selector_selects_everything() -> None:
    [everything] = rules([{"apiVersion": "v1", "resource": "namespaces", "labelSelector": {}}])
    assert everything.matches({"metadata": {"name": "kube-system"}})


def test_a_namespaced_parent_only_relates_its_own_namespace() -> None:
    [r] = rules([{"apiVersion": "v1", "resource": "configmaps", "names": ["a"]}], NS_PARENT, True)
    assert r.namespace == "team"
    with pytest.raises(HookError, match="outside the parent's namespace"):
        rules([{"apiVersion": "v1", "resource": "configmaps", "namespace": "x", "names": ["a"]}], NS_PARENT, True)


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"resource": "configmaps", "names": ["a"]}, "has no apiVersion"),
        ({"apiVersion": "v1", "resource": "ConfigMaps", "names": ["a"]}, "lowercase plural"),
        ({"apiVersion": "v1", "resource": "configmaps"}, "needs labelSelector"),
        ({"apiVersion": "v1", "resource": "configmaps", "names": ["a"], "labelSelector": {}}, "both labelSelector"),
        ({"apiVersion": "v1", "resource": "configmaps", "names": "a"}, "names must be a list"),
        ({"apiVersion": "v1", "resource": "configmaps", "names": ["a"], "kind": "ConfigMap"}, "unknown fields"),
    ],
)
def test_invalid_rules_name_the_rule_and_value(rule: dict, problem: str) -> None:
    with pytest.raises(HookError, match=problem) as info:
        rules([rule])
    assert "relatedResources[0]" in str(info.value) and info.value.rule == "relatedResources"


def test_related_objects_are_grouped_like_children() -> None:
    [r] = rules([{"apiVersion": "v1", "resource": "configmaps", "labelSelector": {}}])
    grouped = customize.group_related([(r, CM)], {("v1", "configmaps"): [cm("a", "x"), cm("b", "x")]}, False)
    assert set(grouped["ConfigMap.v1"]) == {"a/x", "b/x"}  # cluster-scoped parent: namespace/name
    [r] = rules([{"apiVersion": "v1", "resource": "configmaps", "names": ["x"]}], NS_PARENT, True)
    grouped = customize.group_related([(r, CM)], {("v1", "configmaps"): [cm("team", "x"), cm("b", "x")]}, True)
    assert set(grouped["ConfigMap.v1"]) == {"x"}
    assert customize.group_related([(r, CM)], {}, True) == {"ConfigMap.v1": {}}  # present even when empty


def test_a_related_change_requeues_exactly_the_parents_that_select_it() -> None:
    queued: list[tuple[str, str]] = []
    related = RelatedResources(
        manager=None,  # type: ignore[arg-type]  # the index needs no manager
        evaluator=None,  # type: ignore[arg-type]
        hook=None,  # type: ignore[arg-type]
        discovery=None,  # type: ignore[arg-type]
        controller={},
        parent_namespaced=False,
        enqueue=lambda ns, name: queued.append((ns, name)),
    )
    k = ("v1", "configmaps")
    related._index(("", "red"), rules([{"apiVersion": "v1", "resource": "configmaps", "names": ["red"]}]))
    related._index(("", "blue"), rules([{"apiVersion": "v1", "resource": "configmaps", "names": ["blue"]}]))
    related._index(("", "any"), rules([{"apiVersion": "v1", "resource": "configmaps", "labelSelector": {}}]))

    def change(obj: dict) -> list:
        queued.clear()
        new = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "2"}}
        related._on_related(k, new, {**obj, "metadata": {**obj["metadata"], "resourceVersion": "1"}})
        return sorted(queued)

    assert change(cm("s", "red")) == [("", "any"), ("", "red")]
    assert change(cm("s", "green")) == [("", "any")]
    related.forget("", "any")
    assert change(cm("s", "green")) == []
    assert change(cm("s", "blue")) == [("", "blue")]


def test_a_v2_customize_hook_lets_a_namespaced_parent_relate_any_namespace_and_cluster_objects() -> None:
    def v2(raw: list) -> tuple:
        request = {"relatedResources": raw}
        return customize.translate_related("pkg", request, parent=NS_PARENT, parent_namespaced=True, any_namespace=True)

    [elsewhere] = v2([{"apiVersion": "v1", "resource": "configmaps", "namespace": "src", "labelSelector": {}}])
    assert elsewhere.namespace == "src" and elsewhere.matches(cm("src", "a")) and not elsewhere.matches(cm("team", "a"))
    [everywhere] = v2([{"apiVersion": "v1", "resource": "configmaps", "labelSelector": {"matchLabels": {"app": "x"}}}])
    assert everywhere.namespace is None
    assert everywhere.matches(cm("a", "1", {"app": "x"})) and everywhere.matches(cm("b", "2", {"app": "x"}))
    [namespaces] = v2([{"apiVersion": "v1", "resource": "namespaces", "labelSelector": {}}])
    assert namespaces.matches({"metadata": {"name": "kube-system"}})


def test_v2_related_objects_are_keyed_namespace_slash_name_for_a_namespaced_parent_too() -> None:
    [r] = rules([{"apiVersion": "v1", "resource": "configmaps", "names": ["x"]}], NS_PARENT, True)
    objects = {("v1", "configmaps"): [cm("team", "x")], ("v1", "namespaces"): [{"metadata": {"name": "team"}}]}
    [n] = rules([{"apiVersion": "v1", "resource": "namespaces", "labelSelector": {}}])
    grouped = customize.group_related([(r, CM), (n, NS)], objects, True, uniform=True)
    assert grouped == {
        "ConfigMap.v1": {"team/x": cm("team", "x")},
        "Namespace.v1": {"team": {"metadata": {"name": "team"}}},
    }
    assert set(customize.group_related([(r, CM)], objects, True)["ConfigMap.v1"]) == {"x"}  # v1: the name
