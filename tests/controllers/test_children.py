"""Claiming, decorating desired children and planning the writes."""

from __future__ import annotations

from regokite.controllers.children import (
    CONTROLLER_UID_LABEL,
    HASH_ANNOTATION,
    decorate_child,
    desired_status,
    is_subset,
    plan_children,
)
from regokite.controllers.composite.decisions import claim, parent_selector
from regokite.controllers.definitions import (
    ChildResource,
    CompositeController,
    Hooks,
    HookTarget,
    ParentResource,
)
from regokite.controllers.hooks import ChildType
from regokite.selectors import Selector, parse_selector

CM = ChildType("v1", "configmaps", "ConfigMap", True)
PARENT = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1", "generation": 3},
    "spec": {"selector": {"matchLabels": {"app": "p"}}},
}


def definition(method: str = "InPlace", generate: bool = True) -> CompositeController:
    return CompositeController(
        name="things",
        parent=ParentResource("example.com/v1", "things"),
        children=(ChildResource("v1", "configmaps", update_method=method),),
        hooks=Hooks(sync=HookTarget("things")),
        generate_selector=generate,
    )


def cm(name: str, data: dict | None = None, **meta) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", **meta},
        "data": data,
    }


def owned(obj: dict, d: CompositeController) -> dict:
    """What the API server would hold after regokite applied `obj`."""
    return decorate_child(d, PARENT, obj) | {"metadata": {**decorate_child(d, PARENT, obj)["metadata"], "uid": "c"}}


def test_generated_selectors_use_the_parent_uid() -> None:
    assert parent_selector(definition(), PARENT) == Selector(((CONTROLLER_UID_LABEL, "uid-1"),))
    assert parent_selector(definition(generate=False), PARENT).matches({"app": "p", "x": "y"})


def test_selector_expressions() -> None:
    s = parse_selector({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]})
    assert s.matches({"tier": "a"}) and not s.matches({"tier": "c"}) and not s.matches({})
    assert parse_selector({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}).matches({})
    assert s.query() == "tier in (a,b)"


def test_claiming_owns_adopts_releases_and_ignores_others() -> None:
    sel = Selector((("app", "p"),))
    ours = {"controller": True, "uid": "uid-1"}
    theirs = {"controller": True, "uid": "other"}
    mine = cm("mine", labels={"app": "p"}, ownerReferences=[ours])
    orphan = cm("orphan", labels={"app": "p"})
    stray = cm("stray", labels={"app": "q"}, ownerReferences=[ours])
    foreign = cm("foreign", labels={"app": "p"}, ownerReferences=[theirs])
    unrelated = cm("unrelated", labels={"app": "q"})
    claims = claim(PARENT, sel, [mine, orphan, stray, foreign, unrelated])
    assert [o["metadata"]["name"] for o in claims.owned] == ["mine"]
    assert [o["metadata"]["name"] for o in claims.adopt] == ["orphan"]
    assert [o["metadata"]["name"] for o in claims.release] == ["stray"]


def test_a_deleting_parent_adopts_nothing() -> None:
    deleting = {**PARENT, "metadata": {**PARENT["metadata"], "deletionTimestamp": "now"}}
    assert claim(deleting, Selector((("app", "p"),)), [cm("orphan", labels={"app": "p"})]).adopt == []


def test_decorated_children_carry_owner_label_and_hash() -> None:
    child = decorate_child(definition(), PARENT, cm("a", {"k": "v"}))
    meta = child["metadata"]
    assert meta["labels"] == {CONTROLLER_UID_LABEL: "uid-1"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "name": "p",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert len(meta["annotations"][HASH_ANNOTATION]) == 20


def test_plan_creates_missing_deletes_unwanted_and_leaves_matching_alone() -> None:
    d = definition()
    same = cm("same", {"k": "v"})
    observed = {CM.key: [owned(same, d), owned(cm("old"), d)]}
    actions = plan_children(d, PARENT, [CM], observed, [same, cm("new")])
    assert sorted(a.describe() for a in actions) == ["create ConfigMap ns/new", "delete ConfigMap ns/old"]


def test_update_strategies() -> None:
    before, after = cm("a", {"k": "1"}), cm("a", {"k": "2"})
    for method, verbs in (("InPlace", ["update"]), ("Recreate", ["recreate"]), ("OnDelete", [])):
        d = definition(method)
        actions = plan_children(d, PARENT, [CM], {CM.key: [owned(before, d)]}, [after])
        assert [a.verb for a in actions] == verbs, method


def test_in_place_repairs_drift_made_by_someone_else() -> None:
    d = definition("InPlace")
    drifted = owned(cm("a", {"k": "1"}), d)
    drifted["data"] = {"k": "edited"}
    assert [a.verb for a in plan_children(d, PARENT, [CM], {CM.key: [drifted]}, [cm("a", {"k": "1"})])] == ["update"]


def test_subset_comparison_is_apply_semantics() -> None:
    assert is_subset({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3})
    assert not is_subset({"a": [1, 2]}, {"a": [1]})
    assert not is_subset({"a": True}, {"a": 1})
    assert is_subset({"a": None}, {})


def test_status_gets_observed_generation_and_is_skipped_when_unchanged() -> None:
    assert desired_status(PARENT, {"pods": 1}) == {"pods": 1, "observedGeneration": 3}
    settled = {**PARENT, "status": {"pods": 1, "observedGeneration": 3}}
    assert desired_status(settled, {"pods": 1}) is None


def by_metacontroller(obj: dict, d: CompositeController) -> dict:
    """A child as Metacontroller leaves it: its controllerRef and labels, its last-applied annotation, no hash."""
    import json

    from regokite.controllers.children import METACONTROLLER_LAST_APPLIED

    decorated = owned(obj, d)
    meta = decorated["metadata"]
    annotations = {k: v for k, v in meta["annotations"].items() if k != HASH_ANNOTATION}
    annotations[METACONTROLLER_LAST_APPLIED] = json.dumps(obj)
    return {**decorated, "metadata": {**meta, "annotations": annotations}}


def test_children_metacontroller_made_are_taken_over_in_place_when_unchanged() -> None:
    from regokite.controllers.children import METACONTROLLER_LAST_APPLIED

    child = cm("a", {"k": "1"})
    for method in ("InPlace", "Recreate"):
        d = definition(method)
        [action] = plan_children(d, PARENT, [CM], {CM.key: [by_metacontroller(child, d)]}, [child])
        assert (action.verb, action.reason) == ("update", "taken over"), method  # never a recreate
        assert action.cleanup == {"metadata": {"annotations": {METACONTROLLER_LAST_APPLIED: None}}}


def test_taking_over_removes_what_metacontroller_applied_and_the_hook_no_longer_returns() -> None:
    before = cm("a", {"k": "1", "gone": "x"}, labels={"tier": "old"})
    after = cm("a", {"k": "1"})
    d = definition("InPlace")
    [action] = plan_children(d, PARENT, [CM], {CM.key: [by_metacontroller(before, d)]}, [after])
    assert action.verb == "update" and action.reason == "taken over, changed"
    assert action.cleanup is not None
    assert action.cleanup["data"] == {"gone": None}
    assert action.cleanup["metadata"]["labels"] == {"tier": None}
    d = definition("Recreate")  # a Recreate child that differs is recreated, as Metacontroller would
    [action] = plan_children(d, PARENT, [CM], {CM.key: [by_metacontroller(before, d)]}, [after])
    assert action.verb == "recreate"
