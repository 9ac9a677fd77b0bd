"""http.send in the embedded engine: only to allowed hosts, with OPA's request
and response shapes (checked against OPA on the same loopback server),
raise_error, timeout and caching."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opa_bindings import OpaEngine

from regokite.bundle import Bundle, Module
from regokite.cli import main
from regokite.engine.embedded import EmbeddedEngine
from regokite.engine.extensions import ExtensionOptions
from regokite.errors import EvaluationError, PolicyLoadError

POLICY = "package p\n\nresponse := http.send(input.request)\n"


class _Handler(BaseHTTPRequestHandler):
    hits: dict[str, int] = {}

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        _Handler.hits[self.path] = _Handler.hits.get(self.path, 0) + 1
        length = int(self.headers.get("Content-Length") or 0)
        received = self.rfile.read(length).decode() if length else ""
        if self.path == "/slow":
            threading.Event().wait(1.0)
        status = 404 if self.path == "/missing" else 200
        kind = "text/plain" if self.path == "/text" else "application/json"
        body = json.dumps(
            {"path": self.path, "method": self.command, "received": received, "x": self.headers["X-Test"]}
        )
        payload = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        if self.path.startswith("/cached"):
            self.send_header("Cache-Control", "max-age=60")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _engine(*hosts: str, timeout: float = 5.0) -> EmbeddedEngine:
    return EmbeddedEngine(Bundle((Module("p.rego", POLICY),)), ExtensionOptions(hosts, timeout))


def _opa(request: dict[str, Any]) -> Any:
    with OpaEngine() as opa:
        opa.add_policy("p.rego", POLICY)
        return opa.eval_document("p.response", {"request": request})


def _comparable(response: dict[str, Any]) -> dict[str, Any]:
    response = dict(response)
    headers = response.pop("headers", {})
    return {**response, "content-type": headers.get("content-type")}


@pytest.mark.parametrize(
    "request_fields",
    [
        {"method": "GET", "url": "/json", "headers": {"X-Test": "yes"}},
        {"method": "post", "url": "/json", "body": {"a": [1, 2]}},
        {"method": "POST", "url": "/json", "raw_body": "plain words"},
        {"method": "GET", "url": "/text"},
        {"method": "GET", "url": "/text", "force_json_decode": True},
        {"method": "GET", "url": "/missing"},
    ],
)
def test_response_is_shaped_as_opa_shapes_it(server, request_fields):
    request = {**request_fields, "url": f"http://{server}{request_fields['url']}"}
    ours = _engine(server).evaluate("data.p.response", {"request": request})
    assert _comparable(ours) == _comparable(_opa(request))


def test_a_host_outside_the_allow_list_is_an_evaluation_error(server):
    port = server.rsplit(":", 1)[1]
    request = {"method": "GET", "url": f"http://{server}/json", "raise_error": False}
    for allowed in ("localhost", f"127.0.0.1:{int(port) + 1}"):
        with pytest.raises(EvaluationError, match=r"unallowed host: 127\.0\.0\.1"):
            _engine(allowed).evaluate("data.p.response", {"request": request})
    assert _engine("127.0.0.1").evaluate("data.p.response", {"request": request})["status_code"] == 200


def test_a_network_error_raises_unless_raise_error_is_false(server):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    request = {"method": "GET", "url": f"http://127.0.0.1:{closed}/"}
    with pytest.raises(EvaluationError, match=r"http\.send"):
        _engine("127.0.0.1").evaluate("data.p.response", {"request": request})
    ours = _engine("127.0.0.1").evaluate("data.p.response", {"request": {**request, "raise_error": False}})
    theirs = _opa({**request, "raise_error": False})
    assert ours["status_code"] == theirs["status_code"] == 0
    assert ours["error"]["code"] == theirs["error"]["code"] == "eval_http_send_network_error"


def test_the_timeout_is_the_smaller_of_the_request_and_the_engine_limit(server):
    request = {"method": "GET", "url": f"http://{server}/slow", "raise_error": False}
    slow = _engine(server).evaluate("data.p.response", {"request": {**request, "timeout": "100ms"}})
    assert slow["status_code"] == 0 and "timed out" in slow["error"]["message"]
    capped = _engine(server, timeout=0.1).evaluate("data.p.response", {"request": {**request, "timeout": "10s"}})
    assert capped["status_code"] == 0
    assert _engine(server).evaluate("data.p.response", {"request": request})["status_code"] == 200


def test_cache_honours_cache_control_and_force_cache(server):
    engine = _engine(server)
    for path, extra, expected_hits in [
        ("/cached-a", {"cache": True}, 1),
        ("/uncached", {"cache": True}, 3),
        ("/forced", {"force_cache": True, "force_cache_duration_seconds": 60}, 1),
        ("/cached-b", {}, 3),
    ]:
        request = {"method": "GET", "url": f"http://{server}{path}", **extra}
        for _ in range(3):
            assert engine.evaluate("data.p.response", {"request": request})["status_code"] == 200
        assert _Handler.hits[path] == expected_hits, path


def test_unknown_request_fields_are_an_error_as_in_opa(server):
    request = {"method": "GET", "url": f"http://{server}/json", "colour": "red"}
    with pytest.raises(EvaluationError, match="invalid request parameters"):
        _engine(server).evaluate("data.p.response", {"request": request})


def test_capabilities_lists_http_send_as_added_only_when_allowed(capsys):
    assert main(["capabilities", "--format", "json"]) == 0
    lists = json.loads(capsys.readouterr().out)
    assert "http.send" in lists["refused"] and "http.send" not in lists["regorus"]
    assert "crypto.sha256" in lists["added"] and "count" in lists["regorus"]
    assert main(["capabilities", "--format", "json", "--allow-http-send", "example.com:443"]) == 0
    lists = json.loads(capsys.readouterr().out)
    assert "http.send" in lists["added"] and "http.send" not in lists["refused"]


def test_eval_reaches_an_allowed_host(server, tmp_path, capsys):
    (tmp_path / "p.rego").write_text(POLICY)
    (tmp_path / "input.json").write_text(json.dumps({"request": {"method": "GET", "url": f"http://{server}/json"}}))
    argv = ["eval", "-d", str(tmp_path), "-i", str(tmp_path / "input.json"), "--format", "pretty"]
    assert main([*argv, "--allow-http-send", server, "data.p.response.status_code"]) == 0
    assert capsys.readouterr().out.strip() == "200"


def test_a_policy_calling_http_send_loads_only_with_allowed_hosts():
    with pytest.raises(PolicyLoadError, match=r"http\.send"):
        EmbeddedEngine(Bundle((Module("p.rego", POLICY),)))
    assert _engine("127.0.0.1").options.http_send_hosts == ("127.0.0.1",)
