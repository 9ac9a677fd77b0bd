"""Recursive expansion (CronJob -> Job -> Pod) and Gatekeeper's refusal of a cycle, on every path.

Gatekeeper's bats "gatekeeper expansion test" material (test/expansion): the
CronJob and Job templates, the Pod-to-CronJob one that closes a cycle, the
K8sRequiredLabels template and its constraint on Generated Pods in
`loadbalancers`, and `cronjob.yaml`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import PolicySet, load_policy_set
from regokite.admission.review import parse_review
from regokite.audit.scan import audit_object
from regokite.check import Manifest, check
from regokite.clusterdata.store import ResourceRef
from regokite.gatekeeper.expansion import expansion_module, parse_expansion_template
from regokite.gatekeeper.verify import format_results, run_suite
from tests.admission.reviews import review
from tests.gatekeeper.mutators import assign
from tests.gatekeeper.suites import write_suite
from tests.gatekeeper.test_enforcement_points import gatekeeper, one

CRONJOBS = ResourceRef("batch", "v1", "cronjobs", True)
DENIED = '[loadbalancers-must-have-env-gen] [Implied by expand-jobs] you must provide labels: {"env"}'


def labels_pods(group: str, kind: str, source: str, env: str) -> str:
    """An Assign labelling the Pod template of `kind` resources of `source` with `env`."""
    return yaml.safe_dump(
        assign(
            f"{kind.lower()}s-label-their-pods",
            "spec.template.metadata.labels.env",
            {"value": env},
            apply_to={"groups": [group], "kinds": [kind], "versions": ["v1"]},
            match={"source": source},
        )
    )


# a mutator of the expanded Job: what it changes reaches the Pod the Job expands to
JOB_LABELS_PODS = labels_pods("batch", "Job", "Generated", "prod")


def expansion(name: str) -> Path:
    return gatekeeper() / "test/expansion" / name


def policies(root: Path, *names: str, extra: str = "") -> PolicySet:
    for name in ("k8srequiredlabels_ct.yaml", "loadbalancers_must_have_env_source_gen.yaml", *names):
        shutil.copy(expansion(name), root / name)
    if extra:
        (root / "extra.yaml").write_text(extra)
    return load_policy_set([str(root)])


def cronjob() -> dict:
    return one(expansion("cronjob.yaml"))


def webhook(ps: PolicySet, obj: dict):
    return decide(ps, parse_review(json.dumps(review(obj)).encode()), mode="validate").verdict


def test_a_cronjob_is_refused_for_the_pod_its_job_expands_to(tmp_path: Path) -> None:
    """bats: "test recursive expansion cronjob->job->pod triggers pod violation when creating cronjob"."""
    ps = policies(tmp_path, "expand_cronjob_job_pod.yaml")
    verdict = webhook(ps, cronjob())
    assert verdict.messages == [DENIED]
    assert [(r.result, f"[{r.policy}] {r.message}") for r in audit_object(ps, cronjob(), CRONJOBS)] == [
        ("fail", DENIED)
    ]
    manifest = Manifest("cronjob.yaml", 0, cronjob())
    check(ps, [manifest])
    assert manifest.failures == [DENIED]
    ps.close()


def test_each_level_is_mutated_before_it_expands(tmp_path: Path) -> None:
    """The Job is mutated as a Generated resource, then expanded: its mutation reaches the Pod."""
    ps = policies(tmp_path, "expand_cronjob_job_pod.yaml", extra=JOB_LABELS_PODS)
    assert webhook(ps, cronjob()).allowed
    ps.close()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regokite.cli", *args], capture_output=True, text=True, check=False)


def test_expand_prints_the_job_and_its_pod(tmp_path: Path) -> None:
    shutil.copy(expansion("expand_cronjob_job_pod.yaml"), tmp_path / "templates.yaml")
    shutil.copy(expansion("cronjob.yaml"), tmp_path / "cronjob.yaml")
    (tmp_path / "mutator.yaml").write_text(JOB_LABELS_PODS)
    done = run_cli("expand", "-f", str(tmp_path))
    assert done.returncode == 0, done.stderr
    resultants = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(done.stdout) if d}
    assert set(resultants) == {("Job", "my-cronjob-job"), ("Pod", "my-cronjob-job-pod")}
    pod = resultants[("Pod", "my-cronjob-job-pod")]
    assert pod["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "my-cronjob-job", "uid": ""}
    ]
    assert pod["metadata"]["labels"] == {"env": "prod"}  # from the Job's mutation
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.14.2"


def verify_suite(root: Path, expansion_file: str, violations: int) -> Path:
    shutil.copy(expansion("k8srequiredlabels_ct.yaml"), root / "template.yaml")
    shutil.copy(expansion("loadbalancers_must_have_env_source_gen.yaml"), root / "constraint.yaml")
    shutil.copy(expansion("cronjob.yaml"), root / "cronjob.yaml")
    cases = [{"name": "cronjob", "object": "cronjob.yaml", "assertions": [{"violations": violations}]}]
    return write_suite(root, cases, name="cronjobs", expansion=expansion_file)


def test_verify_expands_recursively(tmp_path: Path) -> None:
    shutil.copy(expansion("expand_cronjob_job_pod.yaml"), tmp_path / "expansion.yaml")
    result = run_suite(verify_suite(tmp_path, "expansion.yaml", 1))
    assert not result.failed, format_results([result])


def cycle(root: Path) -> Path:
    """expand-cronjobs and expand-jobs, then expand-pods (Pod -> CronJob) closing the cycle."""
    text = (
        expansion("expand_cronjob_job_pod.yaml").read_text()
        + "---\n"
        + expansion("expand_pod_cronjob.yaml").read_text()
    )
    (root / "cycle.yaml").write_text(text)
    return root / "cycle.yaml"


def test_a_cycle_is_refused_as_gator_refuses_it(tmp_path: Path) -> None:
    refused = "error upserting template expand-pods: template forms expansion cycle"
    cycle(tmp_path)
    shutil.copy(expansion("cronjob.yaml"), tmp_path / "cronjob.yaml")
    done = run_cli("expand", "-f", str(tmp_path))
    assert done.returncode == 1 and done.stderr.strip() == f"error expanding resources: {refused}"
    (tmp_path / "verify").mkdir()
    cycle(tmp_path / "verify")
    result = run_suite(verify_suite(tmp_path / "verify", "cycle.yaml", 1))
    assert result.failed and refused in format_results([result])


def test_the_templates_of_a_cycle_are_left_out_and_the_others_serve(tmp_path: Path) -> None:
    """Gatekeeper's expansion system: every template of the cycle is left out (each says why), the
    others go on expanding."""
    cycle(tmp_path)
    ps = policies(tmp_path, "expand_deployments.yaml")
    for name in ("expand-cronjobs", "expand-jobs", "expand-pods"):
        assert any(
            p.endswith(f"ExpansionTemplate {name}: template forms expansion cycle; not applied") for p in ps.problems
        )
    assert webhook(ps, cronjob()).allowed  # its templates are left out
    deployment = one(expansion("deployment_no_label.yaml"))
    assert webhook(ps, deployment).messages == [
        '[loadbalancers-must-have-env-gen] [Implied by expand-deployments] you must provide labels: {"env"}'
    ]
    ps.close()


def test_the_levels_follow_the_longest_chain() -> None:
    docs = [d for d in yaml.safe_load_all(expansion("expand_cronjob_job_pod.yaml").read_text()) if d]
    cronjobs, jobs = (parse_expansion_template(d, "t.yaml") for d in docs)
    assert "_level_1 :=" in expansion_module([jobs], None).text
    assert "_level_2 :=" not in expansion_module([jobs], None).text
    assert "_level_2 :=" in expansion_module([cronjobs, jobs], None).text
    assert "_level_3 :=" not in expansion_module([cronjobs, jobs], None).text


DEPLOYMENTS_LABEL_PODS = labels_pods("apps", "Deployment", "Original", "staging")


def test_gator_paths_mutate_the_resource_before_expanding_it(tmp_path: Path) -> None:
    """gator's Expander mutates the resource itself (an Original one) first: `regokite expand` and
    `verify` do too (the admission server reviews an object its mutating webhook already mutated)."""
    shutil.copy(expansion("expand_deployments.yaml"), tmp_path / "templates.yaml")
    shutil.copy(expansion("deployment_no_label.yaml"), tmp_path / "deployment.yaml")
    (tmp_path / "mutator.yaml").write_text(DEPLOYMENTS_LABEL_PODS)
    done = run_cli("expand", "-f", str(tmp_path))
    assert done.returncode == 0, done.stderr
    [pod] = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] == "Pod"]
    assert pod["metadata"]["labels"]["env"] == "staging"
    root = tmp_path / "verify"
    root.mkdir()
    (root / "expansion.yaml").write_text(
        expansion("expand_deployments.yaml").read_text() + "---\n" + DEPLOYMENTS_LABEL_PODS
    )
    suite = verify_suite(root, "expansion.yaml", 0)
    shutil.copy(expansion("deployment_no_label.yaml"), root / "cronjob.yaml")  # the case's object
    result = run_suite(suite)
    assert not result.failed, format_results([result])
