"""Prometheus plumbing shared by the admission server and the controllers.

With several worker processes a scrape reaches one of them, so metrics live
in prometheus_client's multiprocess mode whenever PROMETHEUS_MULTIPROC_DIR is
set (the admission supervisor sets it before forking workers). The metrics
themselves are in admission_metrics and controller_metrics, so each process
exports only its own.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, multiprocess

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


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
