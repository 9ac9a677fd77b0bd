"""Gatekeeper's violation export (`--enable-violation-export`) with its disk driver: each audit run's
violations as JSON lines in `<path>/<channel>/<audit id>.log`, the newest `max_audit_results` runs kept.

As Gatekeeper's driver, a run is written to `<id>.txt` (locked with flock, for a reader sharing the
volume) and renamed to `<id>.log` once complete, so a reader never sees half a run; `:` in the audit
id becomes `_`. Only `.log` files count against the runs kept (the `admission-` ones are
Gatekeeper's admission export's).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from regokite.errors import RegokiteError
from regokite.gatekeeper.violations import AUDIT_COMPLETED, AUDIT_STARTED, Violation, export_line, export_marker

DEFAULT_PATH = "/tmp/violations/topics"  # Gatekeeper's chart's Connection `path`
DEFAULT_CHANNEL = "audit-channel"  # Gatekeeper's --audit-channel
DEFAULT_KEPT = 3  # the chart's Connection `maxAuditResults`
MAX_KEPT = 5  # the disk driver refuses a larger maxAuditResults
ADMISSION_PREFIX = "admission-"


@dataclass(frozen=True)
class DiskExport:
    """Where the audit exports (the disk Connection's `path`, the channel) and how many runs stay."""

    path: str = DEFAULT_PATH
    channel: str = DEFAULT_CHANNEL
    max_audit_results: int = DEFAULT_KEPT

    def __post_init__(self) -> None:
        """The disk driver's checks of its config, in its words."""
        if not self.path or any(part == ".." for part in self.path.replace("\\", "/").split("/")):
            raise RegokiteError(f"invalid export path {self.path!r}: path cannot be empty or contain '..'")
        if os.path.normpath(self.path) in ("/", "."):
            raise RegokiteError(f"invalid export path {self.path!r}: must not be the filesystem root or '.'")
        if not self.channel or self.channel in (".", "..") or "/" in self.channel or "\\" in self.channel:
            raise RegokiteError(f"invalid export channel {self.channel!r}: must be a single path segment")
        if not 0 <= self.max_audit_results <= MAX_KEPT:
            raise RegokiteError(
                f"maxAuditResults cannot be greater than the maximum allowed audit runs: {MAX_KEPT} (nor negative)"
            )

    @property
    def directory(self) -> Path:
        return Path(self.path) / self.channel

    def write_run(self, audit_id: str, violations: Iterable[Violation]) -> Path:
        """One audit run's file: the start line, a line per violation, the completion line; published by
        rename, then the oldest runs beyond `max_audit_results` removed. Returns the published file."""
        run = audit_id.replace(":", "_")
        directory = self.directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o770)
        os.chmod(directory, 0o770)  # so a reader sharing the volume may remove what it has read
        writing, ready = directory / f"{run}.txt", directory / f"{run}.log"
        with writing.open("a", encoding="utf-8") as out:
            fcntl.flock(out.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            out.write(export_marker(AUDIT_STARTED, audit_id) + "\n")
            out.writelines(export_line(v, audit_id) + "\n" for v in violations)
            out.write(export_marker(AUDIT_COMPLETED, audit_id) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(writing, ready)
        os.chmod(ready, 0o666)
        self.remove_old_runs()
        return ready

    def remove_old_runs(self) -> None:
        """Keep the newest `max_audit_results` runs (by modification time, then name)."""
        runs = [
            p
            for p in self.directory.iterdir()
            if p.suffix == ".log" and p.is_file() and not p.name.startswith(ADMISSION_PREFIX)
        ]
        runs.sort(key=lambda p: (p.stat().st_mtime_ns, str(p)))
        for old in runs[: max(0, len(runs) - self.max_audit_results)]:
            old.unlink(missing_ok=True)
