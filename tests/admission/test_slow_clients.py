"""Slow and silent clients against a real admission server: dropped after the documented limits, never in the way."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from tests.admission.reviews import deployment, review
from tests.admission.server import RunningServer, admission_server
from tests.admission.slow_clients import Held, hold
from tests.waiting import wait_until

HANDSHAKE, HEADERS, BODY = 1.0, 1.5, 2.5
LIMITS = (
    *("--handshake-timeout", str(HANDSHAKE), "--header-timeout", str(HEADERS), "--body-timeout", str(BODY)),
    *("--keep-alive-timeout", "1", "--max-requests-per-connection", "3", "--max-header-bytes", "16384"),
)
REPLICAS = """package admission.replicas

deny contains "too many replicas" if input.request.object.spec.replicas > 3
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("slow")
    (tmp / "policies").mkdir()
    (tmp / "policies" / "replicas.rego").write_text(REPLICAS)
    with admission_server(tmp / "policies", tmp, *LIMITS, "--max-connections", "300") as running:
        yield running
    assert "Traceback" not in running.logs()  # a dropped connection is counted, not an error


def worker_pids(running: RunningServer) -> list[int]:
    pid = running.process.pid
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def probe(running: RunningServer, until: float) -> list[tuple[str, int | str]]:
    """/healthz and a review, each on a fresh connection, over and over until `until`."""
    answers: list[tuple[str, int | str]] = []
    body = json.dumps(review(deployment(replicas=9)))
    verify = ssl.create_default_context(cafile=running.ca)
    async with httpx.AsyncClient(base_url=running.url, verify=verify, timeout=5) as client:
        while time.monotonic() < until:
            for path in ("/healthz", "/validate"):
                try:
                    if path == "/healthz":
                        answer = await client.get(path, headers={"connection": "close"})
                    else:
                        answer = await client.post(path, content=body, headers={"connection": "close"})
                    allowed = answer.json()["response"]["allowed"] if path == "/validate" else None
                    answers.append((path, answer.status_code if allowed is not True else "allowed?!"))
                except httpx.HTTPError as exc:
                    answers.append((path, type(exc).__name__))
            await asyncio.sleep(0.05)
    return answers


def test_slow_clients_are_dropped_after_their_timeouts_while_probes_are_answered(server: RunningServer) -> None:
    async def scenario() -> tuple[list[Held], list[tuple[str, int | str]]]:
        counts = {"handshake": 50, "idle": 50, "headers": 50, "body": 50}
        slow = asyncio.create_task(hold(server.url, str(server.ca), counts, pace=0.3, limit=BODY + 6))
        answers = await probe(server, until=time.monotonic() + BODY + 2)
        return await slow, answers

    held, answers = asyncio.run(scenario())
    assert all(h.opened for h in held), [h for h in held if not h.opened]
    limit = {"handshake": HANDSHAKE, "idle": HEADERS, "headers": HEADERS, "body": BODY}
    for h in held:
        assert h.dropped, f"a slow {h.kind} client was still connected after {BODY + 6}s"
        # not before the first deadline (a loaded client may finish its handshake late: then that one applies)
        assert HANDSHAKE - 0.3 < h.seconds < limit[h.kind] + 3, h  # type: ignore[operator]
    assert len(answers) > 10
    assert all(status == 200 for _, status in answers), [a for a in answers if a[1] != 200]
    with server.client() as c:
        metrics = c.get("/metrics").text
    for reason in ("handshake_timeout", "headers_timeout", "body_timeout"):
        assert f'regokite_admission_connections_dropped_total{{reason="{reason}"}}' in metrics


def test_silent_connections_beyond_the_limit_wait_in_the_backlog_not_in_the_worker(server: RunningServer) -> None:
    """500 silent TCP connections: a worker holds --max-connections at most, each for its handshake timeout."""
    [worker] = worker_pids(server)
    before = open_fds(worker)
    port = int(server.url.rsplit(":", 1)[1])
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(500)]
    try:
        peak = before
        deadline = time.monotonic() + 30
        for sock in silent:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            peak = max(peak, open_fds(worker))
            assert closed_by_server(sock)
        assert peak <= before + 300 + 5
        with server.client() as c:
            assert c.get("/healthz").status_code == 200
        wait_until(lambda: open_fds(worker) <= before + 2, what="the dropped connections' descriptors closed")
    finally:
        for sock in silent:
            sock.close()


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_headers_past_the_size_limit_are_refused(server: RunningServer) -> None:
    with server.client() as c:
        assert c.get("/healthz", headers={"x-big": "a" * 20_000}).status_code == 431
        assert c.get("/healthz", headers={"x-fits": "a" * 8_000}).status_code == 200

    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=server.ca)
    with socket.create_connection((host, int(port))) as raw, ctx.wrap_socket(raw, server_hostname=host) as tls:
        tls.settimeout(5)
        tls.sendall(b"GET /healthz HTTP/1.1\r\nx-endless: ")
        with pytest.raises(OSError):  # reset long before 64 MB, and long before the header timeout
            for _ in range(4096):
                tls.sendall(b"a" * 16384)


def test_a_connection_closes_after_its_maximum_of_requests(server: RunningServer) -> None:
    with server.client() as c:
        answers = [c.get("/healthz") for _ in range(3)]
    assert [a.headers.get("connection") for a in answers] == [None, None, "close"]
