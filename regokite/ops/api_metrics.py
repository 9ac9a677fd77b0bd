"""Metrics of the API client every command shares (regokite.kube.client)."""

from __future__ import annotations

from prometheus_client import Counter

retry_after = Counter(
    "regokite_api_retry_after_total",
    "Requests the API server answered 429 or 5xx with Retry-After (starting, overloaded), by status and"
    " outcome: waited (then sent again) or gave_up (past the wait budget: the caller's error and backoff).",
    ["status", "outcome"],
)
retry_after_seconds = Counter(
    "regokite_api_retry_after_seconds_total", "Seconds spent waiting as the API server's Retry-After asked."
)
