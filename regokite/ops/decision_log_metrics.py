"""Decision log metrics, after OPA's decision logger's (`decision_logs_dropped_buffer_size_limit_exceeded`,
`decision_logs_encoded_events_...`): written by each worker's decision logger, read through /metrics."""

from __future__ import annotations

from prometheus_client import Counter

dropped = Counter(
    "regokite_decision_logs_dropped",
    "Decisions not logged: the buffer was full (buffer), a drop policy dropped them (policy), one event was over "
    "the upload size limit (too_large), or the drop/mask policy failed on them (error).",
    ["reason"],
)
uploaded = Counter("regokite_decision_logs_uploaded", "Decisions uploaded to the decision log service.")
upload_failures = Counter("regokite_decision_logs_upload_failures", "Uploads of a chunk that failed (retried).")
