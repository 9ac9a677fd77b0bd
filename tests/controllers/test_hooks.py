"""The hook contract: request shape, evaluation of packages and rules, output translation."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite import outline
from regokite.bundle import load_bundle
from regokite.controllers.definitions import HookTarget
from regokite.controllers.hooks import (
    ChildType,
    LocalHooks,
    child_name_key,
    group_children,
    resolve_hook,
    run_hook,
    sync_request,
    translate_response,
)
from regokite.engine import open_engine
from regokite.errors import HookError

POD = ChildType("v1", "pods", "Pod", True)
RB = ChildType("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", True)
NS = ChildType("v1", "namespaces", "Namespace", False)
PARENT = {"apiVersion": "example.com/v1", "kind": "P", "metadata": {"name": "p", "namespace": "team", "uid": "u1"}}


def translate(raw: dict, types=(POD, RB), parent=PARENT, namespaced=True):
    return translate_response("controllers.x", raw, types=types, parent=parent, parent_namespaced=namespaced)


def test_children_are_grouped_by_kind_and_api_version_and_every_type_is_present() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "team"}}
    grouped = group_children([POD, RB], {POD.key: [pod]}, parent_namespaced=True)
    assert grouped == {"Pod.v1": {"a": pod}, "RoleBinding.rbac.authorization.k8s.io/v1": {}}


def test_a_cluster_scoped_parent_sees_namespaced_children_as_namespace_slash_name() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "team"}}
    assert group_children([POD], {POD.key: [pod]}, parent_namespaced=False) == {"Pod.v1": {"team/a": pod}}


def test_hook_version_v2_keys_every_namespaced_child_namespace_slash_name() -> None:
    """Metacontroller's UniformObjectMap: the same key whatever the parent's scope; cluster-scoped
    objects by name; every declared type still present when empty."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "team"}}
    grouped = group_children([POD, RB], {POD.key: [pod]}, parent_namespaced=True, uniform=True)
    assert grouped == {"Pod.v1": {"team/a": pod}, "RoleBinding.rbac.authorization.k8s.io/v1": {}}
    assert group_children([POD], {POD.key: [pod]}, parent_namespaced=False, uniform=True) == {"Pod.v1": {"team/a": pod}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    assert child_name_key(ns, parent_namespaced=False, uniform=True) == "team"


def test_the_request_has_exactly_metacontrollers_fields() -> None:
    request = sync_request({"kind": "CompositeController"}, PARENT, {"Pod.v1": {}})
    assert set(request) == {"controller", "parent", "children", "related", "finalizing"}
    assert request["finalizing"] is False and request["related"] == {}


def test_children_default_to_the_parents_namespace() -> None:
    out = translate({"children": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}]})
    assert out.children[0]["metadata"] == {"name": "a", "namespace": "team"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"children": [{"kind": "Pod", "metadata": {"name": "a"}}]}, "children[0] has no apiVersion"),
        ({"children": [{"apiVersion": "v1", "metadata": {"name": "a"}}]}, "children[0] has no kind"),
        ({"children": [{"apiVersion": "v1", "kind": "Pod", "metadata": {}}]}, "children[0] has no metadata.name"),
        (
            {"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]},
            "is a Secret.v1, not a declared child type",
        ),
        (
            {"children": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "other"}}]},
            "outside the parent's namespace 'team'",
        ),
        ({"children": {"a": {}}}, "must be an array or set of objects"),
        ({"status": "ok"}, "rule status: must be an object"),
        ({"resyncAfterSeconds": "5"}, "rule resyncAfterSeconds: must be a number"),
        ({"finalized": "yes"}, "rule finalized: must be true or false"),
        ({"events": [{"type": "Loud", "reason": "R", "message": "m"}]}, "events[0].type must be Normal or Warning"),
    ],
)
def test_invalid_output_names_package_rule_and_value(raw: dict, message: str) -> None:
    with pytest.raises(HookError) as info:
        translate(raw)
    assert "policy controllers.x" in str(info.value)
    assert message in str(info.value)


def test_duplicate_children_are_refused() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}
    with pytest.raises(HookError, match="appears twice"):
        translate({"children": [pod, pod]})


def test_cluster_scoped_children_have_no_namespace() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    assert translate({"children": [ns]}, types=(NS,), namespaced=False).children[0]["metadata"] == {"name": "n"}


def test_valid_output_with_events() -> None:
    out = translate(
        {
            "status": {"ok": True},
            "resyncAfterSeconds": 2.5,
            "finalized": True,
            "events": [{"type": "Warning", "reason": "Expired", "message": "gone"}],
        }
    )
    assert (out.status, out.resync_after_seconds, out.finalized) == ({"ok": True}, 2.5, True)
    assert out.events[0].reason == "Expired"


V0_POLICY = """
package controller

children[rb] {
    rb := {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": input.parent.metadata.name}}
}

status = {"n": count(input.children["RoleBinding.rbac.authorization.k8s.io/v1"])}
"""

RULE_POLICY = """
package whole

sync := {"children": [], "status": {"who": input.parent.metadata.name}}
"""


