"""Metacontroller's own examples, judged by their own unchanged `test.sh`, against regokite.

For each example ported here (`examples/metacontroller/<name>/manifest/`: the definition with Rego
hooks, the Rego in a kube-mgmt-labelled ConfigMap, a kustomization), the upstream example
(`shared/upstream/metacontroller-examples/examples/<name>`, beside the clone) is copied to a temp
dir, its `manifest/` replaced by ours, and its `test.sh v1` run as Metacontroller's CI runs it:
kubectl on the test cluster, a time limit, the script's exit status the verdict. Instead of
Metacontroller, one `regokite controller --policy-namespaces metacontroller --watch-definitions`
runs for the module (so `kubectl apply -k` installs definition, hook and CRD together), with the
kubelet stand-in, so Pods become Ready and Jobs finish. A failure shows the script's output and the
controller's log lines written while it ran.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kube
import pytest
from kube import Cluster
from kubernetes import client

from regokite.manifests.definition_crds import crds
from tests.controllers.process import ControllerProcess

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "examples" / "metacontroller"
HOOK_NAMESPACE = "metacontroller"  # where upstream's manifests put their hook servers; ours, the hooks' ConfigMaps
SCRIPT_TIMEOUT = float(os.environ.get("REGOKITE_EXAMPLE_TIMEOUT", "180"))
# The whole module's budget: passing scripts take 15-80 s each (their own sleeps); a broken port
# would otherwise cost its full timeout. Past it, each remaining script fails at once, saying so.
BUDGET = float(os.environ.get("REGOKITE_EXAMPLES_BUDGET", "900"))


def upstream_examples() -> Path | None:
    """Metacontroller's examples/: $REGOKITE_UPSTREAM, else `shared/upstream` beside the clone (CI)
    or beside the worktrees' directory (a worktree under /work/wt/<branch>)."""
    env = os.environ.get("REGOKITE_UPSTREAM")
    candidates = [Path(env)] if env else [ROOT.parent / "shared" / "upstream", ROOT.parents[1] / "shared" / "upstream"]
    for base in candidates:
        if (base / "metacontroller-examples" / "examples").is_dir():
            return base / "metacontroller-examples" / "examples"
    return None


PORTED = sorted(p.parent.name for p in OURS.glob("*/manifest") if p.is_dir())


@dataclass
class Harness:
    controller: ControllerProcess
    deadline: float  # time.monotonic() past which no script starts


@pytest.fixture(scope="module")
def regokite_for_examples(cluster: Cluster, api: client.ApiClient, kubelet_standin: Path | None) -> Iterator[Harness]:
    """Metacontroller's place, as its examples expect it: its CRDs installed, the `metacontroller`
    namespace there, and one controller running every definition and hook the examples apply."""
    for crd in crds():
        kube.install_crd(api, crd)
    if not kube.exists(api, f"/api/v1/namespaces/{HOOK_NAMESPACE}"):
        kube.create(api, "/api/v1/namespaces", {"metadata": {"name": HOOK_NAMESPACE}})
    extra = ["--watch-definitions", "--policy-namespaces", HOOK_NAMESPACE]
    with ControllerProcess(
        cluster.kubeconfig, policies=[], controllers=[], workers=4, extra=extra, log_level="info"
    ) as ctl:
        yield Harness(ctl, time.monotonic() + BUDGET)


def staged(upstream: Path, name: str, into: Path) -> Path:
    """The upstream example with our manifest/ in place of theirs; nothing else changed."""
    work = into / name
    shutil.copytree(upstream / name, work, symlinks=True)
    shutil.rmtree(work / "manifest")
    shutil.copytree(OURS / name / "manifest", work / "manifest")
    return work


def run_script(work: Path, env: dict[str, str], timeout: float) -> tuple[int | None, str, float]:
    """`./test.sh v1` in its directory: (exit status or None on timeout, output, seconds). On
    timeout the script gets SIGTERM (its cleanup trap runs), then SIGKILL 30 s later."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "./test.sh", "v1"],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(errors="replace"), time.monotonic() - t0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        return None, out.decode(errors="replace"), time.monotonic() - t0


def tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def test_at_least_one_example_is_ported() -> None:
    assert "configmappropagation" in PORTED, f"no examples/metacontroller/<name>/manifest found under {OURS}"


@pytest.mark.parametrize("name", PORTED)
def test_upstream_example_script_passes(
    name: str, cluster: Cluster, regokite_for_examples: Harness, tmp_path: Path
) -> None:
    upstream = upstream_examples()
    if upstream is None:
        pytest.skip("Metacontroller's examples not found: set REGOKITE_UPSTREAM to the shared/upstream directory")
    if not (upstream / name / "test.sh").is_file():
        pytest.fail(f"{upstream / name}/test.sh does not exist: is {name} one of Metacontroller's examples?")
    left = regokite_for_examples.deadline - time.monotonic()
    if left < 10:
        pytest.fail(f"not run: the examples' budget ({BUDGET:g}s, REGOKITE_EXAMPLES_BUDGET) is spent", pytrace=False)
    timeout = min(SCRIPT_TIMEOUT, left)
    work = staged(upstream, name, tmp_path)
    log_start = len(regokite_for_examples.controller.log_file.read_text(errors="replace").splitlines())
    env = {**os.environ, **cluster.env()}
    status, output, seconds = run_script(work, env, timeout)
    if status != 0:
        lines = regokite_for_examples.controller.log_file.read_text(errors="replace").splitlines()[log_start:]
        controller_log = "\n".join(lines)
        verdict = f"timed out after {timeout:.0f}s" if status is None else f"exited {status}"
        pytest.fail(
            f"{name}/test.sh {verdict} ({seconds:.0f}s)\n"
            f"--- test.sh output (last 60 lines) ---\n{tail(output, 60)}\n"
            f"--- regokite controller log while it ran (last 60 lines) ---\n{tail(controller_log, 60)}",
            pytrace=False,
        )
    print(f"{name}/test.sh passed in {seconds:.1f}s")
