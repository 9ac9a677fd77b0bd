"""The audit's metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from regokite.ops import builtin_error_metrics  # noqa: F401  (this server counts them too)

audit_violations = Gauge(
    "regokite_audit_violations",
    "Existing objects' fail and warn results, by policy and its enforcement.",
    ["policy", "enforcement"],
)
audit_passes = Counter("regokite_audit_passes_total", "Full audit passes (start-up and policy changes).")
audit_objects = Gauge("regokite_audit_objects", "Objects the audit currently covers.")
audit_write_failures = Counter(
    "regokite_audit_write_failures_total",
    "Report and constraint-status writes that failed and will be retried, by target and reason.",
    ["target", "reason"],
)
audit_export_failures = Counter(
    "regokite_audit_export_failures_total",
    "Audit runs whose violation export (--enable-violation-export) failed, by error; not retried.",
    ["reason"],
)
audit_pending_writes = Gauge(
    "regokite_audit_pending_writes",
    "Reports (namespaces) and constraint statuses whose current findings are not written yet.",
    ["target"],
)

# Gatekeeper's own audit metrics, by its names, so its dashboards and alerts keep working
gatekeeper_violations = Gauge(
    "gatekeeper_violations", "Total number of audited violations (Gatekeeper's metric).", ["enforcement_action"]
)
gatekeeper_audit_duration = Histogram(
    "gatekeeper_audit_duration_seconds",
    "Latency of audit operation in seconds (Gatekeeper's metric).",
    buckets=(1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 3000),
)
gatekeeper_audit_last_run_time = Gauge(
    "gatekeeper_audit_last_run_time", "Timestamp of last audit run starting time (Gatekeeper's metric)."
)
gatekeeper_audit_last_run_end_time = Gauge(
    "gatekeeper_audit_last_run_end_time", "Timestamp of last audit run ending time (Gatekeeper's metric)."
)
