"""regorus and OPA agree: the same tests, reviews, hook inputs and watch events, the same answers.

OPA's Go engine (tests/opa_oracle.py) is the reference. Every v1 bundle's
tests run through both engines; every admission policy of `policies/` decides
a corpus of reviews (DELETE, subresources, dry runs, odd objects) through
regokite's own decision code on both engines; every controller and watch
hook of `policies/` answers a corpus of inputs on both. Any difference fails,
naming the input. The counts are printed at the end of the run.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import regorus
from agreement import AGREEMENT
from opa_oracle import OracleEngine, answer

from regokite import testing
from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review, response
from regokite.bundle import Bundle, Module, load_bundle
from regokite.engine.embedded import EmbeddedEngine
from regokite.outline import outline, packages
from tests.admission import reviews

ROOT = Path(__file__).resolve().parent.parent
V1_BUNDLES = ["policies", "tests/fixtures/thirdparty/v1"]  # v0/ and system_main/ are v0: OPA's library parses v1 only
HOOK_DOCUMENTS = (
    "children", "status", "finalized", "resyncAfterSeconds", "relatedResources", "events",
    "labels", "annotations", "attachments", "patch", "apply", "delete", "log",
)  # fmt: skip


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("root", V1_BUNDLES)
def test_every_rego_test_has_the_same_outcome_in_both_engines(root: str) -> None:
    regorus = testing.run_tests([str(ROOT / root)], as_bundle=True)
    opa = testing.run_tests([str(ROOT / root)], as_bundle=True, engine_for=OracleEngine)
    assert [(r.ref, r.outcome) for r in regorus] == [(r.ref, r.outcome) for r in opa]
    assert regorus, f"{root} has no tests"
    AGREEMENT.append(f"differential: {root}: {len(regorus)} Rego tests, same outcome in regorus and OPA")


# ------------------------------------------------------------------ admission


def container(image: Any = "registry.k8s.io/pause:3.9", **extra: Any) -> dict[str, Any]:
    return {"name": "app", "image": image, **extra}


LIMITS = {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
IMAGES: list[Any] = [
    "registry.k8s.io/pause:3.9",
    "nginx",
    "docker.io/library/nginx:latest",
    "ghcr.io/acme/app@sha256:" + "a" * 64,
    "localhost:5000/a/b:1",
    "registry.example.com:443/team/app:v1.2",
    "",
    "UPPER/Case:tag",
    "evil.example.com/registry.k8s.io/pause",
    42,
]
CONTAINERS: list[Any] = [
    *([container(i, resources=LIMITS)] for i in IMAGES),
    [container(resources=LIMITS, securityContext={"privileged": True})],
    [container(resources=LIMITS, securityContext={"privileged": "true"})],
    [container(resources={"limits": {"cpu": "1"}})],
    [container()],
    [container(resources=LIMITS), container("nginx", resources={})],
    [],
    None,
    "not a list",
]
LABELS: list[Any] = [None, {}, {"app": "web"}, {"app": "web", "team": "a", "owner": "x"}, {"team": 3}]
REPLICAS: list[Any] = [0, 1, 3, 11, 100, -1, 1.5, "3", None]


def workload(kind: str, labels: Any, containers: Any, replicas: Any, **pod: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default"}
    if labels is not None:
        meta["labels"] = labels
    pod_spec = {"containers": containers, **pod}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
    spec = {"replicas": replicas, "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec}}
    group = "batch/v1" if kind == "Job" else "apps/v1"
    return {"apiVersion": group, "kind": kind, "metadata": meta, "spec": spec}


def review(obj: Any, operation: str = "CREATE", old: Any = None, sub: str | None = None, dry: bool = False) -> dict:
    return reviews.review(obj, operation=operation, old=old, dry_run=dry, sub_resource=sub)


def admission_corpus() -> Iterator[dict[str, Any]]:
    for kind in ("Deployment", "Pod", "StatefulSet", "Job"):
        for labels, containers in itertools.product(LABELS, CONTAINERS):
            yield review(workload(kind, labels, containers, 1))
    for replicas in REPLICAS:
        yield review(workload("Deployment", {"app": "web"}, [container(resources=LIMITS)], replicas))
    risky = {"hostNetwork": True, "hostPID": True, "hostIPC": True}
    for flag, value in risky.items():
        pod = workload("Pod", {"app": "web"}, [container(resources=LIMITS)], 1, **{flag: value})
        yield review(pod)
        yield review(pod, "UPDATE", old=workload("Pod", {"app": "web"}, [container(resources=LIMITS)], 1))
    before = workload("Deployment", {"app": "web"}, [container(resources=LIMITS)], 2)
    after = workload("Deployment", {}, [container("nginx")], 20)
    yield review(after, "UPDATE", old=before)
    yield review(after, "UPDATE", old=before, dry=True)
    yield review(None, "DELETE", old=before)
    yield review(None, "DELETE", old=after)
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"}}
    for replicas in (1, 50):
        yield review(
            {**scale, "spec": {"replicas": replicas}}, "UPDATE", old={**scale, "spec": {"replicas": 1}}, sub="scale"
        )
    yield review({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}})
    yield review({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"a": "b"}}})
    odd: list[Any] = [
        {"apiVersion": "apps/v1", "kind": "Deployment"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": None, "spec": None},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"labels": "x"}, "spec": {"template": 3}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [None, 1, "x"]}},
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"initContainers": [container("nginx")]},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"ephemeralContainers": [container("x")]},
        },
    ]
    for obj in odd:
        yield review(obj)


def policy_sets() -> tuple[PolicySet, PolicySet]:
    regorus = load_policy_set([str(ROOT / "policies")])
    return regorus, PolicySet(OracleEngine(regorus.engine.bundle), regorus.policies)


def test_every_admission_policy_decides_every_review_as_opa_does() -> None:
    regorus, opa = policy_sets()
    documents = 0
    reviews = list(admission_corpus())
    for raw in reviews:
        body = json.dumps(raw).encode()
        for policy in regorus.policies:
            for document in policy.documents:
                ref = f"data.{policy.name}.{document}"
                ours, theirs = answer(regorus.engine, ref, raw), answer(opa.engine, ref, raw)
                assert ours == theirs, f"{ref} on {body.decode()}"
                documents += 1
        for mode in ("validate", "mutate"):
            review_ = parse_review(body)
            ours, theirs = decide(regorus, review_, mode=mode), decide(opa, review_, mode=mode)
            assert response(review_, ours.verdict) == response(review_, theirs.verdict), f"{mode} {body.decode()}"
            shown = [[(o.policy, o.decision, o.messages, o.error is None) for o in d.outcomes] for d in (ours, theirs)]
            assert shown[0] == shown[1], f"{mode} {body.decode()}"
    assert len(reviews) > 300
    AGREEMENT.append(
        f"differential: {len(regorus.policies)} admission policies, {len(reviews)} reviews "
        f"({documents} documents, 2 modes): regorus and OPA agree"
    )


# ------------------------------------------------------------------ controller and watch hooks


def sync(parent: dict[str, Any], children: dict[str, Any], related: Any = None, finalizing: bool = False) -> dict:
    return {
        "controller": {},
        "parent": parent,
        "children": children,
        "related": related or {},
        "finalizing": finalizing,
    }


def parent(kind: str, spec: Any, name: str = "p", namespace: str = "ns") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "uid": "u-1", "generation": 2},
        "spec": spec,
    }


def worker(name: str, ready: bool, generation: int = 1) -> dict[str, Any]:
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}], "observedGeneration": 1}
    return {"metadata": {"name": name, "generation": generation}, "spec": {}, "status": status}


def hook_corpus() -> Iterator[tuple[str, dict[str, Any]]]:
    for who, fin in itertools.product(["Ada", "", 42, None], [False, True]):
        spec = {} if who is None else {"who": who}
        yield "controllers.hello_world", sync(parent("HelloWorld", spec), {"Pod.v1": {}}, finalizing=fin)
    yield "controllers.hello_world", sync(parent("HelloWorld", {"who": "Ada"}), {"Pod.v1": {"p": {"kind": "Pod"}}})
    times = ["2020-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "not a time", 5]
    for start, end in itertools.product(times, times):
        spec = {"user": "ada", "role": "view", "validFrom": start, "validUntil": end}
        for fin in (False, True):
            yield (
                "controllers.temporary_access",
                sync(parent("TemporaryAccess", spec), {"RoleBinding": {}}, finalizing=fin),
            )
    for configs, observed, fin in itertools.product(
        [[], [{"a": "1"}], [{"a": "1"}, {"b": "2"}, {"c": "3"}], [{}, {"a": "1", "b": "2"}]],
        [{}, {"p-0": {}}, {"p-0": {}, "p-1": {}}],
        [False, True],
    ):
        yield (
            "controllers.config_bundle",
            sync(parent("ConfigBundle", {"configs": configs}), {"ConfigMap.v1": observed}, finalizing=fin),
        )
    source = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "s", "namespace": "src"},
        "data": {"k": "v"},
    }
    for targets, related in itertools.product(
        [[], ["a", "b"], ["src", "a"], None], [{}, {"ConfigMap.v1": {"src/s": source}}]
    ):
        spec = {
            "sourceNamespace": "src",
            "sourceName": "s",
            **({"targetNamespaces": targets} if targets is not None else {}),
        }
        children = {"ConfigMap.v1": {"a/s": {}}}
        yield (
            "controllers.configmap_propagation",
            sync(parent("ConfigMapPropagation", spec, namespace=""), children, related),
        )
    workers_type = "Worker.examples.regokite.dev/v1alpha1"
    for replicas, observed in itertools.product(
        [0, 1, 3, "2", -1, None],
        [{}, {"p-0": worker("p-0", True)}, {"p-0": worker("p-0", False), "p-1": worker("p-1", True, 3)}],
    ):
        spec = {"template": {"image": "x"}, **({"replicas": replicas} if replicas is not None else {})}
        yield "controllers.rolling_set", sync(parent("RollingSet", spec), {workers_type: observed})
    for replicas, ports, fin in itertools.product([0, 2, "x"], ["80", "80:8080, 443", "", "a:b"], [False, True]):
        sts = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": "web",
                "namespace": "ns",
                "annotations": {"service-per-pod-label": "pod-name", "service-per-pod-ports": ports},
            },
            "spec": {"replicas": replicas},
        }
        attachments = {"Service.v1": {"web-0": {}}} if fin else {}
        yield (
            "controllers.service_per_pod",
            {"controller": {}, "object": sts, "attachments": attachments, "related": {}, "finalizing": fin},
        )
    for notes in [{}, {"pod-name-label": "pod-name"}, {"pod-name-label": ""}, None]:
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "annotations": notes}}
        yield (
            "controllers.pod_name_label",
            {"controller": {}, "object": pod, "attachments": {}, "related": {}, "finalizing": False},
        )


def watch_corpus() -> Iterator[tuple[str, dict[str, Any]]]:
    def deployment(labels: Any, replicas: Any) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": labels},
            "spec": {"replicas": replicas},
        }

    events = ["ADDED", "MODIFIED", "DELETED", "RESYNC"]
    for event, labels, replicas, params in itertools.product(
        events,
        [{"enforce-max-replicas": "true"}, {}, None],
        [1, 3, 10, None],
        [{}, {"max_replicas": 5}, {"max_replicas": "x"}],
    ):
        old = deployment(labels, 2) if event == "MODIFIED" else None
        yield (
            "watches.deployment_scaler",
            {"event": event, "object": deployment(labels, replicas), "oldObject": old, "params": params},
        )
    for event, labels, params in itertools.product(
        events,
        [{"regokite.dev/defaults": "true"}, {"regokite.dev/defaults": "false"}, {}],
        [{}, {"quota": {"pods": "10"}, "limits": {"cpu": "1"}, "requests": {"cpu": "100m"}}],
    ):
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": labels}}
        yield "watches.namespace_defaults", {"event": event, "object": ns, "oldObject": None, "params": params}


@pytest.mark.parametrize("corpus", [hook_corpus, watch_corpus], ids=["controller hooks", "watch events"])
def test_every_hook_answers_every_input_as_opa_does(corpus: Any) -> None:
    bundle = load_bundle([str(ROOT / "policies")]).without_tests()
    regorus, opa = EmbeddedEngine(bundle), OracleEngine(bundle)
    rules = packages(outline(bundle.modules))
    inputs, documents, seen = 0, 0, set()
    for package, input in corpus():
        seen.add(package)
        outputs = [d for d in HOOK_DOCUMENTS if d in rules[package]]
        assert outputs, f"{package} answers with none of {HOOK_DOCUMENTS}"
        for document in outputs:
            ref = f"data.{package}.{document}"
            ours, theirs = answer(regorus, ref, input), answer(opa, ref, input)
            if document == "resyncAfterSeconds" and isinstance(ours, float) and isinstance(theirs, float):
                ours, theirs = round(ours), round(theirs)  # computed from time.now_ns() a moment apart
            assert ours == theirs, f"{ref} on {json.dumps(input)}"
            documents += 1
        inputs += 1
    AGREEMENT.append(
        f"differential: {len(seen)} {corpus.__name__.replace('_corpus', '')} policies, {inputs} inputs "
        f"({documents} documents): regorus and OPA agree"
    )


def test_known_difference_iterating_over_a_scalar_is_an_error_in_regorus_and_nothing_in_opa() -> None:
    """`some x in "a string"`: OPA iterates nothing, regorus raises.

    Documented in policies/README.md. It fails closed in regokite (an
    evaluation error denies, or fails the sync, where OPA would allow or
    plan no children); this test notices when either engine changes.
    """
    bundle = load_bundle([str(ROOT / "policies")]).without_tests()
    input = sync(parent("ConfigBundle", {"configs": "x"}), {"ConfigMap.v1": {}})
    ref = "data.controllers.config_bundle.children"
    assert answer(EmbeddedEngine(bundle), ref, input) == "<error>"
    assert answer(OracleEngine(bundle), ref, input) == []


def test_sprintf_with_a_verb_that_does_not_fit_its_argument_formats_as_go() -> None:
    """`sprintf("%d", ["k"])`: OPA formats as Go does ("%!d(string=k)"); regorus wrote nothing
    until regokite formatted sprintf itself (engine.extensions.formatting)."""
    bundle = Bundle((Module("s.rego", 'package s\n\nx := sprintf("p-%d", ["k"])\n'),))
    assert EmbeddedEngine(bundle).evaluate("data.s.x") == "p-%!d(string=k)"
    assert OracleEngine(bundle).evaluate("data.s.x") == "p-%!d(string=k)"


def test_known_difference_the_rvm_cannot_tell_an_error_from_no_match() -> None:
    """Why the admission path does not use regorus's faster RVM (`regorus.Program` + `Rvm`).

    On a `deny` body that fails (divide by zero) the interpreter raises, as
    OPA does with strict builtin errors: regokite refuses the request under
    --strict-builtin-errors, and by default learns from the error which call
    to make undefined (engine/lenient.py). The RVM answers exactly what it
    answers when the body simply does not match, so neither is possible: an
    error that is not a builtin's would fail open. This test notices when a
    regorus release changes that.
    """
    text = 'package p\n\nimport rego.v1\n\ndeny contains msg if {\n\tx := 1 / input.n\n\tmsg := sprintf("%v", [x])\n}\n'

    def rvm(input: dict[str, Any]) -> str:
        program = regorus.Program.compile_from_modules("{}", [("p.rego", text)], ["data.p.deny"])
        vm = regorus.Rvm()
        vm.load_program(program)
        vm.set_input_json(json.dumps(input))
        return vm.execute_entry_point("data.p.deny")

    assert rvm({"n": 0}) == rvm({})  # an error and no match look the same
    bundle = Bundle((Module("p.rego", text),))
    assert answer(EmbeddedEngine(bundle), "data.p.deny", {"n": 0}) == "<error>"
    assert answer(OracleEngine(bundle), "data.p.deny", {"n": 0}) == "<error>"
