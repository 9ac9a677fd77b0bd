"""Seeded hostile AdmissionReviews against a real `regokite admission` over HTTPS.

    python -m bench.admission_fuzz [--count 10000] [--seed 1] [--workers 2]

Prints the histogram of status codes and outcomes per class, workers and
their RSS before and after; exits 1 when a promise broke (a 5xx, a
malformed answer, a Traceback or raw line in the log, a worker replaced,
RSS up more than 20 %). The classes and checks are in tests/admission/fuzz.py.
"""

from __future__ import annotations

import argparse
import sys

from tests.admission.fuzz import run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4, help="client threads sending at once")
    args = parser.parse_args()
    report = run(args.seed, args.count, workers_n=args.workers, threads=args.threads)
    print(report.render())
    broken = report.check()
    for problem in broken[:20]:
        print("BROKEN:", problem, file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
