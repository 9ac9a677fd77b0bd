"""ExpansionTemplates: a Deployment's Pod template judged by Pod constraints, as Gatekeeper does.

The library's k8spspprivilegedcontainer template and its sample constraint,
unchanged, with expansion.md's ExpansionTemplate: a Deployment whose Pod
template is privileged is refused with `[<constraint>] [Implied by <template>] <msg>`;
the expanded Pod is mutated first by mutators that admit Generated resources.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.check import check, read_manifests
from tests.admission.reviews import deployment, review
from tests.gatekeeper.mutators import pod_assign
from tests.gatekeeper.upstream import gatekeeper_library

PRIVILEGED = "library/pod-security-policy/privileged-containers"
EXPANSION = """
apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata:
  name: expand-deployments
spec:
  applyTo:
    - groups: ["apps"]
      kinds: ["DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"]
      versions: ["v1"]
  templateSource: "spec.template"
  generatedGVK:
    kind: "Pod"
    group: ""
    version: "v1"
"""
SIDECAR = yaml.safe_dump(
    pod_assign(
        "add-sidecar",
        "spec.containers[name:istio-proxy]",
        {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.15.0", "securityContext": {"privileged": True}},
        source="Generated",
    )
)


def policies(tmp_path: Path, *texts: str):
    lib = gatekeeper_library() / PRIVILEGED
    shutil.copy(lib / "template.yaml", tmp_path / "template.yaml")
    shutil.copy(lib / "samples" / "psp-privileged-container" / "constraint.yaml", tmp_path / "constraint.yaml")
    for i, text in enumerate(texts):
        (tmp_path / f"extra-{i}.yaml").write_text(text)
    return load_policy_set([str(tmp_path)])


def privileged(d: dict) -> dict:
    d = copy.deepcopy(d)
    d["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    return d


def judge(ps, obj: dict):
    return decide(ps, parse_review(json.dumps(review(obj)).encode()), mode="validate").verdict


def test_a_privileged_pod_template_refuses_the_deployment_with_gatekeepers_message(tmp_path: Path) -> None:
    ps = policies(tmp_path, EXPANSION)
    verdict = judge(ps, privileged(deployment()))
    assert not verdict.allowed
    assert verdict.messages == [
        "[psp-privileged-container] [Implied by expand-deployments] Privileged container is not allowed: app,"
        ' securityContext: {"privileged": true}'
    ]
    assert judge(ps, deployment()).allowed
    ps.close()


def test_without_the_template_the_deployment_passes(tmp_path: Path) -> None:
    ps = policies(tmp_path)
    assert judge(ps, privileged(deployment())).allowed
    ps.close()


def test_expanded_pods_are_mutated_first_and_enforcement_is_the_templates(tmp_path: Path) -> None:
    ps = policies(
        tmp_path,
        EXPANSION.replace(
            'templateSource: "spec.template"', 'templateSource: "spec.template"\n  enforcementAction: warn'
        ),
        SIDECAR,
    )
    verdict = judge(ps, deployment())
    assert verdict.allowed
    assert verdict.warnings == [
        "[psp-privileged-container] [Implied by expand-deployments] Privileged container is not allowed: istio-proxy,"
        ' securityContext: {"privileged": true}'
    ]
    ps.close()


def test_check_expands_and_refuses_offline(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    ps = policies(tmp_path / "p", EXPANSION)
    manifest = tmp_path / "deploy.yaml"
    manifest.write_text(yaml.safe_dump(privileged(deployment())))
    manifests = read_manifests([str(manifest)], "default")
    check(ps, manifests)
    assert manifests[0].failures and "[Implied by expand-deployments]" in manifests[0].failures[0]
    ps.close()


def test_a_template_expanding_its_own_kind_is_refused(tmp_path: Path) -> None:
    """Gatekeeper's ValidateTemplate: a self-edge; while it is there, /validate refuses (fail closed)."""
    own = EXPANSION.replace('kind: "Pod"', 'kind: "Deployment"').replace('group: ""', 'group: "apps"')
    ps = policies(tmp_path, own)
    assert any("but also applies to that same GVK" in p for p in ps.problems)
    assert not judge(ps, deployment()).allowed
    ps.close()


GATOR_MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: nginx-deployment, namespace: my-ns, labels: {app: nginx}}
spec:
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata: {labels: {app: nginx}}
    spec:
      containers: [{name: nginx, image: "nginx:1.14.2", ports: [{containerPort: 80}], args: ["/bin/sh"]}]
