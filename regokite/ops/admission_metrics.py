"""The admission server's metrics: requests, per-policy decisions, latency, reloads, connections, workers."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from regokite.ops import builtin_error_metrics  # noqa: F401  (this server counts them too)
from regokite.ops.metrics import LATENCY_BUCKETS

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
    "Requests refused before evaluation (malformed, oversized, client gone mid-body).",
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
worker_restarts = Counter(
    "regokite_admission_worker_restarts_total",
    "Workers replaced by the supervisor: exited, stuck in one review past the watchdog limit (stuck), "
    "or over the memory limit (memory).",
    ["reason"],
)
connections_dropped = Counter(
    "regokite_admission_connections_dropped_total",
    "Client connections cut off: a TLS handshake, headers or body past its deadline, or headers too large.",
    ["reason"],
)
