"""Gatekeeper mutation of one Pod by gatekeeper-library's mutators, beside validation alone.

    python -m bench.gatekeeper_mutation --library PATH/gatekeeper-library [--count 500]

In process, through the admission server's own decision code: `/mutate`
of a bare Pod by every mutator of the library's `mutation/` samples (each
sets its field: two passes, as Gatekeeper iterates until nothing changes),
`/mutate` of the Pod they produce (nothing to do: one pass), and `/validate`
of the same Pod by bench.gatekeeper_load's ten library constraints alone.
Prints p50/p99 per decision.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from pathlib import Path

import jsonpatch

from bench.common import fmt, percentiles
from bench.gatekeeper_load import pod_review, policies_dir
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review


def timed(policy_set, body: dict, mode: str, count: int) -> tuple[dict[str, float], object]:
    review = parse_review(json.dumps(body).encode())
    decision = decide(policy_set, review, mode=mode)  # warm
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        decision = decide(policy_set, review, mode=mode)
        samples.append(time.perf_counter() - started)
    return percentiles(samples), decision


def bare_pod_review() -> dict:
    body = pod_review()
    pod = body["request"]["object"]
    pod["spec"]["containers"][0].pop("securityContext")
    pod["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True, help="gatekeeper-library's root directory")
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mutators, constraints = Path(tmp, "mutators"), Path(tmp, "constraints")
        mutators.mkdir()
        constraints.mkdir()
        files = sorted((args.library / "mutation").rglob("mutation*.yaml"))
        for i, f in enumerate(files):
            (mutators / f"{i}-{f.name}").write_text(f.read_text())
        policies_dir(args.library / "library", constraints)
        mutating = load_policy_set([str(mutators)])
        validating = load_policy_set([str(constraints)])
    count = sum(f.read_text().count("\nkind: ") + f.read_text().startswith("kind: ") for f in files)
    body = bare_pod_review()
    stats, decision = timed(mutating, body, "mutate", args.count)
    assert decision.verdict.allowed and decision.verdict.patch, decision.verdict
    print(f"mutate a bare Pod, {count} library mutators ({len(decision.verdict.patch)} patch ops): {fmt(stats)}")
    mutated = copy.deepcopy(body)
    mutated["request"]["object"] = jsonpatch.apply_patch(body["request"]["object"], decision.verdict.patch)
    stats, decision = timed(mutating, mutated, "mutate", args.count)
    assert decision.verdict.allowed and not decision.verdict.patch
    print(f"mutate the mutated Pod (no change, one pass): {fmt(stats)}")
    stats, decision = timed(validating, mutated, "validate", args.count)
    print(f"validate the mutated Pod, 10 library constraints alone: {fmt(stats)}")
    mutating.close()
    validating.close()


if __name__ == "__main__":
    main()
