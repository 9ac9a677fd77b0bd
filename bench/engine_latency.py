"""Evaluation latency of the policies/ admission policies through each engine.

    python -m bench.engine_latency [--iterations N]

Prints, per engine, the latency of one `deny` evaluation per policy and of
the whole admission decision (every policy, every document), on the same
review. The sidecar path is measured against the OPA REST stand-in in
tests/opa_standin.py (real HTTP on loopback, evaluating with regorus), so it
shows regokite's REST overhead, not OPA's own speed.
"""

from __future__ import annotations

import argparse
import time

from bench.common import fmt, percentiles, sample_body
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.engine import OPA_URL, EngineSettings


def measure(engine: str, opa_url: str | None, iterations: int) -> None:
    policy_set = load_policy_set(["policies"], EngineSettings(engine, opa_url or OPA_URL))
    review = parse_review(sample_body())
    print(f"\nengine: {engine}  ({len(policy_set.policies)} admission policies)")
    for policy in policy_set.policies:
        if "deny" not in policy.documents:
            continue
        samples = []
        for _ in range(iterations):
            started = time.perf_counter()
            policy_set.engine.bind(review.raw).evaluate(f"data.{policy.name}.deny")
            samples.append(time.perf_counter() - started)
        print(f"  {policy.name + '.deny':42} {fmt(percentiles(samples))}")
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        decide(policy_set, review, mode="validate")
        samples.append(time.perf_counter() - started)
    print(f"  {'whole decision (all policies, /validate)':42} {fmt(percentiles(samples))}")
    policy_set.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    print(f"review: a Deployment that passes every policy ({len(sample_body())} bytes)")
    measure("embedded", None, args.iterations)
    try:
        from tests.opa_standin import OpaStandIn
    except ImportError:
        print("\nengine: opa  (skipped: tests/opa_standin.py not available)")
        return
    with OpaStandIn() as standin:
        measure("opa", standin.url, max(200, args.iterations // 5))


if __name__ == "__main__":
    main()
