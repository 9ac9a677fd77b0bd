"""Run `regokite admission` as a real process on a free port, for tests and benches."""

from __future__ import annotations

import contextlib
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.ports import free_port
from tests.processes import terminate


@dataclass
class RunningServer:
    url: str
    ca: Path
    process: subprocess.Popen
    log: Path
    tls_dir: Path

    def client(self, **kw: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=ssl.create_default_context(cafile=self.ca), timeout=10, **kw)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def workers(self) -> set[int]:
        """The supervisor's worker processes now."""
        tasks = Path(f"/proc/{self.process.pid}/task")
        found: set[int] = set()
        for task in tasks.iterdir() if tasks.exists() else ():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                found.update(int(pid) for pid in (task / "children").read_text().split())
        return found

    def busy_workers(self, looks: int = 10, every: float = 0.02) -> set[int]:
        """Workers on (or waiting for) a CPU at each of `looks`: those stuck evaluating a review. An idle worker
        sleeps in its event loop; one running a policy that never ends never sleeps."""
        busy = self.workers()
        for _ in range(looks):
            busy = {pid for pid in busy if _state(pid) == "R"}
            time.sleep(every)
        return busy


@contextlib.contextmanager
def admission_server(
    policies: Path | list[Path],
    tmp: Path,
    *args: str,
    host: str = "127.0.0.1",
    ready_timeout: float = 30,
    port: int | None = None,
) -> Iterator[RunningServer]:
    """Start the server (on a free port unless given), wait until /readyz answers, stop it with SIGTERM
    afterwards."""
    port = port or free_port()
    tls_dir = tmp / "tls"
    log = tmp / "admission.log"
    roots = policies if isinstance(policies, list) else [policies]
    cmd = [sys.executable, "-m", "regokite.cli", "admission", "--host", host, "--port", str(port)]
    for root in roots:
        cmd += ["--policies", str(root)]
    cmd += ["--self-signed", "--tls-dir", str(tls_dir), "--reload-interval", "0.2", *args]
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            cmd,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,  # its own process group: a failed stop kills the workers too
        )
    server = RunningServer(f"https://{host}:{port}", tls_dir / "ca.crt", proc, log, tls_dir)
    try:
        _wait_ready(server, ready_timeout)
        yield server
    finally:
        terminate(proc, group=True)


def _wait_ready(server: RunningServer, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"regokite admission exited with {server.process.returncode}:\n{server.logs()}")
        if server.ca.exists():
            try:
                with server.client() as c:
                    if c.get("/readyz").status_code == 200:
                        return
            except httpx.HTTPError:
                pass
        time.sleep(0.1)
    raise TimeoutError(f"regokite admission not ready after {timeout}s:\n{server.logs()}")


def _state(pid: int) -> str | None:
    """The process's state letter (R running or runnable, S sleeping, Z exited, ...), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]  # after the command name, which may hold spaces
