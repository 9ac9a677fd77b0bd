"""Gatekeeper's mutator semantics, evaluated in generated Rego by regorus and by real OPA alike.

Cases follow Gatekeeper's docs (website/docs/mutation.md) and its mutation
function: keyed entries are created when missing, globs never create
elements, pathTests apply at their depth per element, AssignMetadata never
overwrites, ModifySet merges and prunes as a set, AssignImage splits a
reference as docker does, match and applyTo select, errors name the mutator.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from opa_oracle import OracleEngine

from regokite.bundle import Bundle, Module
from regokite.engine import open_engine
from regokite.gatekeeper.mutation.compile import SYSTEM, mutation_modules, package_names, system_module
from regokite.gatekeeper.mutation.library import LIBRARY, PACKAGE
from regokite.gatekeeper.mutation.mutators import MutatorError, parse_mutator


def mutators(text: str) -> list:
    return [parse_mutator(d, "m.yaml") for d in yaml.safe_load_all(text)]


def request(obj: dict, operation: str = "CREATE", namespace: str = "default") -> dict:
    group = obj["apiVersion"].rpartition("/")[0]
    return {"request": {"operation": operation, "kind": {"group": group}, "namespace": namespace, "object": obj}}


def results(text: str, *requests: dict, data: dict | None = None) -> list[Any]:
    """The system's result for each request, from both engines, which must agree."""
    bundle = Bundle(mutation_modules(mutators(text)), data or {})
    answers = []
    for engine in (open_engine(bundle), OracleEngine(bundle)):
        answers.append([engine.evaluate(f"data.{SYSTEM}.result", r) for r in requests])
        engine.close()
    assert answers[0] == answers[1], "regorus and OPA differ"
    return answers[0]


def one(text: str, obj: dict, **kw: Any) -> dict:
    return results(text, request(obj, **kw))[0]


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "docker.io/library/redis:7"}]},
}


def assign(location: str, value: Any, *, tests: str = "", match: str = "", apply_to: str = "") -> str:
    return f"""
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {{name: a}}
spec:
  applyTo: {apply_to or '[{groups: [""], kinds: [Pod], versions: [v1]}]'}
  {match}
  location: {location!r}
  parameters:
    {tests}
    assign: {{value: {json.dumps(value)}}}
"""


def test_a_keyed_entry_is_created_when_missing_and_set_when_present() -> None:
    text = assign("spec.containers[name: sidecar].image", "proxy:1")
    out = one(text, POD)["object"]
    assert out["spec"]["containers"][-1] == {"name": "sidecar", "image": "proxy:1"}
    present = copy.deepcopy(POD)
    present["spec"]["containers"].append({"name": "sidecar", "image": "old"})
    assert one(text, present)["object"]["spec"]["containers"][-1] == {"name": "sidecar", "image": "proxy:1"}


def test_a_glob_never_creates_elements_nor_the_list() -> None:
    text = assign("spec.initContainers[name: *].imagePullPolicy", "Always")
    assert one(text, POD) == {"object": POD, "iterations": 1}


def test_a_whole_keyed_element_replaces_or_appends() -> None:
    text = assign("spec.containers[name: b]", {"name": "b", "image": "x"})
    assert one(text, POD)["object"]["spec"]["containers"] == [
        {"name": "a", "image": "nginx"},
        {"name": "b", "image": "x"},
    ]
    with pytest.raises(MutatorError, match="different key"):
        mutators(assign("spec.containers[name: b]", {"name": "c"}))
    with pytest.raises(MutatorError, match="globbed list"):
        mutators(assign("spec.containers[name: *]", {"name": "c"}))


def test_path_tests_per_element() -> None:
    tests = "pathTests: [{subPath: 'spec.containers[name: *].imagePullPolicy', condition: MustNotExist}]"
    text = assign("spec.containers[name: *].imagePullPolicy", "Always", tests=tests)
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][1]["imagePullPolicy"] = "Never"
    containers = one(text, pod)["object"]["spec"]["containers"]
    assert [c["imagePullPolicy"] for c in containers] == ["Always", "Never"]
    must = "pathTests: [{subPath: 'spec.containers[name: foo]', condition: MustExist}]"
    text = assign("spec.containers[name: foo].securityContext.privileged", False, tests=must)
    assert one(text, POD)["iterations"] == 1  # no sidecar named foo is invented


