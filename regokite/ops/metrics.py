"""Prometheus plumbing shared by the admission server and the controllers.

With several worker processes a scrape reaches one of them, so metrics live
in prometheus_client's multiprocess mode whenever PROMETHEUS_MULTIPROC_DIR is
set (the admission supervisor sets it before forking workers). The metrics
themselves are in admission_metrics and controller_metrics, so each process
exports only its own.
"""

from __future__ import annotations

import contextlib
import glob
import os
from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Metric, generate_latest, multiprocess

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


def forget_process(pid: int) -> None:
    """Drop a dead worker's live gauges, so its last values stop counting."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)


class _WorkerFiles:
    """prometheus_client's multiprocess collector, minus files a new worker has created but not yet sized."""

    def __init__(self, path: str) -> None:
        self.path = path

    def collect(self) -> Iterable[Metric]:
        files = []
        for file in glob.glob(os.path.join(self.path, "*.db")):
            with contextlib.suppress(FileNotFoundError):
                if os.path.getsize(file) >= 8:  # its header: an empty file holds no values yet
                    files.append(file)
        return multiprocess.MultiProcessCollector.merge(files, accumulate=True)


def exposition() -> tuple[bytes, str]:
    """The current metrics in Prometheus text format, across worker processes."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        return generate_latest(), CONTENT_TYPE_LATEST
    registry = CollectorRegistry()
    registry.register(_WorkerFiles(path))
    for _ in range(2):
        with contextlib.suppress(FileNotFoundError):  # a dead worker's gauges removed as we read: read again
            return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(registry), CONTENT_TYPE_LATEST
