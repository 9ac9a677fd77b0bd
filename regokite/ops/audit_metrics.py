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
