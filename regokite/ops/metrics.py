"""Prometheus metrics, shared by every worker process.

With several worker processes a scrape reaches one of them, so metrics live
in prometheus_client's multiprocess mode whenever PROMETHEUS_MULTIPROC_DIR is
set (the admission supervisor sets it before forking workers).
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

admission_requests = Counter(
    "regokite_admission_requests_total",
    "AdmissionReviews answered, by endpoint and final decision.",
    ["endpoint", "decision"],
)
admission_policy_decisions = Counter(
    "regokite_admission_policy_decisions_total",
    "Per-policy outcomes: allowed, denied, warned, dryrun or error.",
    ["policy", "decision"],
)
admission_latency = Histogram(
    "regokite_admission_request_duration_seconds",
    "Time from request body received to response ready.",
    ["endpoint"],
    buckets=LATENCY_BUCKETS,
)
policy_evaluation_latency = Histogram(
    "regokite_policy_evaluation_duration_seconds",
    "Time spent evaluating one policy for one request.",
    ["policy"],
    buckets=LATENCY_BUCKETS,
)
evaluation_errors = Counter(
    "regokite_policy_evaluation_errors_total",
    "Policy evaluations that failed (engine error, bad output, deadline).",
    ["policy"],
)
bad_requests = Counter(
    "regokite_admission_bad_requests_total",
    "Requests refused before evaluation (malformed, oversized).",
    ["reason"],
)
policy_reloads = Counter(
    "regokite_policy_reloads_total",
    "Policy reload attempts by result (success or failure).",
    ["result"],
)
policy_reload_healthy = Gauge(
    "regokite_policy_reload_healthy",
    "1 when the last policy (re)load succeeded, 0 while serving an older set after a failure.",
    multiprocess_mode="livemin",
)
policies_loaded = Gauge(
    "regokite_policies_loaded",
    "Admission policies in the set being served.",
    multiprocess_mode="livemax",
)


def forget_process(pid: int) -> None:
    """Drop a dead worker's live gauges, so its last values stop counting."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)


def exposition() -> tuple[bytes, str]:
    """The current metrics in Prometheus text format, across worker processes."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
