"""What OPA's default builtin errors cost a review: the first review that meets a new erring place, the
reviews after it, and one that meets none, beside the replicated data held.

    python -m bench.builtin_errors [--library PATH/gatekeeper-library/library] [--objects 0 10000 100000]
                                   [--places 5] [--iterations 300]

The policy set is bench.gatekeeper_load's ten library templates (when --library is given) plus
--places admission policies, each calling `regex.match` on an annotation of its own; a review whose
annotation of policy i does not parse meets policy i's place. The engine follows a replica of
--objects ConfigMaps (as an admission worker does, loaded before the first review). Printed per
replica size: a review meeting no error (p50), each first review meeting a new place (the place
found, the modules compiled again on the data held: no data loaded again), the same review again
(its place lenient), and the same erring review under --strict-builtin-errors (refused at the error).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

from bench.common import fmt, percentiles
from bench.gatekeeper_load import pod_review, policies_dir
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from regokite.clusterdata.store import TextReplicaStore
from regokite.engine import EngineSettings, builtin_errors

PLACE = """package admission.pattern_{i}

deny contains "name does not match" if {{
	p := object.get(input.request.object.metadata, ["annotations", "pattern-{i}"], ".*")
	not regex.match(p, input.request.object.metadata.name)
}}
"""


def write_policies(into: Path, library: Path | None, places: int) -> Path:
    if library is not None:
        policies_dir(library, into)
    for i in range(places):
        (into / f"pattern_{i}.rego").write_text(PLACE.format(i=i))
    return into


def replica(objects: int) -> TextReplicaStore:
    store = TextReplicaStore()
    store.declare("configmaps")
    for n in range(objects):
        meta = {"name": f"cm-{n}", "namespace": f"ns-{n % 100}", "labels": {"app": f"a{n % 7}"}}
        store.put(
            "configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}},
            namespaced=True,
        )
    return store


def body(**annotations: str) -> bytes:
    review = pod_review()
    review["request"]["object"]["metadata"]["annotations"] = annotations
    return json.dumps(review).encode()


def timed(policy_set: object, raw: bytes) -> float:
    review = parse_review(raw)
    started = time.perf_counter()
    decide(policy_set, review, mode="validate")  # type: ignore[arg-type]
    return time.perf_counter() - started


def measure(policies: Path, objects: int, places: int, iterations: int) -> None:
    store = replica(objects)
    started = time.perf_counter()
    sets = {}
    for strict in (False, True):
        sets[strict] = load_policy_set([str(policies)], EngineSettings(strict_builtin_errors=strict))
        sets[strict].follow(store)
        timed(sets[strict], body())  # loads the replica into this thread's engine
    print(f"\nreplica: {objects} ConfigMaps (both sets loaded in {time.perf_counter() - started:.1f} s)")
    clean = body()
    print(f"  no error met              {fmt(percentiles([timed(sets[False], clean) for _ in range(iterations)]))}")
    firsts = [timed(sets[False], body(**{f"pattern-{i}": "["})) for i in range(places)]
    shown = "  ".join(f"{s * 1000:.1f}" for s in firsts)
    print(f"  first review at a new place, ms: {shown}")
    again = [timed(sets[False], body(**{f"pattern-{i % places}": "["})) for i in range(iterations)]
    print(f"  again at a lenient place  {fmt(percentiles(again))}")
    strict = [timed(sets[True], body(**{f"pattern-{i % places}": "["})) for i in range(iterations)]
    print(f"  strict, refused           {fmt(percentiles(strict))}")
    for policy_set in sets.values():
        policy_set.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, help="gatekeeper-library's library/ directory")
    parser.add_argument("--objects", type=int, nargs="+", default=[0, 10_000, 100_000])
    parser.add_argument("--places", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=300)
    args = parser.parse_args()
    builtin_errors.log.setLevel(logging.ERROR)  # the lines each place logs are not what is measured
    with tempfile.TemporaryDirectory() as tmp:
        policies = write_policies(Path(tmp), args.library, args.places)
        for objects in args.objects:
            measure(policies, objects, args.places, args.iterations)


if __name__ == "__main__":
    main()
