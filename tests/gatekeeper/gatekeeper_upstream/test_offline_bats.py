"""Gatekeeper's end-to-end bats cases (test/bats/test.bats), offline where they can be.

Each step of a bats @test that has the API server decide an object (`kubectl
apply` answered `denied the request`, a `Warning`, or success; a mutated
field read back) is re-expressed on `regokite check --format json`: the
objects applied before it as `--policies`, the object as `-f`, the objects a
step expects in the cluster as `--data`. A step is `<@test>/<step>`. The
@tests that need a cluster (pods running, CRDs established, status, audit,
events, metrics, webhook configurations) are `api-server-bats/<@test>`,
listed for the API-server harness (gk-webhook); every @test is one or the
other, else its test fails.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gatekeeper.gatekeeper_upstream import api_server_bats
from tests.gatekeeper.gatekeeper_upstream.harness import bats_names, gatekeeper, judge, listed, regokite

ROOT = Path(__file__).resolve().parents[3]
BATS = "test/bats/test.bats"
T = "test/bats/tests/"  # BATS_TESTS_DIR
X = "test/expansion/"
REQUIRED = T + "templates/k8srequiredlabels_template.yaml"


def configmap(name: str, namespace: str) -> dict[str, Any]:
    """What `kubectl create configmap NAME -n NAMESPACE` creates."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


