"""Replication's metrics (admission, controller, hooks): what is held and how it moves."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

replicated_objects = Gauge(
    "regokite_replicated_objects",
    "Objects of a replicated resource held for policies.",
    ["resource"],
    multiprocess_mode="livemax",
)
replicated_events = Counter(
    "regokite_replicated_events_total",
    "Watch events applied to the replicated data, by resource and event (ADDED, MODIFIED, DELETED).",
    ["resource", "event"],
)