def test_match_and_apply_to_select() -> None:
    text = assign("spec.priorityClassName", "low", match="match: {namespaces: [team-*], excludedNamespaces: [team-x]}")
    pods = [copy.deepcopy(POD) for _ in range(3)]
    for pod, ns in zip(pods, ("team-a", "team-x", "other"), strict=True):
        pod["metadata"]["namespace"] = ns
    got = results(text, *(request(p, namespace=p["metadata"]["namespace"]) for p in pods))
    assert [r["iterations"] for r in got] == [2, 1, 1]
    selector = (
        "match: {labelSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}, source: Generated}"
    )
    assert one(assign("spec.priorityClassName", "low", match=selector), POD)["iterations"] == 1  # not Generated
    creates = '[{groups: [""], kinds: [Pod], versions: [v1], operations: [CREATE]}]'
    text = assign("spec.priorityClassName", "low", apply_to=creates)
    assert one(text, POD)["iterations"] == 2 and one(text, POD, operation="UPDATE")["iterations"] == 1
    deployments = "[{groups: [apps], kinds: [Deployment], versions: [v1]}]"
    assert one(assign("spec.priorityClassName", "low", apply_to=deployments), POD)["iterations"] == 1


def test_namespace_selector_reads_replicated_namespaces_and_fails_without() -> None:
    text = assign("spec.priorityClassName", "low", match="match: {namespaceSelector: {matchLabels: {tier: web}}}")
    namespaces = {
        "kubernetes": {"namespaces": {"default": {"metadata": {"name": "default", "labels": {"tier": "web"}}}}}
    }
    bundle_out = results(text, request(POD), data=namespaces)[0]
    assert bundle_out["object"]["spec"]["priorityClassName"] == "low"
    error = one(text, POD)["error"]
    assert error.startswith("matching for mutator Assign.mutations.gatekeeper.sh /a failed for  Pod default web")
    assert "missing Namespace" in error


def test_assign_metadata_adds_and_never_overwrites() -> None:
    text = """
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match: {scope: Namespaced}
  location: metadata.labels.owner
  parameters: {assign: {value: admin}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: ns}
spec:
  location: metadata.annotations.ns
  parameters: {assign: {fromMetadata: {field: namespace}}}
"""
    out = one(text, POD)["object"]
    assert out["metadata"]["labels"] == {"app": "web", "owner": "admin"}
    assert out["metadata"]["annotations"] == {"ns": "default"}
    owned = copy.deepcopy(POD)
    owned["metadata"]["labels"]["owner"] = "bob"
    assert one(text, owned)["object"]["metadata"]["labels"]["owner"] == "bob"
    with pytest.raises(MutatorError, match=r"only metadata\.labels"):
        mutators(text.replace("metadata.labels.owner", "metadata.name.x"))


def pod_mutator(kind: str, name: str, location: str, parameters: object, version: str = "v1") -> str:
    """A mutator of Pods as YAML text: `parameters` in flow style (a dict's repr reads as one)."""
    return f"""
apiVersion: mutations.gatekeeper.sh/{version}
kind: {kind}
metadata: {{name: {name}}}
spec:
  applyTo: [{{groups: [""], kinds: [Pod], versions: [v1]}}]
  location: {location!r}
  parameters: {parameters}
"""


def modify_set(operation: str, values: list, location: str = "spec.containers[name: *].args") -> str:
    return pod_mutator("ModifySet", "args", location, f"{{operation: {operation}, values: {{fromList: {values}}}}}")


