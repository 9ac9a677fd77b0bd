"""The API client against a real local HTTP server that answers 503 and 429 with Retry-After, as an
API server does while it starts or sheds load: the request is sent again after the time asked (each
wait and the total bounded), for writes too, counted in a metric, and logged once per outage."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from regokite.kube import client as kube_client
from regokite.kube.client import ApiError, KubeClient, retry_after
from tests.http_replies import reply


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, Retry-After) until the script runs out,
    then 200 with the request's method; records when each request arrived."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: deque[tuple[int, str | None]] = deque()
        self.seen: list[tuple[str, float]] = []


class _Handler(BaseHTTPRequestHandler):
    server: Scripted

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.server.seen.append((self.command, time.monotonic()))
        status, after = self.server.script.popleft() if self.server.script else (200, None)
        body = json.dumps({"method": self.command} if status == 200 else {"message": "try later"}).encode()
        reply(self, status, body, headers={"Retry-After": after} if after is not None else None)

    do_GET = do_PATCH = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Scripted]:
    srv = Scripted()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def kube(server: Scripted, tmp_path: Path) -> Iterator[KubeClient]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    client = KubeClient(kubeconfig)
    yield client
    client.close()


def waits(status: str, outcome: str = "waited") -> float:
    value = REGISTRY.get_sample_value("regokite_api_retry_after_total", {"status": status, "outcome": outcome})
    return value or 0.0


def test_a_request_answered_503_or_429_with_retry_after_waits_as_asked_and_is_sent_again(
    server: Scripted, kube: KubeClient
) -> None:
    before = (waits("503"), waits("429"))
    server.script.extend([(503, "1"), (429, "0")])
    assert kube.get("/api/v1/namespaces") == {"method": "GET"}
    assert [m for m, _ in server.seen] == ["GET", "GET", "GET"]
    assert server.seen[1][1] - server.seen[0][1] >= 0.9  # it waited the second asked
    assert (waits("503"), waits("429")) == (before[0] + 1, before[1] + 1)
    # a write too: the server did not act on a request it answered Retry-After
    server.script.append((503, "0"))
    assert kube.patch("/api/v1/namespaces/x", {"metadata": {}}) == {"method": "PATCH"}
    assert [m for m, _ in server.seen[3:]] == ["PATCH", "PATCH"]


def test_an_error_without_retry_after_is_the_callers_at_once(server: Scripted, kube: KubeClient) -> None:
    server.script.extend([(503, None), (500, None)])
    for _ in range(2):
        with pytest.raises(ApiError):
            kube.get("/api/v1/namespaces")
    assert len(server.seen) == 2


def test_waits_are_bounded_whatever_the_server_asks(
    server: Scripted, kube: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert retry_after(503, "3600") == kube_client.RETRY_AFTER_MAX_WAIT
    assert retry_after(503, "Thu, 01 Jan 1970 00:00:00 GMT") == 0.0  # a date passed: at once
    assert retry_after(200, "1") is None and retry_after(404, "1") is None and retry_after(503, "soon") is None
    monkeypatch.setattr(kube_client, "RETRY_AFTER_MAX_WAIT", 0.1)
    monkeypatch.setattr(kube_client, "RETRY_AFTER_BUDGET", 0.25)
    gave_up = waits("503", "gave_up")
    server.script.extend([(503, "3600")] * 10)
    started = time.monotonic()
    with pytest.raises(ApiError) as failed:
        kube.get("/api/v1/namespaces")
    assert failed.value.status == 503 and time.monotonic() - started < 5
    assert len(server.seen) == 3  # waited 0.1 twice; a third wait would pass the 0.25 s budget
    assert waits("503", "gave_up") == gave_up + 1


def test_an_outage_is_logged_once_and_its_end_once(
    server: Scripted, kube: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="regokite.kube")
    for _ in range(5):  # every request of the outage waits once
        server.script.append((429, "0"))
        kube.get("/api/v1/namespaces")
    kube.get("/api/v1/namespaces")  # answered at once: over
    kube.get("/api/v1/namespaces")
    lines = [r.getMessage() for r in caplog.records if r.name == "regokite.kube"]
    assert len(lines) == 2 and "failing" in lines[0] and "recovered" in lines[1]
    assert caplog.records[-1].failures == 5


def test_a_watch_that_opens_during_an_outage_waits_too(server: Scripted, kube: KubeClient) -> None:
    server.script.append((503, "0"))
    stream = kube.stream("/api/v1/namespaces", {"watch": "true"}, timeout=5)
    stream.close()
    assert len(server.seen) == 2


def test_a_write_waiting_on_retry_after_asks_the_write_guard_again_before_it_is_sent_again(
    server: Scripted, kube: KubeClient
) -> None:
    """Leader election: a Lease lost while a write waits must stop that write (the guard raises)."""
    asked: list[str] = []

    def guard(method: str, path: str) -> None:
        asked.append(method)
        if len(asked) > 1:
            raise ApiError(0, "NotLeader", {"message": "not the leader"}, f"{method} {path}")

    kube.write_guard = guard
    server.script.append((503, "0"))
    with pytest.raises(ApiError, match="not the leader"):
        kube.patch("/api/v1/namespaces/x", {"metadata": {}})
    assert asked == ["PATCH", "PATCH"] and [m for m, _ in server.seen] == ["PATCH"]
