"""Run a documentation page's shell blocks as a reader would, in order, so the docs cannot rot.

Every ```sh block of a page runs, in a copy of the repository (its tracked
files, as a fresh clone has them), with a HOME of its own and a virtualenv
first on PATH (so `python3 -m pip install .` and `regokite` are the copy's).
An HTML comment right before a block says how to judge it:

    <!-- doc-test: serve="TEXT" port=8443 output="TEXT" exit=1 cluster -->

* `serve="TEXT"`: a server; it runs in the background until the page is done,
  and the next block starts once TEXT is in its output (and it must log no
  error line);
* `port=N`: the page's port N is replaced by a free one (the block's command
  gets `--port`), since tests run beside other servers;
* `output="TEXT"` (repeatable): its output must hold TEXT;
* `exit=N`: the exit status it must end with (default 0);
* `cluster`: it needs the API server (the page then runs as an integration test).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BLOCK = re.compile(
    r"(?:<!-- doc-test: (?P<opts>.*?) -->\n)?```(?P<lang>sh|bash|shell|console)\n(?P<code>.*?)\n```", re.S
)
ANY_SHELL_FENCE = re.compile(r"^```(?:sh|bash|shell|console)\s*$", re.M)


@dataclass
class Block:
    page: str
    index: int
    code: str
    serve: str | None = None
    port: int | None = None
    outputs: list[str] = field(default_factory=list)
    exit: int = 0
    cluster: bool = False

    def __str__(self) -> str:
        return f"{self.page} block {self.index}: {self.code.splitlines()[0]}"


def blocks(page: str) -> list[Block]:
    """The page's shell blocks, each with what its comment says; every shell fence is one."""
    text = (DOCS / page).read_text()
    found = []
    for i, m in enumerate(BLOCK.finditer(text)):
        block = Block(page, i, m["code"])
        for opt in shlex.split(m["opts"] or ""):
            key, _, value = opt.partition("=")
            if key == "serve":
                block.serve = value
            elif key == "port":
                block.port = int(value)
            elif key == "output":
                block.outputs.append(value)
            elif key == "exit":
                block.exit = int(value)
            elif key == "cluster":
                block.cluster = True
            else:
                raise ValueError(f"{page}: unknown doc-test option {opt!r}")
        found.append(block)
    assert len(found) == len(ANY_SHELL_FENCE.findall(text)), f"{page}: a shell fence the runner does not read"
    return found


def upstream() -> Path | None:
    """The unchanged upstream material (gatekeeper-library, Metacontroller's examples) beside the repository."""
    for candidate in (
        os.environ.get("REGOKITE_UPSTREAM"),
        ROOT.parent / "shared/upstream",
        Path("/work/shared/upstream"),
    ):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@dataclass
class Workspace:
    """A fresh copy of the repository, a HOME and a virtualenv: what a reader has after cloning."""

    repo: Path
    home: Path
    venv: Path
    env: dict[str, str]


def workspace(tmp: Path, *, install: bool, kubeconfig: Path | None = None) -> Workspace:
    repo, home, venv = tmp / "regokite", tmp / "home", tmp / "venv"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_bytes(source.read_bytes())
            (repo / name).chmod(source.stat().st_mode)
    found = upstream()
    if found is not None:  # as a reader who cloned them beside the repository
        (repo / "gatekeeper-library").symlink_to(found / "gatekeeper-library")
    home.mkdir()
    # system site packages: regokite's dependencies are installed already; the copy goes in the venv
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "PYTHONPATH")}
    env |= {"HOME": str(home), "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    if install:
        pip = [str(venv / "bin/python3"), "-m", "pip", "install", "--quiet", "--no-deps", "."]
        done = subprocess.run(pip, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    return Workspace(repo, home, venv, env)


def _with_ports(code: str, ports: dict[int, int], serving: bool) -> str:
    """The documented ports replaced by free ones; a server that listens on its default port is given it."""
    for documented, port in ports.items():
        mentioned = re.search(rf"\b{documented}\b", code) is not None
        code = re.sub(rf"\b{documented}\b", str(port), code)
        if serving and not mentioned:
            code = code.rstrip() + f" --port {port}"
    return code


@contextlib.contextmanager
def run_page(page: str, space: Workspace, log_dir: Path) -> Iterator[list[str]]:
    """Run every block of `page` in order; yields the outputs, then stops the servers it started."""
    page_blocks = blocks(page)
    ports = {b.port: free_port() for b in page_blocks if b.port}
    servers: list[tuple[subprocess.Popen, Path]] = []
    outputs: list[str] = []
    try:
        for block in page_blocks:
            code = _with_ports(block.code, ports, serving=block.serve is not None and block.port is not None)
            if block.serve is not None:
                log = log_dir / f"{Path(page).stem}-{block.index}.log"
                servers.append((_serve(block, code, space, log), log))
                outputs.append(log.read_text(errors="replace"))
                continue
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=space.repo,
                env=space.env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            out = done.stdout + done.stderr
            assert done.returncode == block.exit, f"{block}: exit {done.returncode}, wanted {block.exit}\n{out}"
            for wanted in block.outputs:
                assert wanted in out, f"{block}: no {wanted!r} in its output:\n{out}"
            outputs.append(done.stdout)
        yield outputs
        for proc, log in servers:
            assert proc.poll() is None, f"a server of {page} exited:\n{log.read_text(errors='replace')}"
    finally:
        for proc, _ in servers:
            _stop(proc)
    for _, log in servers:
        errors = [line for line in log.read_text(errors="replace").splitlines() if '"level": "error"' in line]
        assert not errors, f"{page}: a server logged errors:\n" + "\n".join(errors)


def _serve(block: Block, code: str, space: Workspace, log: Path) -> subprocess.Popen:
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=space.repo,
            env=space.env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole, workers included
        )
    deadline = time.monotonic() + 300  # a pip install may come first
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if block.serve and block.serve in text:
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"{block}: exited {proc.returncode} before serving:\n{text}")
        time.sleep(0.2)
    _stop(proc)
    raise AssertionError(f"{block}: no {block.serve!r} in its output within 300 s:\n{log.read_text()}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
