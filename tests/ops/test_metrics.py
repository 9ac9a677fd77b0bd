"""Metrics across worker processes: a scrape never fails on a worker that is just starting or just gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from regokite.ops.metrics import exposition


def test_a_worker_file_not_yet_sized_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    (tmp_path / "gauge_livemax_4242.db").write_bytes(b"")  # a forked worker between creating and sizing it
    body, content_type = exposition()
    assert body == b"" and content_type.startswith("text/plain")
