"""Killing hook worker processes from a test and waiting until they are really gone."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

from tests.waiting import wait_until


def gone(pid: int) -> bool:
    """Exited (a zombie not reaped yet counts: its end of the pipe is closed) or reaped already."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped before, or while, the file is read
        return True


def kill_and_wait(pids: Iterable[int]) -> None:
    """SIGKILL each process and wait until it is gone."""
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda pid=pid: gone(pid), what=f"process {pid} gone after SIGKILL")
