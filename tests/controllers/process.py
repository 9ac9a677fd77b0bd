"""Run `regokite controller` as a subprocess, the way a user runs it, for integration tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


class ControllerProcess:
    """`with ControllerProcess(kubeconfig, policies=..., controllers=..., namespace=ns) as ctl:`"""

    def __init__(
        self,
        kubeconfig: Path | str,
        *,
        policies: list[str | Path],
        controllers: list[str | Path],
        namespace: str | None = None,
        workers: int = 2,
        extra: list[str] = (),  # type: ignore[assignment]
        log_level: str = "debug",  # tests read the debug lines; benches run as deployed (info)
    ) -> None:
        self.port = free_port()
        self.log_file = Path(tempfile.mkstemp(prefix="regokite-controller-", suffix=".log")[1])
        self.argv = [sys.executable, "-m", "regokite.cli", "--log-level", log_level, "controller"]
        for p in policies:
            self.argv += ["--policies", str(p)]
        for c in controllers:
            self.argv += ["--controllers", str(c)]
        self.argv += ["--kubeconfig", str(kubeconfig), "--workers", str(workers), "--metrics-port", str(self.port)]
        if namespace:
            self.argv += ["--namespace", namespace]
        self.argv += list(extra)
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def running(
        cls, kubeconfig: Path | str, root: Path, definitions: str = "controller.yaml", **kw: Any
    ) -> ControllerProcess:
        """The controller of one policy directory holding its definitions file (an example as shipped)."""
        return cls(kubeconfig, policies=[root], controllers=[root / definitions], **kw)

    def __enter__(self) -> ControllerProcess:
        out = self.log_file.open("ab")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(self.argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()
        self.wait_ready()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"regokite controller exited {self.proc.returncode}:\n{self.logs()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"regokite controller not ready after {timeout}s:\n{self.logs()}")

    def readiness(self) -> dict:
        """/readyz's detail (its status code aside)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=5) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return r.read().decode()

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"regokite controller ignored SIGTERM for {timeout}s:\n{self.logs()}") from None

    def logs(self, tail: int = 80) -> str:
        lines = self.log_file.read_text(errors="replace").splitlines()
        return "\n".join(lines[-tail:])

    def log_records(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log_file.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
        return records
