"""Discovery (plural or kind -> type, with a hint for a missing CRD), paths, the watch stream's framing,
and how often credentials are refreshed."""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from regokite.jsoncodec import loads
from regokite.kube.client import CREDENTIALS_CHECK_SECONDS, ApiError, KubeClient, WatchStream, resource_path
from regokite.kube.discovery import Discovery, DiscoveryError
from regokite.resources import ChildType
from tests.http_replies import reply
from tests.kube_api.fake import FakeKube


def test_resources_resolve_by_plural_or_kind_with_scope_and_status() -> None:
    kube = (
        FakeKube()
        .serve("example.com/v1", "things", "Thing", status=True)
        .serve("v1", "nodes", "Node", namespaced=False)
    )
    d = Discovery(kube)  # type: ignore[arg-type]
    assert d.resolve("example.com/v1", "things") == ChildType("example.com/v1", "things", "Thing", True, True)
    assert d.resolve_kind("v1", "Node") == ChildType("v1", "nodes", "Node", False, False)
    with pytest.raises(DiscoveryError, match=r"has no resource 'widgets' \(it has: things, things/status\)"):
        d.resolve("example.com/v1", "widgets")
    with pytest.raises(DiscoveryError, match=r"does not serve example\.com/v2 .*CustomResourceDefinition installed"):
        d.resolve("example.com/v2", "things")


def test_paths_and_errors() -> None:
    assert (
        resource_path("apps/v1", "deployments", "ns", "a b", "status")
        == "/apis/apps/v1/namespaces/ns/deployments/a%20b/status"
    )
    assert resource_path("v1", "nodes") == "/api/v1/nodes"
    assert str(ApiError(409, "Conflict", {"message": "changed"}, "PATCH /x")) == "PATCH /x: 409 changed"


def test_a_watch_stream_yields_one_event_per_line_across_chunk_boundaries() -> None:
    class Response:
        closed = False

        def stream(self, size: int, decode_content: bool):
            yield b'{"type": "ADDED", "object": {"a": 1}}\n{"type": "MOD'
            yield b'IFIED", "object": {"a": 2}}\n\n'

        def close(self) -> None:
            self.closed = True

    response = Response()
    assert [e["type"] for e in WatchStream(response)] == ["ADDED", "MODIFIED"]
    assert response.closed


@pytest.mark.parametrize(
    "text",
    [
        '{"data": {"k": "caf\u00e9 \\ud83d\\ude00 \\ud800"}, "n": 1e400, "i": 12345678901234567890}',
        '[{"a": 1}]',
        '"text"',
        "{}",
    ],
)
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16-le", "utf-16-be", "utf-32"])
def test_the_api_servers_json_is_read_as_json_loads_reads_it(text: str, encoding: str) -> None:
    data = text.encode(encoding, "surrogatepass")
    assert repr(loads(data)) == repr(json.loads(data))  # repr: inf and a lone surrogate compare as written


def test_expiring_credentials_are_renewed_at_most_once_per_check_interval(tmp_path: Path) -> None:
    """The kubernetes package re-runs a kubeconfig's credential refresh before every request
    (here: an exec plugin whose token is always near expiry, so every refresh runs it); the
    client checks at most once per CREDENTIALS_CHECK_SECONDS and still picks up a new token."""
    runs = tmp_path / "runs"
    plugin = tmp_path / "token.py"
    plugin.write_text(
        "import datetime, json, pathlib\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "n = len(runs.read_text()) if runs.exists() else 0\n"
        "runs.write_text('x' * (n + 1))\n"
        "expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "    'status': {'token': f'token-{n + 1}', 'expirationTimestamp': expiry.strftime('%Y-%m-%dT%H:%M:%SZ')}}))\n"
    )
    kubeconfig = tmp_path / "kubeconfig"
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    kube = KubeClient(kubeconfig)
    token = lambda: kube.api.configuration.auth_settings()["BearerToken"]["value"]  # noqa: E731
    started = time.monotonic()
    seen = [token() for _ in range(50)]  # what every request's headers would carry
    windows = int((time.monotonic() - started) / CREDENTIALS_CHECK_SECONDS) + 1
    assert len(runs.read_text()) <= 1 + windows, "the plugin ran for every request"
    time.sleep(CREDENTIALS_CHECK_SECONDS)
    renewed = token()
    assert renewed != seen[-1] and renewed == f"Bearer token-{len(runs.read_text())}"


class _Paths(BaseHTTPRequestHandler):
    """Records each request's path; `/prefix/moved` is answered 307 to `/prefix/there` (a proxy's way)."""

    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if self.path.endswith("/moved"):
            reply(self, 307, b"", headers={"Location": "/prefix/there"})
            return
        if self.path.endswith("/missing"):
            reply(self, 404, b'{"message": "not here"}')
            return
        reply(self, 200, json.dumps({"path": self.path}).encode())

    def log_message(self, *args: object) -> None:
        pass


def test_requests_keep_the_servers_path_prefix_and_follow_a_redirect_and_a_closed_pool_is_replaced(
    tmp_path: Path,
) -> None:
    """The client sends straight to the API server's connection pool (not through the pool manager's
    URL parsing on every request): a server URL with a path (a proxy in front) keeps it, a redirect
    is still followed, and a pool the manager closed (its clear()) is looked up again."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Paths)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    cluster = {"server": f"http://127.0.0.1:{server.server_address[1]}/prefix"}
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    kube = KubeClient(kubeconfig)
    try:
        assert kube.get("/api/v1/things", limit=1) == {"path": "/prefix/api/v1/things?limit=1"}
        assert kube.get("/moved") == {"path": "/prefix/there"}
        kube.api.rest_client.pool_manager.clear()
        assert kube.get("/api/v1/again") == {"path": "/prefix/api/v1/again"}
        # the request is sent once; the manager follows its redirect from there
        moved = ["/prefix/moved", "/prefix/there"]
        assert _Paths.seen == ["/prefix/api/v1/things?limit=1", *moved, "/prefix/api/v1/again"]
        # an answer nobody reads is not decoded; an error's still is, for its message
        assert kube.request("GET", "/api/v1/unread", parse=False) is None
        with pytest.raises(ApiError, match="404 not here"):
            kube.request("GET", "/api/v1/missing", parse=False)
        assert kube.get("/api/v1/read") == {"path": "/prefix/api/v1/read"}  # the connection was given back whole
    finally:
        kube.close()
        server.shutdown()
        server.server_close()
