"""The audit's metrics."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

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
audit_pending_writes = Gauge(
    "regokite_audit_pending_writes",
    "Reports (namespaces) and constraint statuses whose current findings are not written yet.",
    ["target"],
)
