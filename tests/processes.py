"""Processes a test started or watches: stopping them, killing them, waiting until they are really gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tests.waiting import wait_until

REGOKITE = (sys.executable, "-m", "regokite.cli")  # this checkout's command line (PATH's `regokite` may be another's)


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


def terminate(proc: subprocess.Popen, timeout: float = 15, *, group: bool = False) -> int | None:
    """SIGTERM, then wait up to `timeout`; past it SIGKILL (its whole process group with `group`: one started
    with start_new_session, whose children must go too). The exit code, or None when it had to be killed."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()
        return None


def json_lines(text: str) -> list[dict]:
    """The JSON objects among a process's log lines (other lines left out)."""
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                found.append(entry)
    return found
