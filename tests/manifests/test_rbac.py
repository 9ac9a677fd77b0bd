"""RBAC comes from the definitions: what the controllers touch, with no wildcard and nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.controllers.definitions import load_definitions
from regokite.manifests import rbac

ROOT = Path(__file__).resolve().parents[2]
CONTROLLERS = ROOT / "policies" / "controllers"


def rules_by_resource(rules: list[dict]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault(f"{group}/{resource}", []).extend(rule["verbs"])
    return out


def test_hello_world_gets_parent_read_and_status_children_crud_and_events() -> None:
    perms = rbac.controller_permissions(load_definitions([CONTROLLERS / "hello_world"]))
    assert rules_by_resource(rbac.policy_rules(perms.cluster)) == {
        "example.com/helloworlds": ["get", "list", "watch"],
        "example.com/helloworlds/status": ["update", "patch"],
        "example.com/helloworlds/finalizers": ["update"],
        "/pods": ["get", "list", "watch", "create", "update", "patch", "delete"],
        "/events": ["create", "patch"],
    }
    assert not perms.namespaced and not perms.own_namespace


def test_a_finalize_hook_adds_patch_on_the_parent_for_its_finalizer(tmp_path: Path) -> None:
    text = (CONTROLLERS / "hello_world" / "controller.yaml").read_text()
    definition = tmp_path / "controller.yaml"
    definition.write_text(text + "    finalize:\n      rego:\n        package: controllers.hello_world\n")
    definitions = load_definitions([definition])
    assert definitions[0].hooks.finalize is not None
    grants = rules_by_resource(rbac.policy_rules(rbac.controller_permissions(definitions).cluster))
    assert grants["example.com/helloworlds"] == ["get", "list", "watch", "patch"]


def test_leader_election_gets_leases_in_its_own_namespace_only() -> None:
    perms = rbac.controller_permissions(load_definitions([CONTROLLERS / "hello_world"]), leader_election=True)
    assert perms.lease_name == "regokite-controller"
    objects = rbac.rbac_objects(perms, name="rk", namespace="sys", service_account="rk")
    assert objects[2]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["regokite-controller"],
            "verbs": ["get", "update"],
        },
    ]
    kinds = [(o["kind"], o["metadata"].get("namespace")) for o in objects]
    assert kinds == [("ClusterRole", None), ("ClusterRoleBinding", None), ("Role", "sys"), ("RoleBinding", "sys")]


def test_watch_namespace_puts_namespaced_resources_in_a_role_there() -> None:
    perms = rbac.controller_permissions(
        load_definitions([CONTROLLERS / "hello_world"]), namespace_scoped=True, leader_election=True
    )
    assert not perms.cluster
    objects = rbac.rbac_objects(perms, name="rk", namespace="sys", service_account="rk", watch_namespace="team-a")
    roles = {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "Role"}
    assert roles == {("Role", "team-a", "rk"), ("Role", "sys", "rk-leader-election")}


def test_a_crd_without_status_subresource_means_status_is_patched_on_the_object() -> None:
    definitions = load_definitions([CONTROLLERS / "hello_world"])
    crds = {("example.com", "helloworlds"): rbac.Crd("example.com", "helloworlds", True, status_subresource=False)}
    grants = rules_by_resource(rbac.policy_rules(rbac.controller_permissions(definitions, crds=crds).cluster))
    assert grants["example.com/helloworlds"] == ["get", "list", "watch", "patch"]


def test_crds_are_read_from_documents() -> None:
    import yaml

    crd = yaml.safe_load((CONTROLLERS / "hello_world" / "crd.yaml").read_text())
    assert rbac.crds_from_documents([crd]) == {
        ("example.com", "helloworlds"): rbac.Crd("example.com", "helloworlds", True, True)
    }


def test_wildcards_are_refused() -> None:
    with pytest.raises(ValueError):
        rbac.policy_rules({("", "*"): {"get"}})
    with pytest.raises(ValueError):
        rbac.policy_rules({("", "pods"): {"*"}})


def test_related_resources_named_by_the_user_are_read_only() -> None:
    from regokite.controllers.definitions import ResourceRule

    perms = rbac.controller_permissions(
        load_definitions([CONTROLLERS / "hello_world"]), related=[ResourceRule("v1", "configmaps")]
    )
    assert rules_by_resource(rbac.policy_rules(perms.cluster))["/configmaps"] == ["get", "list", "watch"]
