"""Several ConstraintTemplates that need the OPA-compatibility rewrites, applied with kubectl as one
multi-document file, all serve through `regokite gatekeeper`: one file per object, every template
loaded, each constraint deciding its library samples as gator's suite says.

Before each generated module had an identity of its own, the syncer wrote every template into one
file and the second template needing a rewrite broke the whole served set.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import kube
import pytest
import yaml
from kubernetes import client

from regokite.admission.policies import load_policy_set
from regokite.check import Manifest, check
from regokite.gatekeeper.crds import constraint_crd_name, template_crd
from regokite.kube.client import KubeClient
from regokite.sources.gatekeeper_objects import DIRECTORY, GatekeeperSync
from tests.gatekeeper.upstream import gatekeeper_library

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# count, units and `not` (routed builtins, arithmetic, negation) each need a rewrite
SAMPLES = {
    "K8sContainerLimits": ("containerlimits", "container-must-have-limits", "container-must-have-limits"),
    "K8sRequiredProbes": ("requiredprobes", "must-have-probes", "must-have-probes"),
    "K8sReplicaLimits": ("replicalimits", "replicalimits", "replica-limits"),
}


def kubectl(cluster: kube.Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **cluster.env()}
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def sync(cluster: kube.Cluster, api: client.ApiClient, tmp_path: Path) -> Iterator[GatekeeperSync]:
    syncer = GatekeeperSync(KubeClient(cluster.kubeconfig), tmp_path / "policies")
    syncer.install()
    kube.install_crd(api, template_crd())
    yield syncer
    kubectl(cluster, "delete", "constrainttemplates", *(k.lower() for k in SAMPLES), "--ignore-not-found")
    syncer.sync_once()


def test_templates_needing_rewrites_applied_as_one_file_all_serve(
    cluster: kube.Cluster, api: client.ApiClient, sync: GatekeeperSync, tmp_path: Path
) -> None:
    general = gatekeeper_library() / "library" / "general"
    templates = tmp_path / "templates.yaml"
    templates.write_text("\n---\n".join((general / d / "template.yaml").read_text() for d, _, _ in SAMPLES.values()))
    applied = kubectl(cluster, "apply", "-f", str(templates))
    assert applied.returncode == 0, applied.stderr
    assert sync.sync_once() == dict.fromkeys(SAMPLES)
    for kind, (directory, sample, _) in SAMPLES.items():
        kube.wait_for_condition(api, f"{CRDS}/{constraint_crd_name(kind)}", "Established", timeout=30)
        constraint = general / directory / "samples" / sample / "constraint.yaml"
        kube.wait_for(
            lambda c=constraint: kubectl(cluster, "apply", "-f", str(c)).returncode,
            lambda rc: rc == 0,
            what="the constraint CRD to be served",
        )
    assert sync.sync_once() == dict.fromkeys(SAMPLES)

    files = sorted(p.relative_to(sync.out / DIRECTORY).as_posix() for p in (sync.out / DIRECTORY).rglob("*.yaml"))
    assert files == sorted(
        [f"templates.gatekeeper.sh/ConstraintTemplate/{kind.lower()}.yaml" for kind in SAMPLES]
        + [f"constraints.gatekeeper.sh/{kind}/{name}.yaml" for kind, (_, _, name) in SAMPLES.items()]
    )
    policy_set = load_policy_set([str(sync.out)])
    try:
        assert sorted(p.name for p in policy_set.policies) == sorted(name for _, _, name in SAMPLES.values())
        decided = {}
        for directory, sample, name in SAMPLES.values():
            examples = general / directory / "samples" / sample
            for example in ("example_allowed", "example_disallowed"):
                obj = yaml.safe_load((examples / f"{example}.yaml").read_text())
                decided[(name, example)] = Manifest(example, 0, obj)
        check(policy_set, list(decided.values()))
        for (name, example), manifest in decided.items():
            mine = [f for f in manifest.failures if f.startswith(f"[{name}]")]
            assert not [f for f in mine if "policy error" in f], mine
            assert bool(mine) == (example == "example_disallowed"), (name, example, manifest.failures)
    finally:
        policy_set.close()
