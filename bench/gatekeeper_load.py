"""Gatekeeper constraints under HTTPS load at /validate, beside raw evaluation in the same run.

    python -m bench.gatekeeper_load --library PATH/gatekeeper-library/library [--rate 500] [--seconds 10]

Copies ten of gatekeeper-library's most used templates with one sample
constraint each (all matching Pods) into a policies directory, serves it
with `regokite admission`, and sends one Pod review (a compliant Pod, so
every constraint does its full work) at --rate req/s in an open loop
(latency from each request's scheduled start), reusing
bench.admission_load's client. The in-process decision of the same review
(bench.admission_load's raw evaluation) is printed beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import ssl
import tempfile
import time
from pathlib import Path

from bench.admission_load import PRODUCTION_RELOAD, add_load_args, closed_loop, open_loop
from bench.common import fmt, percentiles
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from tests.admission.reviews import review
from tests.admission.server import admission_server

CONSTRAINTS = (  # template directory, sample holding the constraint
    ("general/allowedrepos", "repo-must-be-openpolicyagent"),
    ("general/containerlimits", "container-must-have-limits"),
    ("general/disallowedtags", "container-image-must-not-have-latest-tag"),
    ("general/requiredprobes", "must-have-probes"),
    ("pod-security-policy/privileged-containers", "psp-privileged-container"),
    ("pod-security-policy/host-namespaces", "psp-host-namespace"),
    ("pod-security-policy/host-network-ports", "block_host_network"),
    ("pod-security-policy/allow-privilege-escalation", "psp-allow-privilege-escalation-container"),
    ("pod-security-policy/capabilities", "psp-capabilities-baseline"),
    ("pod-security-policy/read-only-root-filesystem", "psp-readonlyrootfilesystem"),
)


def policies_dir(library: Path, into: Path) -> Path:
    for template_dir, sample in CONSTRAINTS:
        name = template_dir.replace("/", "-")
        shutil.copy(library / template_dir / "template.yaml", into / f"{name}-template.yaml")
        shutil.copy(library / template_dir / "samples" / sample / "constraint.yaml", into / f"{name}-constraint.yaml")
    return into


def pod_review() -> dict:
    container = {
        "name": "opa",
        "image": "openpolicyagent/opa:0.9.2",
        "resources": {"limits": {"cpu": "100m", "memory": "1Gi"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": 8181}},
        "livenessProbe": {"tcpSocket": {"port": 8181}},
        "securityContext": {
            "privileged": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "opa", "namespace": "default", "labels": {"app": "opa"}},
        "spec": {"containers": [container]},
    }
    return review(pod)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="gatekeeper-library's library/ directory")
    add_load_args(parser, 500)
    args = parser.parse_args()
    body = json.dumps(pod_review()).encode()
    with tempfile.TemporaryDirectory() as tmp:
        policies = policies_dir(args.library, Path(tmp))
        policy_set = load_policy_set([str(policies)])
        assert not policy_set.problems, policy_set.problems
        parsed = parse_review(body)
        first = decide(policy_set, parsed, mode="validate")
        ran, allowed = len(first.outcomes), first.verdict.allowed
        print(f"constraints: {len(policy_set.policies)}, evaluated for the Pod: {ran}, allowed: {allowed}")
        for message in first.verdict.messages:
            print(f"  {message}")
        samples = []
        for _ in range(2000):
            started = time.perf_counter()
            decide(policy_set, parsed, mode="validate")
            samples.append(time.perf_counter() - started)
        policy_set.close()
        raw = percentiles(samples)
        print(f"raw evaluation, in process, all constraints: {fmt(raw)}")
        for workers in args.workers:
            with (
                tempfile.TemporaryDirectory() as server_tmp,
                admission_server(policies, Path(server_tmp), "--workers", str(workers), *PRODUCTION_RELOAD) as server,
            ):
                ctx = ssl.create_default_context(cafile=str(server.ca))
                url = f"{server.url}/validate"
                asyncio.run(closed_loop(url, ctx, 1.0, 4, body))  # warm every worker
                run = asyncio.run(open_loop(url, ctx, args.rate, args.seconds, 64, body))
                lat = run.latency
                print(f"\nworkers={workers}  open loop at {args.rate:.0f} req/s for {args.seconds:.0f}s:")
                print(f"  achieved {run.achieved:7.1f} req/s, errors {run.errors}")
                print(f"  latency  {fmt(lat)}")
                ratio = f"p50 {lat['p50'] / raw['p50']:.2f}x, p99 {lat['p99'] / raw['p99']:.2f}x"
                print(f"  ratio to raw evaluation: {ratio}")


if __name__ == "__main__":
    main()