def test_modify_set_merge_and_prune() -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["containers"][0]["args"] = ["--v=2", "--alsologtostderr"]
    merged = one(modify_set("merge", ["--x", "--v=2", "--x"]), pod)["object"]["spec"]["containers"]
    assert merged[0]["args"] == ["--v=2", "--alsologtostderr", "--x"] and merged[1]["args"] == ["--x", "--v=2", "--x"]
    pruned = one(modify_set("prune", ["--alsologtostderr"]), pod)["object"]["spec"]["containers"]
    assert pruned[0]["args"] == ["--v=2"] and "args" not in pruned[1]
    error = one(modify_set("merge", ["x"], "spec.containers[name: *].image"), POD)["error"]
    assert error.startswith("mutation for mutator ModifySet.mutations.gatekeeper.sh /args failed for  Pod default web:")
    assert "is not a list of values, cannot treat it as a set" in error


def assign_image(**params: str) -> str:
    return pod_mutator("AssignImage", "image", "spec.containers[name:*].image", params, version="v1alpha1")


def test_assign_image_as_docker_references_split() -> None:
    images = lambda text: [c["image"] for c in one(text, POD)["object"]["spec"]["containers"]]  # noqa: E731
    assert images(assign_image(assignDomain="my.registry.io")) == [
        "my.registry.io/nginx",
        "my.registry.io/library/redis:7",
    ]
    tag = "@sha256:abcde67890123456789abc345678901a"
    assert images(assign_image(assignTag=tag)) == [f"nginx{tag}", f"docker.io/library/redis{tag}"]
    assert images(assign_image(assignPath="repo/app")) == ["repo/app", "docker.io/repo/app:7"]
    refused = [
        ({"assignPath": "my.repo.lib/app"}, "assignDomain must be set"),
        ({"assignTag": "latest"}, "assignTag"),
        ({}, "at least one of"),
        ({"assignDomain": "nodots"}, "fully-qualified"),
    ]
    for bad, why in refused:
        with pytest.raises(MutatorError, match=why):
            mutators(assign_image(**bad))


def test_gatekeeper_refusals_at_load() -> None:
    with pytest.raises(MutatorError, match="can't change metadata"):
        mutators(assign("metadata.labels.x", "y"))
    with pytest.raises(MutatorError, match="not a prefix"):
        mutators(assign("spec.x", 1, tests="pathTests: [{subPath: spec.y, condition: MustExist}]"))
    with pytest.raises(MutatorError, match="assignIf was removed"):
        mutators(assign("spec.x", 1, tests="assignIf: {in: [1]}"))
    with pytest.raises(MutatorError, match="all of group, version and kind"):
        mutators(assign("spec.x", 1, apply_to="[{kinds: [Pod]}]"))
    with pytest.raises(MutatorError, match="changing the item key"):
        mutators(assign("spec.containers[name: a].name", "b"))


def test_non_convergence_is_gatekeepers_error_after_its_bound() -> None:
    """A mutator that changes the object on every pass: passes stop at mutators + 1."""
    counter = Module(
        "<counter>.rego",
        "package regokite_gatekeeper.mutators.counter\n\n"
        'apply(o, _) := {"object": object.union(o, {"n": object.get(o, "n", 0) + 1})}\n',
    )
    fake = mutators(assign("spec.x", 1))[0]
    modules = (
        Module(f"<{PACKAGE}>.rego", LIBRARY),
        counter,
        system_module([fake], ["regokite_gatekeeper.mutators.counter"]),
    )
    for engine in (open_engine(Bundle(modules)), OracleEngine(Bundle(modules))):
        result = engine.evaluate(f"data.{SYSTEM}.result", request(POD))
        assert result == {"error": "mutation not converging for  Pod default web after 2 iterations"}
        engine.close()


def test_order_is_gatekeepers_by_kind_then_name() -> None:
    text = assign("spec.x", "assign") + "---" + modify_set("merge", ["m"], "spec.x")
    ordered = mutation_modules(mutators(text))
    assert [m.path for m in ordered][1:3] == ["<regokite_gatekeeper.mutators.assign_a>.rego",
                                              "<regokite_gatekeeper.mutators.modifyset_args>.rego"]  # fmt: skip
    assert one(text, POD)["error"].endswith("is not a list of values, cannot treat it as a set")
    assert package_names(mutators(assign("spec.x", 1) + "---" + assign("spec.y", 1))) == [
        "regokite_gatekeeper.mutators.assign_a",
        "regokite_gatekeeper.mutators.assign_a_2",
    ]


