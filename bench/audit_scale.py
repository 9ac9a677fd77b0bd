"""Gatekeeper-style audit at scale: N Pods x 10 gatekeeper-library constraints, on a private control plane.

    python3 -m bench.audit_scale [--objects 10000] [--runs 1:500,1:0,2:500]

N Pods (a mix that each constraint finds some fault in) are created in
`default`, where the library samples' constraints apply; the templates and
constraints are read unchanged from the upstream copy
($REGOKITE_UPSTREAM or `shared/upstream` beside the checkout). Each run is
`regokite audit --once --no-reports --format json --jobs J
--audit-chunk-size C`: its wall time and peak RSS (`/usr/bin/time`: of the
largest process, so with J > 1 each of the J+1 processes stays below it),
objects audited and violations per constraint. The page size bounds what a
pass holds of the listed objects: compare C=500 with C=0 (one unpaged list).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts"), str(ROOT / "tests" / "integration")]

import controlplane  # noqa: E402
import kube  # noqa: E402

from bench.cluster_data import create_many  # noqa: E402
from tests.gatekeeper.upstream import upstream_dir  # noqa: E402

# (library directory, sample): ten constraints on Pods, none reading replicated data
CONSTRAINTS = [
    ("general/allowedrepos", "repo-must-be-openpolicyagent"),
    ("general/containerlimits", "container-must-have-limits"),
    ("general/disallowedtags", "container-image-must-not-have-latest-tag"),
    ("general/requiredprobes", "must-have-probes"),
    ("general/imagedigests", "container-image-must-have-digest"),
    ("pod-security-policy/privileged-containers", "psp-privileged-container"),
    ("pod-security-policy/host-namespaces", "psp-host-namespace"),
    ("pod-security-policy/allow-privilege-escalation", "psp-allow-privilege-escalation-container"),
    ("pod-security-policy/read-only-root-filesystem", "psp-readonlyrootfilesystem"),
    ("pod-security-policy/capabilities", "psp-capabilities-restricted"),
]


def library_policies(into: Path) -> Path:
    """The ten templates and constraints, linked (not copied) from the upstream library into `into`."""
    upstream = upstream_dir()
    library = upstream / "gatekeeper-library" / "library" if upstream else None
    if library is None or not library.is_dir():
        raise SystemExit("no copy of gatekeeper-library: set REGOKITE_UPSTREAM to the upstream/ directory")
    into.mkdir()
    for directory, sample in CONSTRAINTS:
        stem = directory.replace("/", "-")
        (into / f"{stem}-template.yaml").symlink_to(library / directory / "template.yaml")
        (into / f"{stem}-constraint.yaml").symlink_to(library / directory / "samples" / sample / "constraint.yaml")
    return into


DIGESTED = "openpolicyagent/opa:0.9.2@sha256:" + "0" * 64


def pod(i: int) -> dict:
    """Pod i: the variations give each constraint a share of violations (and some Pods none)."""
    image = DIGESTED if i % 4 == 0 else f"nginx:{'latest' if i % 3 else '1.27'}"
    container: dict = {
        "name": "app",
        "image": image,
        "resources": {"limits": {"cpu": "100m", "memory": "128Mi"}} if i % 5 else {},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}} if i % 2 == 0 else {"privileged": i % 7 == 0},
    }  # fmt: skip
    if i % 6 == 0:
        container["readinessProbe"] = container["livenessProbe"] = {"tcpSocket": {"port": 80}}
    spec = {"containers": [container], "hostNetwork": i % 11 == 0}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i}", "labels": {"app": "bench"}},
        "spec": spec,
    }


def audit_run(policies: Path, jobs: int, chunk: int, env: dict[str, str]) -> tuple[float, int, dict]:
    cmd = [sys.executable, "-m", "regokite.cli", "audit", "--policies", str(policies), "--once", "--no-reports"]
    cmd += ["--format", "json", "--jobs", str(jobs), "--audit-chunk-size", str(chunk)]
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True, env=env)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"audit failed ({done.returncode}): {done.stderr[-3000:]}")
    return took, int(done.stderr.strip().splitlines()[-1]) // 1024, json.loads(done.stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=10_000)
    ap.add_argument("--runs", default="1:500,1:0,2:500", help="JOBS:CHUNK,... one audit --once each")
    args = ap.parse_args()
    runs = [tuple(int(x) for x in r.split(":")) for r in args.runs.split(",")]
    with tempfile.TemporaryDirectory(prefix="regokite-bench-") as tmp:
        tmpdir = Path(tmp)
        policies = library_policies(tmpdir / "policies")
        cp = controlplane.start(tmpdir / "cp")
        try:
            cluster = kube.Cluster(cp.kubeconfig, cp.server, cp.ca_file, cp.token, cp.etcd_url)
            took = create_many(cluster, "/api/v1/namespaces/default/pods", [pod(i) for i in range(args.objects)])
            print(f"setup     : {args.objects} Pods created in {took:5.1f} s; {len(CONSTRAINTS)} library constraints")
            env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(cp.kubeconfig)}
            for jobs, chunk in runs:
                took, peak, found = audit_run(policies, jobs, chunk, env)
                counts = {v["policy"]: v["count"] for v in found["violations"]}
                print(
                    f"audit     : --jobs {jobs} --audit-chunk-size {chunk:<4} {found['objects']} objects in "
                    f"{took:5.1f} s ({found['objects'] / took:5.0f}/s), peak RSS {peak} MiB, "
                    f"{sum(counts.values())} violations, load {os.getloadavg()[0]:.1f}"
                )
            print("violations:", ", ".join(f"{name} {n}" for name, n in sorted(counts.items())))
        finally:
            cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