def engine_and_packages(tmp_path: Path, text: str, v0: bool):
    (tmp_path / "p.rego").write_text(text)
    bundle = load_bundle([tmp_path], v0_compatible=v0)
    return open_engine(bundle), outline.packages(outline.outline(bundle.modules))


def test_a_v0_package_is_evaluated_rule_by_rule_and_a_partial_set_becomes_a_list(tmp_path: Path) -> None:
    engine, packages = engine_and_packages(tmp_path, V0_POLICY, v0=True)
    hook = resolve_hook(HookTarget("controller", "webhook", "http://opa:8181/v0/data/controller", "v0"), packages)
    request = sync_request({}, PARENT, group_children([RB], {}, True))
    out = run_hook(LocalHooks(engine), hook, request, types=[RB], parent=PARENT, parent_namespaced=True)
    assert [c["metadata"] for c in out.children] == [{"name": "p", "namespace": "team"}]
    assert out.status == {"n": 0}


def test_a_target_naming_a_rule_uses_its_value_as_the_whole_response(tmp_path: Path) -> None:
    engine, packages = engine_and_packages(tmp_path, RULE_POLICY, v0=False)
    hook = resolve_hook(HookTarget("whole.sync"), packages)
    assert hook.whole_rule
    out = run_hook(
        LocalHooks(engine), hook, sync_request({}, PARENT, {}), types=[], parent=PARENT, parent_namespaced=True
    )
    assert out.status == {"who": "p"}


def test_a_missing_package_is_reported_with_the_known_ones(tmp_path: Path) -> None:
    _, packages = engine_and_packages(tmp_path, RULE_POLICY, v0=False)
    with pytest.raises(HookError, match=r"no such package or rule .*packages: whole"):
        resolve_hook(HookTarget("nothing.here"), packages)


def test_a_hook_servers_url_runs_the_package_of_the_policy_file_named_after_it(tmp_path: Path) -> None:
    """`http://crd-role-controller.metacontroller/sync-crd-role` (Metacontroller's crd-roles example):
    the kube-mgmt ConfigMap crd-role-controller in metacontroller, key sync-crd-role.rego."""
    where = tmp_path / "metacontroller" / "crd-role-controller"
    where.mkdir(parents=True)
    (where / "sync-crd-role.rego").write_text('package roles\n\nstatus := {"served": true}\n')
    (tmp_path / "other.rego").write_text('package other\n\nstatus := {"served": false}\n')
    outlines = outline.outline(load_bundle([tmp_path]).modules)
    packages, files = outline.packages(outlines), outline.package_files(outlines)
    served_by = "metacontroller/crd-role-controller/sync-crd-role.rego"
    target = HookTarget("", "webhook", "http://crd-role-controller.metacontroller/sync-crd-role", served_by=served_by)
    assert resolve_hook(target, packages, files=files).package == "roles"
    missing = HookTarget("", "webhook", "http://x.metacontroller/sync", served_by="metacontroller/x/sync.rego")
    with pytest.raises(HookError, match=r"no policy file metacontroller/x/sync.rego .*a ConfigMap x in namespace"):
        resolve_hook(missing, packages, files=files)


def test_a_runtime_error_in_the_policy_is_a_policy_error(tmp_path: Path) -> None:
    conflict = 'package boom\n\nstatus := {"x": 1} if input.parent\n\nstatus := {"x": 2} if input.parent\n'
    engine, packages = engine_and_packages(tmp_path, conflict, v0=False)
    hook = resolve_hook(HookTarget("boom"), packages)
    with pytest.raises(HookError) as info:
        run_hook(
            LocalHooks(engine), hook, sync_request({}, PARENT, {}), types=[], parent=PARENT, parent_namespaced=True
        )
    assert info.value.reason == "PolicyError" and "policy boom" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"who": "\ud800"}, r"input\.parent\.spec\.who: string holds a lone surrogate"),
        ({"n": 2**64 + 5}, r"input\.parent\.spec\.n: integer 18446744073709551621 is outside"),
        ({"x": float("nan")}, r"input\.parent\.spec\.x: nan is not a JSON number"),
    ],
    ids=["surrogate", "2^64+5", "nan"],
)
@pytest.mark.parametrize("target", ["whole.sync", "whole"])
def test_a_parent_no_engine_may_take_fails_its_own_sync_as_a_policy_error(
    tmp_path: Path, spec: dict, problem: str, target: str
) -> None:
    # Before the input guard, the surrogate segfaulted the controller process.
    # A HookError is what the composite and decorator runners turn into a
    # Warning Event on the parent (reason PolicyError), then requeue.
    engine, packages = engine_and_packages(tmp_path, RULE_POLICY + "\nstatus := {}\n", v0=False)
    hook = resolve_hook(HookTarget(target), packages)
    parent = {**PARENT, "spec": spec}
    with pytest.raises(HookError, match=problem) as info:
        run_hook(
            LocalHooks(engine), hook, sync_request({}, parent, {}), types=[], parent=parent, parent_namespaced=True
        )
    assert info.value.reason == "PolicyError"
