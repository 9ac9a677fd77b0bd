"""gatekeeper-library's mutation samples, unchanged, through regokite's /mutate decision.

Each sample's documented result (mutation/pod-security-policy/*/samples and
Gatekeeper's mutation docs): the field is set on a Pod that lacks it; a
pathTest MustNotExist leaves a Pod that has it alone; Assign replaces;
ModifySet merge appends what is missing and creates the list. The patch
returned is applied as the API server would, and the result mutates to itself.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonpatch
import pytest
import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.check import check, read_manifests
from regokite.engine import EngineSettings
from tests.admission.reviews import review
from tests.gatekeeper.upstream import gatekeeper_library

PSP = "mutation/pod-security-policy"


def sample(*parts: str) -> Path:
    return gatekeeper_library() / PSP / Path(*parts)


def pod(**container: object) -> dict:
    base = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "nginx", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx", **container}]},
    }
    return base


def mutate(policy_set, obj: dict, **kw) -> tuple[dict, object]:
    decision = decide(policy_set, parse_review(json.dumps(review(obj, **kw)).encode()), mode="mutate")
    assert decision.verdict.allowed, decision.verdict.messages
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), decision.verdict.patch or [])
    return patched, decision


@pytest.fixture
def load(tmp_path: Path):
    opened = []

    def _load(*files: Path):
        for i, f in enumerate(files):
            (tmp_path / f"{i}-{f.name}").write_text(f.read_text())
        ps = load_policy_set([str(tmp_path)])
        opened.append(ps)
        return ps

    yield _load
    for ps in opened:
        ps.close()


def security_context(obj: dict, i: int = 0, key: str = "containers") -> dict:
    return obj["spec"][key][i].get("securityContext", {})


@pytest.mark.parametrize(
    ("directory", "field", "value"),
    [
        ("allow-privilege-escalation/samples/mutation.yaml", "allowPrivilegeEscalation", False),
        ("read-only-root-filesystem/samples/mutation.yaml", "readOnlyRootFilesystem", True),
        ("users/samples/mutation-mustRunAsNonRoot.yaml", "runAsNonRoot", True),
        ("users/samples/mutation-runAsGroup.yaml", "runAsGroup", 2000),
        ("users/samples/mutation-runAsUser.yaml", "runAsUser", 1000),
        (
            "selinux/samples/mutation.yaml",
            "seLinuxOptions",
            {"level": "s1:c234,c567", "user": "sysadm_u", "role": "sysadm_r", "type": "svirt_lxc_net_t"},
        ),
    ],
)
def test_container_defaults_set_when_missing_and_left_when_present(load, directory, field, value) -> None:
    ps = load(sample(*directory.split("/")))
    example = yaml.safe_load(next(sample(*directory.split("/")[:2]).glob("*/example.yaml")).read_text())
    example["metadata"]["namespace"] = "default"
    example["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    mutated, _ = mutate(ps, example)
    assert security_context(mutated)[field] == value
    has_init_variant = any(
        "-init" in d["metadata"]["name"] for d in yaml.safe_load_all(sample(*directory.split("/")).read_text())
    )
    assert (field in security_context(mutated, key="initContainers")) == has_init_variant
    assert mutated["spec"]["containers"][0]["image"] == "nginx"  # nothing else touched
    other = {"x": 1} if isinstance(value, dict) else (not value if isinstance(value, bool) else 0)
    kept, decision = mutate(ps, pod(securityContext={field: other}))
    assert security_context(kept)[field] == other
    assert not decision.verdict.patch
    again, decision = mutate(ps, mutated)
    assert again == mutated and not decision.verdict.patch  # idempotent


def test_users_sample_leaves_a_pod_that_says_run_as_root(load) -> None:
    files = sorted(sample("users", "samples").glob("mutation-*.yaml"))
    ps = load(*files)
    root = yaml.safe_load(sample("users", "samples", "users", "example-nomutation.yaml").read_text())
    root["metadata"]["namespace"] = "default"
    mutated, _ = mutate(ps, root)
    ctx = security_context(mutated)
    assert ctx["runAsUser"] == 0 and ctx["runAsNonRoot"] is False  # as written, not overridden
    assert ctx["runAsGroup"] == 2000
    assert mutated["spec"]["securityContext"] == {"fsGroup": 3000, "supplementalGroups": [3000]}
    plain = yaml.safe_load(sample("users", "samples", "users", "example.yaml").read_text())
    ctx = security_context(mutate(ps, plain)[0])
    assert (ctx["runAsUser"], ctx["runAsNonRoot"], ctx["runAsGroup"]) == (1000, True, 2000)


def test_pod_level_seccomp_default(load) -> None:
    ps = load(sample("seccomp", "samples", "mutation.yaml"))
    mutated, decision = mutate(ps, pod())
    assert mutated["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert decision.verdict.patch == [
        {"op": "add", "path": "/spec/securityContext", "value": {"seccompProfile": {"type": "RuntimeDefault"}}}
    ]
    localhost = pod()
    localhost["spec"]["securityContext"] = {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}
    assert not mutate(ps, localhost)[1].verdict.patch


def test_capabilities_assign_replaces_the_list(load) -> None:
    ps = load(sample("capabilities", "samples", "mutation-assign.yaml"))
    mutated, _ = mutate(ps, pod(securityContext={"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}))
    assert security_context(mutated)["capabilities"] == {"add": ["NEW_CAPABILITY"], "drop": ["ALL"]}
    assert security_context(mutate(ps, pod())[0])["capabilities"] == {"add": ["NEW_CAPABILITY"]}


def test_capabilities_modifyset_merges_into_the_list_and_creates_it(load) -> None:
    ps = load(sample("capabilities", "samples", "mutation-modifyset.yaml"))
    mutated, _ = mutate(
        ps, pod(securityContext={"capabilities": {"add": ["NET_ADMIN", "NEW_CAPABILITY", "NET_ADMIN"]}})
    )
    assert security_context(mutated)["capabilities"]["add"] == ["NET_ADMIN", "NEW_CAPABILITY", "NET_ADMIN"]
    mutated, _ = mutate(ps, pod(securityContext={"capabilities": {"add": ["NET_ADMIN"]}}))
    assert security_context(mutated)["capabilities"]["add"] == ["NET_ADMIN", "NEW_CAPABILITY"]
    assert security_context(mutate(ps, pod())[0])["capabilities"] == {"add": ["NEW_CAPABILITY"]}
    # match scope Namespaced: a Pod without a namespace is not mutated
    cluster = pod()
    del cluster["metadata"]["namespace"]
    assert not mutate(ps, cluster)[1].verdict.patch


def test_every_sample_together_converges_and_mutates_to_itself(load) -> None:
    files = sorted(p for p in (gatekeeper_library() / PSP).rglob("mutation*.yaml") if "modifyset" not in p.name)
    ps = load(*files)
    full = pod()
    full["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    mutated, decision = mutate(ps, full)
    assert security_context(mutated) == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["NEW_CAPABILITY"]},
        "readOnlyRootFilesystem": True,
        "runAsGroup": 2000,
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "seLinuxOptions": {"level": "s1:c234,c567", "role": "sysadm_r", "type": "svirt_lxc_net_t", "user": "sysadm_u"},
    }
    assert security_context(mutated, key="initContainers") == {
        "allowPrivilegeEscalation": False, "runAsGroup": 2000, "runAsNonRoot": True, "runAsUser": 1000,
    }  # fmt: skip
    assert "namespace" in mutated["metadata"] and mutated["metadata"] == full["metadata"]
    again, decision = mutate(ps, mutated)
    assert not decision.verdict.patch and again == mutated
    # DELETE and CONNECT are never mutated (Gatekeeper's webhook)
    assert not mutate(ps, full, operation="DELETE", old=full)[1].verdict.patch


def test_check_applies_mutators_before_constraints(tmp_path: Path) -> None:
    """The library's allow-privilege-escalation constraint refuses a Pod that does not say false;
    its mutation sample says it, so `check` (as the cluster) admits the example Pod."""
    lib = gatekeeper_library() / "library/pod-security-policy/allow-privilege-escalation"
    policy_dir = tmp_path / "policies"
    policy_dir.mkdir()
    constraint = next((lib / "samples").glob("*/constraint.yaml"))
    for i, f in enumerate((lib / "template.yaml", constraint)):
        (policy_dir / f"{i}.yaml").write_text(f.read_text())
    example = sample("allow-privilege-escalation", "samples", "default-allow-privilege-escalation", "example.yaml")
    refused = check_files(policy_dir, example)
    assert refused.failures, "the constraint alone must refuse the example"
    (policy_dir / "mutation.yaml").write_text(
        sample("allow-privilege-escalation", "samples", "mutation.yaml").read_text()
    )
    assert check_files(policy_dir, example).failures == []


def check_files(policy_dir: Path, manifest: Path):
    ps = load_policy_set([str(policy_dir)])
    manifests = read_manifests([str(manifest)], "default")
    check(ps, manifests)
    ps.close()
    return manifests[0]


def test_a_mutator_that_does_not_load_refuses_mutation_loudly(load, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        sample("seccomp", "samples", "mutation.yaml")
        .read_text()
        .replace("spec.securityContext.seccompProfile", "spec..x")
    )
    ps = load(sample("seccomp", "samples", "mutation.yaml"), bad)
    assert any("Assign k8spspseccomp: invalid spec.location" in p for p in ps.problems)
    body = parse_review(json.dumps(review(pod())).encode())
    verdict = decide(ps, body, mode="mutate").verdict
    assert not verdict.allowed and verdict.code == 500
    assert verdict.messages[0].startswith("[regokite_gatekeeper.mutation] policy error: mutators that did not load:")


def test_a_mutator_failing_on_an_object_refuses_it_naming_the_mutator(load, tmp_path: Path) -> None:
    ps = load(sample("capabilities", "samples", "mutation-modifyset.yaml"))
    verdict = decide(
        ps,
        parse_review(json.dumps(review(pod(securityContext={"capabilities": {"add": "NET_ADMIN"}}))).encode()),
        mode="mutate",
    ).verdict
    assert not verdict.allowed and verdict.code == 500
    assert verdict.messages == [
        "[regokite_gatekeeper.mutation] policy error: mutation for mutator ModifySet.mutations.gatekeeper.sh"
        " /k8spspcapabilities failed for  Pod default nginx: NET_ADMIN is not a list of values, cannot treat it"
        " as a set"
    ]


def test_a_config_excludes_namespaces_from_mutation_for_its_mutation_webhook_process(load, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\n"
        "metadata: {name: config, namespace: gatekeeper-system}\n"
        "spec:\n  match:\n  - excludedNamespaces: [kube-*]\n    processes: [mutation-webhook]\n"
        "  - excludedNamespaces: [audit-only]\n    processes: [audit]\n"
    )
    ps = load(sample("seccomp", "samples", "mutation.yaml"), config)
    for namespace, mutated in (("kube-system", False), ("audit-only", True), ("default", True)):
        obj = pod()
        obj["metadata"]["namespace"] = namespace
        assert bool(mutate(ps, obj)[1].verdict.patch) is mutated, namespace


def test_a_sidecar_opa_serves_the_same_mutation(tmp_path: Path, opa_standin) -> None:
    """The generated Rego over OPA's REST API (the stand-in) gives the embedded engine's patch."""
    opa_standin.clear()
    (tmp_path / "m.yaml").write_text(sample("seccomp", "samples", "mutation.yaml").read_text())
    body = parse_review(json.dumps(review(pod())).encode())
    patches = []
    for engine in (EngineSettings(), EngineSettings("opa", opa_standin.url)):
        ps = load_policy_set([str(tmp_path)], engine)
        patches.append(decide(ps, body, mode="mutate").verdict.patch)
        ps.close()
    assert (
        patches[0]
        == patches[1]
        == [{"op": "add", "path": "/spec/securityContext", "value": {"seccompProfile": {"type": "RuntimeDefault"}}}]
    )
