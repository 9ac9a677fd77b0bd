"""Constraints as admission policies: Gatekeeper's input, messages and enforcement actions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from regokite.audit.scan import audited_resources
from regokite.check import check, read_manifests
from regokite.clusterdata.store import ReplicaStore, ResourceRef, TextReplicaStore
from regokite.errors import PolicyLoadError
from regokite.gatekeeper.inventory import from_replica
from regokite.manifests.webhooks import WebhookTarget, webhook_configurations
from tests.admission.reviews import review

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def policies():
    ps = load_policy_set([str(FIXTURES / d) for d in ("library", "actions", "broken")])
    yield ps
    ps.close()


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def judge(ps, obj: dict, **kw):
    return decide(ps, parse_review(json.dumps(review(obj)).encode()), mode="validate", **kw)


def test_deny_warn_and_dryrun_as_gatekeeper_formats_them(policies) -> None:
    decision = judge(policies, namespace("team-x", team="ok"))
    verdict = decision.verdict
    assert not verdict.allowed
    assert verdict.messages == [
        '[ns-must-have-owner] you must provide labels: {"owner"}',
        "[no-team-label] the team label is reserved",
    ]
    assert '[ns-should-have-cost-center] you must provide labels: {"cost-center"}' in verdict.warnings
    assert '[ns-scoped-region] you must provide labels: {"region"}' in verdict.warnings  # scoped: warn at the webhook
    assert {o.policy: o.decision for o in decision.outcomes}["ns-audit-tier"] == "dryrun"
    assert not any("tier" in m for m in verdict.messages + verdict.warnings)


def test_parameters_reach_the_template(policies) -> None:
    ok = judge(policies, namespace("team-y", owner="alice", **{"cost-center": "1", "tier": "a", "region": "eu"}))
    assert ok.verdict.allowed and ok.verdict.warnings == []
    bad = judge(policies, namespace("team-z", owner="Alice-1", **{"cost-center": "1", "tier": "a", "region": "eu"}))
    assert bad.verdict.messages == ["[ns-must-have-owner] label <owner: Alice-1> does not match the regex ^[a-z]+$"]


def test_a_constraint_kind_endpoint_runs_only_that_kind(policies) -> None:
    decision = judge(policies, namespace("team-x", team="ok"), only="k8snoteam")
    assert decision.verdict.messages == ["[no-team-label] the team label is reserved"]
    one = judge(policies, namespace("team-x"), only="ns_must_have_owner")  # the server's form of a path
    assert [o.policy for o in one.outcomes] == ["ns-must-have-owner"]


def test_a_constraint_whose_template_failed_refuses_what_it_matches(policies) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "labels": {"app": "a"}},
    }
    verdict = judge(policies, cm).verdict
    assert not verdict.allowed and verdict.code == 500
    assert any(
        m.startswith("[broken-everywhere] policy error: its ConstraintTemplate did not load") for m in verdict.messages
    )
    # the namespaceSelector constraint has no Namespace to read: it says so (Gatekeeper's words) and fails closed
    assert any(
        m.startswith(
            "[cm-in-labelled-namespaces] policy error: unable to match constraints: error matching the requested"
            " object: c :failed to run Match criteria: namespace selector for namespace-scoped object but missing"
            " Namespace ('default': replicate v1/namespaces"
        )
        for m in verdict.messages
    )


def test_webhooks_have_one_entry_per_constraint_kind(policies) -> None:
    (config,) = webhook_configurations(
        list(policies.policies), WebhookTarget("regokite", "regokite-system", "regokite")
    )
    hooks = {h["name"]: h for h in config["webhooks"]}
    hook = hooks["k8sallowedrepos.constraints.regokite.dev"]
    assert hook["clientConfig"]["service"]["path"] == "/validate/k8sallowedrepos"
    assert hook["rules"] == [
        {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["*"], "scope": "*"}
    ]
    assert hooks["k8suniqueingresshost.constraints.regokite.dev"]["rules"][0]["apiGroups"] == [
        "extensions",
        "networking.k8s.io",
    ]


def test_audit_lists_a_constraints_kinds_through_discovery(policies) -> None:
    found, skipped = audited_resources(policies, lambda group: "v1")  # offline: no discovery
    assert found == [] and "ns-must-have-owner: a constraint: its kinds need discovery (audit a cluster)" in skipped
    served = ResourceRef("", "v1", "namespaces", False)
    found, skipped = audited_resources(policies, lambda group: "v1", lambda g, k: served if k == "Namespace" else None)
    assert served in found and not any(s.startswith("ns-must-have-owner") for s in skipped)


def test_replicated_objects_are_data_inventory_for_templates(tmp_path: Path) -> None:
    """`regokite check` replicates the input's other objects: K8sUniqueIngressHost sees them in data.inventory."""
    base = FIXTURES / "library/uniqueingresshost"
    ps = load_policy_set([str(base)])
    assert ps.reads_inventory
    manifests = read_manifests([str(base / "ingress_existing.yaml"), str(base / "ingress_new.yaml")], "default")
    fresh = read_manifests([str(base / "ingress_fresh.yaml")], "default")
    check(ps, [*manifests, *fresh])
    ps.close()
    conflict = "[unique-ingress-host] ingress host conflicts with an existing ingress <a.example.com>"
    assert [m.failures for m in manifests] == [[conflict], [conflict]]
    assert fresh[0].failures == []


def test_inventory_from_the_replica_layout() -> None:
    ing = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i", "namespace": "a"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    assert from_replica({"ingresses": {"a": {"i": ing}}, "namespaces": {"a": ns}}) == {
        "cluster": {"v1": {"Namespace": {"a": ns}}},
        "namespace": {"a": {"networking.k8s.io/v1": {"Ingress": {"i": ing}}}},
    }