def test_regokite_test_sees_the_mutators_beside_the_tests(tmp_path) -> None:
    """A `*_test.rego` beside mutator YAML reads the generated system, on regorus and on OPA alike."""
    from regokite.testing import Outcome, run_tests

    (tmp_path / "mutators.yaml").write_text(assign("spec.containers[name: *].imagePullPolicy", "Always"))
    (tmp_path / "pull_test.rego").write_text(
        "package pull_test\n\n"
        'pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},'
        ' "spec": {"containers": [{"name": "a"}]}}\n\n'
        "test_always if {\n"
        "\tm := data.regokite_gatekeeper.mutation.mutated with input as"
        ' {"request": {"operation": "CREATE", "kind": {"group": ""}, "namespace": "ns", "object": pod}}\n'
        '\tm.spec.containers[0].imagePullPolicy == "Always"\n'
        "\tnot m.metadata.namespace\n"
        "}\n"
    )
    for engine_for in (None, OracleEngine):
        results = run_tests([str(tmp_path)], engine_for=engine_for)
        assert [(r.name, r.outcome) for r in results] == [("test_always", Outcome.PASS)]


def test_the_library_samples_answer_alike_on_regorus_and_opa() -> None:
    """Every gatekeeper-library mutation sample at once, on Pods with and without the fields they touch."""
    from tests.gatekeeper.upstream import gatekeeper_library

    files = sorted((gatekeeper_library() / "mutation").rglob("mutation*.yaml"))
    text = "\n---\n".join(f.read_text() for f in files)
    bare = copy.deepcopy(POD)
    bare["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    full = copy.deepcopy(bare)
    full["spec"]["securityContext"] = {"fsGroup": 1, "supplementalGroups": [1], "seccompProfile": {"type": "Localhost"}}
    for c in full["spec"]["containers"]:
        c["securityContext"] = {"runAsUser": 0, "capabilities": {"add": ["X"]}, "privileged": True}
    first, second = results(text, request(bare), request(full))  # equal on both engines, or it fails
    assert first["iterations"] == 2 and second["iterations"] == 2
    assert second["object"]["spec"]["securityContext"]["fsGroup"] == 1
    assert second["object"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] == [
        "NEW_CAPABILITY"
    ]  # Assign replaces, then ModifySet merges what is already there
    assert results(text, request(first["object"]))[0]["iterations"] == 1  # mutates to itself


def test_mutators_in_a_schema_conflict_are_left_out_as_gatekeeper_does() -> None:
    from regokite.gatekeeper.mutation.conflicts import conflicting

    glob_list = assign("spec.containers[name: *].image", "x")
    as_object = assign("spec.containers.image", "y").replace("name: a", "name: b")
    other_key = assign("spec.containers[image: foo].x", 1).replace("name: a", "name: c")
    assert set(conflicting(mutators(glob_list + "---" + as_object))) == {
        "Assign.mutations.gatekeeper.sh /a",
        "Assign.mutations.gatekeeper.sh /b",
    }
    assert set(conflicting(mutators(glob_list + "---" + other_key))) == {
        "Assign.mutations.gatekeeper.sh /a",
        "Assign.mutations.gatekeeper.sh /c",
    }
    set_vs_object = modify_set("merge", ["x"]) + "---" + assign("spec.containers[name: *].args.x", 1)
    assert len(conflicting(mutators(set_vs_object))) == 2
    fine = assign("spec.containers[name: foo].image", "z") + "---" + modify_set("merge", ["x"])
    assert conflicting(mutators(glob_list + "---" + fine)) == {}
    # left out: neither applies
    unrelated = assign("spec.priorityClassName", "low").replace("name: a", "name: d")
    out = one(glob_list + "---" + as_object + "---" + unrelated, POD)["object"]
    assert out["spec"]["priorityClassName"] == "low" and out["spec"]["containers"] == POD["spec"]["containers"]
    assert results(glob_list + "---" + as_object, request(POD))[0] == {"object": POD, "iterations": 1}