def run_pod() -> dict[str, Any]:
    """What `kubectl run nginx --image=nginx` creates."""
    spec = {"containers": [{"name": "nginx", "image": "nginx"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nginx", "labels": {"run": "nginx"}}, "spec": spec}


@dataclass(frozen=True)
class Step:
    policies: tuple[str, ...]
    manifest: str | dict[str, Any]
    want: str  # "allowed", "denied", "warned" (allowed with a warning), "denied+warned"
    says: tuple[str, ...] = ()  # in the messages
    data: tuple[str, ...] = ()
    mutated: Callable[[dict[str, Any]], bool] | None = None  # of the object as admitted


def field(path: str, want: Any) -> Callable[[dict[str, Any]], bool]:
    def read(obj: dict[str, Any]) -> bool:
        value: Any = obj
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return value == want

    return read


def annotation(key: str, want: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: (obj.get("metadata") or {}).get("annotations", {}).get(key) == want


def image(want: str) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: obj["spec"]["containers"][0]["image"] == want


EXPANSION = (X + "expand_deployments.yaml", X + "k8srequiredlabels_ct.yaml", X + "loadbalancers_must_have_env.yaml")
SCOPED = tuple(T + f"constraints/all_cm_must_have_gatekeeper{s}.yaml"
               for s in ("-dryrun", "_audit", "_scoped_audit", "_scoped", "_scoped_webhook"))  # fmt: skip
MUTATIONS = "gatekeeper mutation test"
LABELS = "required labels warn and dryrun test"
OPERATIONS = "constraint template operations test"

STEPS: dict[str, dict[str, Step]] = {
    MUTATIONS: {
        "AssignMetadata sets the owner label": Step(
            (T + "mutations/k8sownerlabel_assignmetadata.yaml",), T + "mutations/mutate_cm.yaml", "allowed",
            mutated=field("metadata.labels.owner", "gatekeeper")),
        "AssignMetadata is named in gatekeeper.sh/mutations": Step(
            (T + "mutations/k8sownerlabel_assignmetadata.yaml",), T + "mutations/mutate_cm.yaml", "allowed",
            mutated=annotation("gatekeeper.sh/mutations", "AssignMetadata//k8sownerlabel:1")),
        "Assign removes externalIPs": Step(
            (T + "mutations/k8sexternalip_assign.yaml",), T + "mutations/mutate_svc.yaml", "allowed",
            mutated=lambda obj: not obj["spec"].get("externalIPs")),
        "Assign is named in gatekeeper.sh/mutations": Step(
            (T + "mutations/k8sexternalip_assign.yaml",), T + "mutations/mutate_svc.yaml", "allowed",
            mutated=annotation("gatekeeper.sh/mutations", "Assign//k8sexternalip:1")),
        "AssignImage sets domain and digest": Step(
            (T + "mutations/assign_image.yaml",), T + "mutations/nginx_pod.yaml", "allowed",
            mutated=image("foocorp.org/nginx@sha256:abcde67890123456789abc345678901a")),
        "without the AssignImage the image stays": Step(
            (REQUIRED,), T + "mutations/nginx_pod.yaml", "allowed", mutated=image("nginx:latest")),
    },
    LABELS: {
        "deny refuses": Step((REQUIRED, T + "constraints/all_cm_must_have_gatekeeper.yaml"), T + "bad/bad_cm.yaml",
                             "denied"),
        "deny admits a labelled ConfigMap": Step((REQUIRED, T + "constraints/all_cm_must_have_gatekeeper.yaml"),
                                                 T + "good/good_cm.yaml", "allowed"),
        "warn admits with a warning": Step((REQUIRED, T + "constraints/all_cm_must_have_gatekeeper-warn.yaml"),
                                           T + "bad/bad_cm.yaml", "warned"),
        "dryrun admits": Step((REQUIRED, T + "constraints/all_cm_must_have_gatekeeper-dryrun.yaml"),
                              T + "bad/bad_cm.yaml", "allowed"),
        "scoped denies and warns": Step((REQUIRED, *SCOPED), T + "bad/bad_cm_scoped.yaml", "denied+warned"),
    },
    "container limits test": {
        "no limits refused": Step((T + "templates/k8scontainterlimits_template.yaml",
                                   T + "constraints/containers_must_be_limited.yaml"), T + "bad/opa_no_limits.yaml",
                                  "denied"),
        "limits admitted": Step((T + "templates/k8scontainterlimits_template.yaml",
                                 T + "constraints/containers_must_be_limited.yaml"), T + "good/opa.yaml", "allowed"),
    },
    "unique labels test": {
        "a second ConfigMap with the label refused": Step(
            (T + "templates/k8suniquelabel_template.yaml", T + "constraints/all_cm_gatekeeper_label_unique.yaml",
             T + "sync.yaml"), T + "bad/no_dupe_cm_2.yaml", "denied", data=(T + "good/no_dupe_cm.yaml",)),
    },
    **{
        f"config namespace exclusion test ({kind} match)": {
            "refused before the exclusion": Step(
                (REQUIRED, T + "constraints/all_cm_must_have_gatekeeper.yaml", T + "sync.yaml"),
                configmap("should-fail", namespace), "denied"),
            "admitted after it": Step(
                (REQUIRED, T + "constraints/all_cm_must_have_gatekeeper.yaml", T + config),
                configmap("should-succeed", namespace), "allowed"),
        }
        for kind, config, namespace in (
            ("exact", "sync_with_exclusion_exact_match.yaml", "gatekeeper-excluded-namespace"),
            ("prefix", "sync_with_exclusion_prefix_match.yaml", "gatekeeper-excluded-prefix-match-namespace"),
            ("suffix", "sync_with_exclusion_suffix_match.yaml", "gatekeeper-excluded-suffix-match-namespace"),
        )
    },
    "disable http.send": {
        # Gatekeeper refuses the template (its status: undefined function http.send), so the constraint
        # cannot be made; regokite refuses the template too, and its constraint refuses what it matches
        "a template calling http.send is refused": Step(
            (T + "templates/use_http_send_template.yaml", T + "bad/bad_http_send.yaml"),
            configmap("any", "default"), "denied", says=("undefined function http.send",)),
    },
    "gatekeeper expansion test": {
        "a Deployment whose Pod lacks the label refused": Step(EXPANSION, X + "deployment_no_label.yaml", "denied"),
        "with the label admitted": Step(EXPANSION, X + "deployment_with_label.yaml", "allowed"),
        "admitted when a mutator adds the label": Step((*EXPANSION, X + "assignmeta_env.yaml"),
                                                       X + "deployment_no_label.yaml", "allowed"),
        "admitted with a warning by a warn ExpansionTemplate": Step(
            (X + "warn_expand_deployments.yaml", *EXPANSION[1:]), X + "deployment_no_label.yaml", "warned"),
        "a source: Generated constraint refuses the Deployment": Step(
            (EXPANSION[0], EXPANSION[1], X + "loadbalancers_must_have_env_source_gen.yaml"),
            X + "deployment_no_label.yaml", "denied"),
        "a source: Generated constraint admits a Pod created as such": Step(
            (EXPANSION[0], EXPANSION[1], X + "loadbalancers_must_have_env_source_gen.yaml"), run_pod(), "allowed"),
        "a CronJob refused through its Job's Pod": Step(
            (EXPANSION[1], X + "loadbalancers_must_have_env.yaml", X + "expand_cronjob_job_pod.yaml"),
            X + "cronjob.yaml", "denied"),
    },
    "rego v1 tests": {
        "a v1 template refuses": Step((T + "templates/k8srequiredlabels_template_regov1.yaml",
                                       T + "constraints/all_ns_must_have_label_provided.yaml"), T + "bad/bad_ns.yaml",
                                      "denied"),
    },
    "namespace object access - Rego engine test": {
        "a ConfigMap in a labelled Namespace admitted": Step(
            (T + "templates/k8snamespacelabelcheck_template_rego.yaml",
             T + "constraints/ns_must_have_env_label_rego.yaml"), T + "good/cm_in_labeled_ns.yaml", "allowed",
            data=(T + "good/ns_with_env_label.yaml", T + "bad/ns_without_env_label.yaml")),
        "a ConfigMap in an unlabelled Namespace refused": Step(
            (T + "templates/k8snamespacelabelcheck_template_rego.yaml",
             T + "constraints/ns_must_have_env_label_rego.yaml"), T + "bad/cm_in_unlabeled_ns.yaml", "denied",
            says=("does not have required label",),
            data=(T + "good/ns_with_env_label.yaml", T + "bad/ns_without_env_label.yaml")),
    },
    OPERATIONS: {
        "an UPDATE-only template admits a CREATE": Step(
            (T + "templates/k8srequiredlabels_template_with_update_operations.yaml",
             T + "constraints/all_ns_must_have_label_provided.yaml"), T + "good/good_ns.yaml", "allowed"),
        "an all-operations template refuses the CREATE": Step(
            (T + "templates/k8srequiredlabels_template_with_all_operations.yaml",
             T + "constraints/all_ns_must_have_label_provided.yaml"), T + "good/good_ns.yaml", "denied"),
    },
}  # fmt: skip


def step_ids() -> list[str]:
    names = bats_names(BATS)
    return [f"{test}/{step}" for test in names for step in STEPS.get(test, {})]


def decide(step: Step, tmp: Path) -> str | None:
    """Why `regokite check` does not decide the step as the API server with Gatekeeper did (None: it does)."""
    base = gatekeeper()
    policies = tmp / "policies"
    policies.mkdir()
    for i, relative in enumerate(step.policies):  # later files replace earlier objects, as later applies
        (policies / f"{i:02d}-{Path(relative).name}").symlink_to(base / relative)
    manifest = base / step.manifest if isinstance(step.manifest, str) else tmp / "object.yaml"
    if isinstance(step.manifest, dict):
        manifest.write_text(yaml.safe_dump(step.manifest), encoding="utf-8")
    args = ["check", "--policies", str(policies), "-f", str(manifest), "--format", "json"]
    # what the cluster's webhook decided (its enforcement point, not gator's), with the mutation
    # annotations the bats deployment of Gatekeeper writes
    args += ["--enforcement-point", "validation.gatekeeper.sh", "--mutation-annotations"]
    args += [a for d in step.data for a in ("--data", str(base / d))]
    done = regokite(*args)
    if done.returncode not in (0, 1):
        return f"exit {done.returncode}: {done.stderr[-800:]}"
    (obj,) = json.loads(done.stdout)["objects"]
    got = ("denied" if obj["failures"] else "allowed") if not obj["warnings"] else (
        "denied+warned" if obj["failures"] else "warned")  # fmt: skip
    messages = " ".join(obj["failures"] + obj["warnings"])
    problems = [f"{got}, want {step.want}: {messages}"] if got != step.want else []
    problems += [f"no {s!r} in {messages}" for s in step.says if s not in messages]
    if step.mutated is not None:
        admitted = obj.get("mutated") or yaml.safe_load(manifest.read_text(encoding="utf-8"))
        if not step.mutated(admitted):
            problems.append(f"admitted as {json.dumps(admitted)[:600]}")
    return "; ".join(problems) or None


@pytest.mark.parametrize("case", step_ids())
def test_offline_bats_step(case: str, tmp_path: Path) -> None:
    test, _, step = case.partition("/")
    judge(f"offline-bats/{case}", lambda: decide(STEPS[test][step], tmp_path))


@pytest.mark.parametrize("name", [n for n in bats_names(BATS) if n not in STEPS])
def test_api_server_bats_case(name: str) -> None:
    """A @test with no offline step runs on an API server (api_server_bats.RUN_BY), or is listed here."""
    if name in api_server_bats.CASES:
        pytest.skip(f"run on the API server by {api_server_bats.RUN_BY}")
    judge(f"api-server-bats/{name}", lambda: "needs an API server: not run offline")


def test_every_listed_case_is_a_case() -> None:
    """listed.yaml names only cases that exist (a renamed upstream case must be renamed here)."""
    from tests.gatekeeper.gatekeeper_upstream import test_gator_fixtures, test_gator_test_bats, test_verify_runner

    known = {f"offline-bats/{c}" for c in step_ids()} | {f"api-server-bats/{n}" for n in bats_names(BATS)}
    known |= {f"gator-test-bats/{n}" for n in bats_names(test_gator_test_bats.BATS)}
    known |= {f"verify-runner/{n}" for n in test_verify_runner.case_names("TestRunner_Run")}
    known |= {f"verify-runner-case/{n}" for n in test_verify_runner.case_names("TestRunner_RunCase")}
    known |= {f"verify-suite/{n}" for n in test_gator_fixtures.verify_cases()}
    known |= {f"expand-fixtures/{n}" for n in test_gator_fixtures.expand_fixtures()}
    gatekeeper()
    unknown = sorted(set(listed()) - known - {"verify-runner/TestRunner_Run_Print"})
    assert not unknown, unknown
    reasons = {e["why"] for e in listed().values() if e["owner"] is None}
    assert reasons <= {"CEL / ValidatingAdmissionPolicy", "OCI --image"}, reasons