@pytest.mark.parametrize("store_kind", [ReplicaStore, TextReplicaStore], ids=["objects", "text"])
def test_namespace_selector_reads_replicated_namespaces(store_kind: type[ReplicaStore]) -> None:
    """From a store of the objects, or of their JSON text (an admission worker's mirror)."""
    ps = load_policy_set([str(FIXTURES / d) for d in ("library", "actions")])
    store = store_kind()
    for name, labels in (("strict-ns", {"strict": "true"}), ("lax-ns", {})):
        store.put("namespaces", namespace(name, **labels), namespaced=False)
    ps.follow(store)

    def configmap(ns: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": ns}}

    assert judge(ps, configmap("strict-ns")).verdict.messages == [
        '[cm-in-labelled-namespaces] you must provide labels: {"app"}'
    ]
    assert judge(ps, configmap("lax-ns")).verdict.allowed
    unknown = judge(ps, configmap("elsewhere")).verdict
    assert not unknown.allowed and "replicate v1/namespaces" in unknown.messages[0]
    ps.close()


def test_a_gatekeeper_config_names_what_to_replicate(tmp_path: Path) -> None:
    ps = load_policy_set([str(FIXTURES / "library/uniqueingresshost"), str(FIXTURES / "sync")])
    assert ps.replicate == (
        ResourceRef("", "v1", "namespaces", namespaced=False),
        ResourceRef("networking.k8s.io", "v1", "ingresses", namespaced=True),
    )
    ps.close()
    (tmp_path / "config.yaml").write_text(
        (FIXTURES / "sync/config.yaml").read_text().replace("        kind: Namespace\n", "")
    )
    with pytest.raises(PolicyLoadError, match=r"syncOnly\[1\] needs version and kind"):
        load_policy_set([str(tmp_path)])


def config_match(*entries: tuple[list[str], list[str]]) -> str:
    """Gatekeeper's Config whose `spec.match` holds these (excludedNamespaces, processes) entries."""
    head = "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\n"
    head += "metadata: {name: config, namespace: gatekeeper-system}\nspec:\n  match:\n"
    return head + "".join(
        f"    - excludedNamespaces: {json.dumps(names)}\n      processes: {json.dumps(processes)}\n"
        for names, processes in entries
    )


@contextmanager
def library_with_config(tmp_path: Path, config: str) -> Iterator[PolicySet]:
    """The fixture library with this Config beside it, closed after use."""
    (tmp_path / "config.yaml").write_text(config)
    ps = load_policy_set([str(FIXTURES / "library"), str(tmp_path)])
    try:
        yield ps
    finally:
        ps.close()


CONFIG_MATCH = config_match((["kube-*", "team-x"], ["*"]), (["only-synced"], ["sync"]))


def test_a_config_excludes_namespaces_from_every_constraint_as_gatekeeper_does(tmp_path: Path) -> None:
    with library_with_config(tmp_path, CONFIG_MATCH) as ps:
        assert judge(ps, namespace("team-x", team="ok")).verdict.allowed  # excluded by name
        assert judge(ps, namespace("kube-public")).verdict.allowed  # by prefix glob
        assert not judge(ps, namespace("only-synced")).verdict.allowed  # a sync-only entry excludes nothing here
        assert not judge(ps, namespace("team-y")).verdict.allowed


def test_a_malformed_config_match_fails_the_load(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(CONFIG_MATCH.replace('processes: ["sync"]', 'processes: ["everything"]'))
    with pytest.raises(PolicyLoadError, match=r"spec.match\[1\].processes must list some of"):
        load_policy_set([str(FIXTURES / "library"), str(tmp_path)])


PER_PROCESS = config_match((["audit-only"], ["audit"]), (["webhook-only"], ["webhook"]), (["synced-out"], ["sync"]))


def test_a_config_entry_excludes_only_from_the_processes_it_names(tmp_path: Path) -> None:
    from regokite.admission.review import creation_review

    with library_with_config(tmp_path, PER_PROCESS) as ps:

        def audited(name: str) -> bool:
            review = creation_review(namespace(name), ("", "v1", "namespaces"), "audit", process="audit")
            return decide(ps, review, mode="validate").verdict.allowed

        assert not judge(ps, namespace("audit-only")).verdict.allowed  # the webhook still judges it
        assert audited("audit-only")  # the audit skips it
        assert judge(ps, namespace("webhook-only")).verdict.allowed
        assert not audited("webhook-only")
        assert ps.sync_excluded == ("synced-out",)
        assert not judge(ps, namespace("synced-out")).verdict.allowed and not audited("synced-out")


SYNCSET = """apiVersion: syncset.gatekeeper.sh/v1alpha1
kind: SyncSet
metadata: {name: syncset-1}
spec:
  gvks:
    - {group: "", version: v1, kind: Namespace}
    - {group: networking.k8s.io, version: v1, kind: Ingress}
"""


def test_syncsets_add_to_what_is_replicated_with_the_configs_sync_only(tmp_path: Path) -> None:
    (tmp_path / "syncset.yaml").write_text(SYNCSET)
    (tmp_path / "config.yaml").write_text((FIXTURES / "sync/config.yaml").read_text())
    ps = load_policy_set([str(tmp_path)])
    try:
        assert {str(r) for r in ps.replicate} >= {"v1/namespaces", "networking.k8s.io/v1/ingresses"}
    finally:
        ps.close()
    (tmp_path / "syncset.yaml").write_text(SYNCSET.replace("kind: Namespace}", "}"))
    with pytest.raises(PolicyLoadError, match=r"SyncSet syncset-1 spec.gvks\[0\] needs version and kind"):
        load_policy_set([str(tmp_path)])
