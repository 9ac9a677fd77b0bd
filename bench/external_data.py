"""The cost of Gatekeeper's external_data in a constraint: warm response cache vs cold.

A K8sSignedImages constraint (tests/gatekeeper/signature_provider.py) judges a
Pod through the admission decision, its provider an HTTPS server on loopback
(a kept-alive connection, as Gatekeeper's HTTP client keeps one). Cold: the
cache is off (TTL 0), every review asks the provider; warm: the keys are
cached and no request is made. p50/p99 of the whole decision per review.

    python -m bench.external_data [--reviews 500] [--images 3]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.common import fmt, percentiles
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.engine import EngineSettings
from regokite.engine.extensions import ExtensionOptions
from regokite.engine.extensions.external_data import ExternalData
from tests.admission.reviews import review
from tests.gatekeeper.signature_provider import CONSTRAINT, SIGNED_PREFIX, TEMPLATE, SignatureProvider


def measure(policies_dir: Path, ttl: float, reviews: int, images: int) -> dict[str, float]:
    options = ExtensionOptions(external_data=ExternalData(cache_ttl=ttl))
    policy_set = load_policy_set([str(policies_dir)], EngineSettings(extensions=options))
    containers = [{"name": f"c{i}", "image": f"{SIGNED_PREFIX}app{i}:1"} for i in range(images)]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {"containers": containers},
    }
    body = json.dumps(review(pod)).encode()
    samples = []
    try:
        for i in range(reviews + 20):
            started = time.perf_counter()
            verdict = decide(policy_set, parse_review(body), mode="validate").verdict
            if i >= 20:  # the first calls open the connection and fill the cache
                samples.append(time.perf_counter() - started)
            assert verdict.allowed, verdict.messages
    finally:
        policy_set.close()
    return percentiles(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=500)
    parser.add_argument("--images", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with SignatureProvider(root).running() as provider:
            policies = root / "policies"
            policies.mkdir()
            (policies / "template.yaml").write_text(TEMPLATE)
            (policies / "constraint.yaml").write_text(CONSTRAINT)
            (policies / "provider.yaml").write_text(provider.provider_yaml())
            cold = measure(policies, 0, args.reviews, args.images)
            asked = len(provider.requests)
            warm = measure(policies, 180, args.reviews, args.images)
            warm_asked = len(provider.requests) - asked
    print(f"external_data, {args.images} images a Pod, {args.reviews} reviews, whole decision per review")
    print(f"  cold (TTL 0, {asked} provider requests):  {fmt(cold)}")
    print(f"  warm (TTL 3m, {warm_asked} provider requests): {fmt(warm)}")


if __name__ == "__main__":
    main()