---
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: Assign
metadata: {name: always-pull-image}
spec:
  applyTo: [{groups: [""], kinds: ["Pod"], versions: ["v1"]}]
  location: "spec.containers[name: *].imagePullPolicy"
  parameters: {assign: {value: "Always"}}
  match:
    source: "Generated"
    scope: Namespaced
    kinds: [{apiGroups: [], kinds: []}]
    namespaceSelector:
      matchExpressions: [{key: admission.gatekeeper.sh/ignore, operator: DoesNotExist}]
"""


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "regokite.cli", *args], capture_output=True, text=True, check=False)


def test_expand_prints_the_mutated_pod_as_gator_expand_does(tmp_path: Path) -> None:
    """gator.md's "non default namespace" example: with the Namespace, the Pod; without, gator's error, exit 1."""
    (tmp_path / "expansion.yaml").write_text(EXPANSION)
    (tmp_path / "manifest.yaml").write_text(GATOR_MANIFEST)
    missing = run_cli("expand", "-f", str(tmp_path))
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        "error expanding resources: error expanding resource nginx-deployment: failed to mutate resultant"
        " resource nginx-deployment-pod: matching for mutator Assign.mutations.gatekeeper.sh /always-pull-image"
        " failed for  Pod my-ns nginx-deployment-pod: failed to run Match criteria: namespace selector for"
        " namespace-scoped object but missing Namespace"
    )
    (tmp_path / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: my-ns}\n")
    done = run_cli("expand", "-f", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"app": "nginx"},
            "name": "nginx-deployment-pod",
            "namespace": "my-ns",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "nginx-deployment", "uid": ""}],
        },
        "spec": {
            "containers": [
                {
                    "args": ["/bin/sh"],
                    "image": "nginx:1.14.2",
                    "imagePullPolicy": "Always",
                    "name": "nginx",
                    "ports": [{"containerPort": 80}],
                }
            ]
        },
    }


def test_verify_runs_a_gator_suite_with_an_expansion(tmp_path: Path) -> None:
    lib = gatekeeper_library() / PRIVILEGED
    shutil.copy(lib / "template.yaml", tmp_path / "template.yaml")
    shutil.copy(lib / "samples" / "psp-privileged-container" / "constraint.yaml", tmp_path / "constraint.yaml")
    (tmp_path / "expansion.yaml").write_text(EXPANSION)
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(privileged(deployment())))
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(deployment()))
    suite = {
        "apiVersion": "test.gatekeeper.sh/v1alpha1",
        "kind": "Suite",
        "tests": [
            {
                "name": "expansion",
                "template": "template.yaml",
                "constraint": "constraint.yaml",
                "expansion": "expansion.yaml",
                "cases": [
                    {"name": "bad", "object": "bad.yaml", "assertions": [
                        {"violations": 1, "message": r"^\[Implied by expand-deployments\] Privileged container"}]},
                    {"name": "good", "object": "good.yaml", "assertions": [{"violations": "no"}]},
                ],
            },
            {
                "name": "no-expansion",
                "template": "template.yaml",
                "constraint": "constraint.yaml",
                "cases": [{"name": "bad", "object": "bad.yaml", "assertions": [{"violations": "no"}]}],
            },
        ],
    }  # fmt: skip
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    result = run_cli("verify", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(privileged(deployment())))
    assert run_cli("verify", str(tmp_path)).returncode == 1


def test_audit_lists_the_expanded_workloads_and_reports_their_pods(tmp_path: Path) -> None:
    from regokite.audit.scan import audit_object, audited_resources
    from regokite.clusterdata.store import ResourceRef

    ps = policies(tmp_path, EXPANSION)
    served = {
        ("", "Pod"): ResourceRef("", "v1", "pods", True),
        ("apps", "Deployment"): ResourceRef("apps", "v1", "deployments", True),
    }
    refs, _ = audited_resources(ps, lambda group: "v1", lambda group, kind: served.get((group, kind)))
    assert ResourceRef("apps", "v1", "deployments", True) in refs and ResourceRef("", "v1", "pods", True) in refs
    found = audit_object(ps, privileged(deployment()), ResourceRef("apps", "v1", "deployments", True))
    assert [(r.policy, r.result) for r in found] == [("psp-privileged-container", "fail")]
    assert found[0].message.startswith("[Implied by expand-deployments] Privileged container is not allowed: app")
    ps.close()
