"""Bundle metrics, after OPA's (`bundle_loaded_counter`, `bundle_failed_load_counter`, `last_bundle_request`,
`last_success_bundle_download`, `last_success_bundle_activation`), per bundle name; written by the bundle
downloader process, read through the workers' /metrics (multiprocess mode)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

loaded = Counter("regokite_bundle_loaded", "Bundle revisions activated.", ["name"])
failed_load = Counter(
    "regokite_bundle_failed_load",
    "Bundle downloads or activations that failed (the last good revision kept serving).",
    ["name"],
)
last_request = Gauge(
    "regokite_bundle_last_request_timestamp_seconds",
    "When the bundle service was last asked.",
    ["name"],
    multiprocess_mode="livemax",
)
last_success_download = Gauge(
    "regokite_bundle_last_success_download_timestamp_seconds",
    "When a bundle was last downloaded.",
    ["name"],
    multiprocess_mode="livemax",
)
last_success_activation = Gauge(
    "regokite_bundle_last_success_activation_timestamp_seconds",
    "When a bundle revision was last activated.",
    ["name"],
    multiprocess_mode="livemax",
)
active_revision = Gauge(
    "regokite_bundle_active_revision",
    "1 for each bundle's active revision (0 for revisions it served before).",
    ["name", "revision"],
    multiprocess_mode="livemax",
)
