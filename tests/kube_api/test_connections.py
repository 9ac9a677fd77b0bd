"""kube.connections against a scripted HTTP server: keep-alive reuse, answers read whole (chunked, a
closed connection), a connection the server closed while idle, what is sent again and what is not,
timeouts and refusals as the client's callers classify them."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import urllib3

from regokite.kube.client import error_reason
from regokite.kube.connections import Connections
from regokite.ops import tls

Script = Callable[[socket.socket, int], bool]  # (connection, request number on it) -> keep the connection


def _config(**tls: object) -> SimpleNamespace:
    return SimpleNamespace(
        tls_server_name=None, retries=urllib3.Retry(3), socket_options=None, assert_hostname=None, **tls
    )


class Server:
    """Accepts connections; each request read is answered by `script` (which may close instead)."""

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        self.script, self.accepted, self.requests, self.tls = script, 0, [], tls
        self.peer_certs: list[dict] = []
        self.closed = threading.Semaphore(0)  # released as each connection ends
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
                self.peer_certs.append(conn.getpeercert())
            self._answer(conn)
        except ssl.SSLError:  # a client that refused our certificate
            return
        finally:
            conn.close()
            self.closed.release()

    def _answer(self, conn: socket.socket) -> None:
        buf, number = b"", 0
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = next(
                (int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")), 0
            )
            while len(buf) < length:
                buf += conn.recv(65536)
            self.requests.append((head.split(b"\r\n")[0].decode(), buf[:length]))
            buf = buf[length:]
            if not self.script(conn, number):
                return
            number += 1


def ok(body: bytes = b'{"ok": true}', extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


@pytest.fixture
def serve() -> Iterator[Callable[[Script], tuple[Server, Connections]]]:
    made: list[tuple[Server, Connections]] = []

    def make(script: Script) -> tuple[Server, Connections]:
        server = Server(script)
        made.append((server, Connections(f"http://127.0.0.1:{server.port}", _config(), 4)))
        return made[-1]

    yield make
    for server, connections in made:
        connections.close()
        server.sock.close()


def test_one_connection_carries_every_request_and_its_answer_whole(serve) -> None:
    def script(conn: socket.socket, n: int) -> bool:
        if n == 1:  # chunked, and a header the client reads (Retry-After)
            conn.sendall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\n")  # fmt: skip
        else:
            conn.sendall(ok())
        return True

    server, connections = serve(script)
    first = connections.request("PATCH", "/x", b'{"v": 1}', {"Content-Type": "application/json"}, 5)
    second = connections.request("GET", "/y", None, {}, 5)
    third = connections.request("GET", "/z", None, {}, 5)
    assert (first.status, first.read()) == (200, b'{"ok": true}')
    assert (second.status, second.reason, second.headers["Retry-After"], second.read()) == (
        429, "Too Many Requests", "1", b'{"a": 1}'
    )  # fmt: skip
    assert third.status == 200
    assert server.accepted == 1
    assert server.requests[0] == ("PATCH /x HTTP/1.1", b'{"v": 1}')


def test_an_answer_that_ends_with_its_connection_is_read_whole_and_the_connection_not_kept(serve) -> None:
    def script(conn: socket.socket, n: int) -> bool:
        conn.sendall(b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"whole": true}')
        return False

    server, connections = serve(script)
    assert connections.request("GET", "/a", None, {}, 5).read() == b'{"whole": true}'
    assert connections.request("GET", "/b", None, {}, 5).status == 200
    assert server.accepted == 2


def test_a_connection_closed_while_idle_is_not_used(serve) -> None:
    def script(conn: socket.socket, n: int) -> bool:
        conn.sendall(ok())  # says nothing of closing, then closes: an idle timeout
        return False

    server, connections = serve(script)
    for _ in range(3):
        assert connections.request("POST", "/a", b"{}", {}, 5).status == 200
        assert server.closed.acquire(timeout=5)  # closed by now: the next request finds it so
    assert server.accepted == 3


@pytest.mark.parametrize(("method", "again"), [("GET", True), ("DELETE", True), ("POST", False), ("PATCH", False)])
def test_a_reused_connection_that_fails_before_its_answer(serve, method: str, again: bool) -> None:
    """Sent again on a new connection only where urllib3 would send it again (its Retry's methods): a
    create or a patch the server may have taken is its caller's to judge."""
    calls = []

    def script(conn: socket.socket, n: int) -> bool:
        calls.append(n)
        if len(calls) == 2:  # the second request overall: read, then the connection ends unanswered
            conn.shutdown(socket.SHUT_RDWR)
            return False
        conn.sendall(ok())
        return True

    server, connections = serve(script)
    assert connections.request(method, "/a", b"{}", {}, 5).status == 200
    if again:
        assert connections.request(method, "/a", b"{}", {}, 5).status == 200
        assert server.accepted == 2
    else:
        with pytest.raises(ConnectionError) as failed:
            connections.request(method, "/a", b"{}", {}, 5)
        assert error_reason(failed.value) == "connection"
    assert len(server.requests) == (3 if again else 2)


def test_an_answer_that_does_not_come_in_time_is_a_timeout(serve) -> None:
    _, connections = serve(lambda conn, n: True)  # reads, never answers
    with pytest.raises(TimeoutError) as failed:
        connections.request("GET", "/slow", None, {}, 0.3)
    assert error_reason(failed.value) == "timeout"


def test_a_server_that_is_not_there_is_a_connection_failure() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    connections = Connections(f"http://127.0.0.1:{port}", _config(), 4)
    with pytest.raises(ConnectionError) as failed:
        connections.request("GET", "/", None, {}, 5)
    assert error_reason(failed.value) == "connection"


@pytest.fixture
def tls_files(tmp_path: Path) -> SimpleNamespace:
    """A CA, the API server's certificate for kube.test (not 127.0.0.1), a client certificate."""
    ca = tls.new_ca("test CA")
    files = SimpleNamespace(ca=tmp_path / "ca.crt", cert=tmp_path / "server.crt", key=tmp_path / "server.key")
    files.ca.write_bytes(tls.pem(ca[0]))
    for name, host in (("server", "kube.test"), ("client", "regokite")):
        cert, key = tls.issue(ca, [host])
        (tmp_path / f"{name}.crt").write_bytes(cert)
        (tmp_path / f"{name}.key").write_bytes(key)
    files.client_cert, files.client_key = tmp_path / "client.crt", tmp_path / "client.key"
    return files


def _tls_server(files: SimpleNamespace) -> Server:
    context = tls.server_context(files.cert, files.key)
    context.verify_mode = ssl.CERT_REQUIRED  # as the API server asks for a client certificate
    context.load_verify_locations(files.ca)
    return Server(lambda conn, n: conn.sendall(ok()) is None, context)


def _tls_config(files: SimpleNamespace, **changes: object) -> SimpleNamespace:
    config = _config(ssl_ca_cert=str(files.ca), ca_cert_data=None, verify_ssl=True)
    config.cert_file, config.key_file = str(files.client_cert), str(files.client_key)
    vars(config).update(changes)
    return config


def test_tls_verifies_the_server_as_the_kubeconfig_says_and_presents_the_client_certificate(tls_files) -> None:
    server = _tls_server(tls_files)
    url = f"https://127.0.0.1:{server.port}"
    try:
        named = Connections(url, _tls_config(tls_files, tls_server_name="kube.test"), 2)
        assert named.request("GET", "/", None, {}, 5).status == 200
        assert server.peer_certs[-1]["subject"] == ((("commonName", "regokite"),),)
        with pytest.raises(ssl.SSLCertVerificationError):  # the certificate names kube.test, not 127.0.0.1
            Connections(url, _tls_config(tls_files), 2).request("GET", "/", None, {}, 5)
        unverified = Connections(url, _tls_config(tls_files, verify_ssl=False), 2)  # insecure-skip-tls-verify
        assert unverified.request("GET", "/", None, {}, 5).status == 200
    finally:
        server.sock.close()
