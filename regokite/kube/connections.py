"""Keep-alive HTTP/1.1 connections to the API server for requests whose answer is read whole (every
request but a watch), parsed by httptools (llhttp, in C).

urllib3 and http.client cost 0.6-0.9 ms of CPU per request here (Retry and Timeout objects, URL
parsing, header parsing through the email package), 3-5x this path's 0.1-0.2 ms: with five writes a
parent it was half a controller's CPU. What they do that a request needs is done here the same way:
TLS as the kubernetes package configures urllib3 (the CA, client certificate, verification,
`tls_server_name`), one pool of idle connections, a connection found closed while idle is dropped
before use (urllib3's is_connection_dropped), a request whose reused connection failed before any
byte of its answer is sent again on a new one when urllib3 would send it again (not written, or a
method its Retry repeats), the timeout bounds the whole request. `Connections.usable` says when this
path is not the same (a proxy, socket options, an assert_hostname): the caller keeps urllib3 then.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any

import httptools
import urllib3

IDEMPOTENT = frozenset(urllib3.Retry.DEFAULT_ALLOWED_METHODS)  # what urllib3 sends again after a failed read


class Answer:
    """An answer read whole: what the client reads of urllib3's response (status, reason, headers, read())."""

    def __init__(self, status: int, reason: str, headers: dict[str, str], body: bytes) -> None:
        self.status, self.reason, self.headers, self._body = status, reason, headers, body

    def read(self) -> bytes:
        return self._body

    def get_redirect_location(self) -> str | None:
        return self.headers.get("Location") if self.status in (301, 302, 303, 307, 308) else None


class _Reader:
    """httptools' callbacks: the answer's reason, headers and body, and whether it is complete."""

    def __init__(self) -> None:
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.body: list[bytes] = []
        self.complete = False
        self.keep_alive = self.headers_done = False
        self.parser = httptools.HttpResponseParser(self)

    def on_status(self, reason: bytes) -> None:
        self.reason += reason.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").title(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.keep_alive = self.parser.should_keep_alive()  # read here: llhttp resets it once the answer ends
        self.headers_done = True

    def until_closed(self) -> bool:
        """Whether the answer's body is what comes until the connection closes (no length, not chunked)."""
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        return self.headers_done and "Content-Length" not in self.headers and not chunked

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Connections:
    """A pool of keep-alive connections to one API server; thread-safe."""

    def __init__(self, host: str, configuration: Any, pool_size: int) -> None:
        url = urllib3.util.parse_url(host)
        self.scheme = url.scheme or "https"
        self.host, self.port = url.host or "localhost", url.port or (443 if self.scheme == "https" else 80)
        self._authority = f"{self.host}:{self.port}" if url.port else self.host
        self._prefix = url.path or ""
        self._context = _tls(configuration) if self.scheme == "https" else None
        self._server_name = configuration.tls_server_name or self.host
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._size = pool_size
        retries = configuration.retries
        total = retries.total if isinstance(retries, urllib3.Retry) else retries
        self._connect_attempts = 1 + (total if isinstance(total, int) and not isinstance(total, bool) else 0)

    @staticmethod
    def usable(configuration: Any, manager: Any) -> bool:
        """Whether this path makes the same requests as urllib3's pool the configuration built."""
        return (
            type(manager) is urllib3.PoolManager
            and configuration.socket_options is None
            and not getattr(configuration, "keep_alive", False)
            and configuration.assert_hostname is None
        )

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()

    def request(
        self, method: str, target: str, body: bytes | None, headers: Mapping[str, str], timeout: float
    ) -> Answer:
        """Send the request, read its whole answer; OSError (ConnectionError, TimeoutError, SSLError) when
        the server cannot be reached or did not answer within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        head = [f"{method} {self._prefix}{target} HTTP/1.1", f"Host: {self._authority}", "Accept-Encoding: identity"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        if body is not None or method in ("POST", "PUT", "PATCH"):  # as http.client: no length for a GET
            head.append(f"Content-Length: {len(body or b'')}")
        message = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")
        while True:
            sock, reused = self._take(deadline)
            try:
                return self._exchange(sock, message, deadline)
            except _Unanswered as exc:
                sock.close()
                # again on a new connection only what urllib3 sends again: a request not sent, or one that
                # may be repeated (its Retry's methods); a new connection that failed is the server's failure
                if not reused or (exc.sent and method not in IDEMPOTENT):
                    raise exc.error from None
            except BaseException:
                sock.close()
                raise

    def _take(self, deadline: float) -> tuple[socket.socket, bool]:
        """An idle connection still open (and so reused), or a new one."""
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                return self._connect(deadline), False
            if not _dropped(sock):
                return sock, True
            sock.close()

    def _connect(self, deadline: float) -> socket.socket:
        """A new connection, tried as often as urllib3's Retry tries one; a failure to reach the server is a
        ConnectionError (as urllib3's NewConnectionError is one of its HTTPErrors), a timeout a TimeoutError."""
        for attempt in range(self._connect_attempts):
            try:
                return self._open(deadline)
            except (TimeoutError, ssl.SSLError):
                raise
            except OSError as exc:  # refused, unreachable, a name that does not resolve
                if attempt + 1 == self._connect_attempts:
                    raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _open(self, deadline: float) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=_left(deadline))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client's connections
        if self._context is None:
            return sock
        try:
            return self._context.wrap_socket(sock, server_hostname=self._server_name)
        except BaseException:
            sock.close()
            raise

    def _exchange(self, sock: socket.socket, message: bytes, deadline: float) -> Answer:
        """One request on `sock`; the connection goes back to the pool when the answer lets it."""
        reader = _Reader()
        parser = reader.parser
        received = sent = False
        try:
            sock.settimeout(_left(deadline))
            sock.sendall(message)
            sent = True
            while not reader.complete:
                sock.settimeout(_left(deadline))
                data = sock.recv(65536)
                if not data:
                    if reader.until_closed():  # the connection's end is the answer's end
                        break
                    raise ConnectionResetError("the API server closed the connection before its answer ended")
                received = True
                parser.feed_data(data)
        except (ConnectionError, ssl.SSLError) as exc:
            if received:
                raise
            raise _Unanswered(exc, sent) from None
        except httptools.HttpParserError as exc:
            raise ConnectionError(f"the API server's answer is not HTTP: {exc}") from None
        answer = Answer(parser.get_status_code(), reader.reason, reader.headers, b"".join(reader.body))
        if reader.keep_alive:
            with self._lock:
                if len(self._idle) < self._size:
                    self._idle.append(sock)
                    return answer
        sock.close()
        return answer


class _Unanswered(Exception):
    """A connection that failed before any byte of its answer (for a reused one: try a new one)."""

    def __init__(self, error: BaseException, sent: bool) -> None:
        super().__init__(str(error))
        self.error, self.sent = error, sent


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the API server did not answer in time")
    return left


def _dropped(sock: socket.socket) -> bool:
    """An idle connection the server closed (or wrote to: nothing is owed on an idle connection)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _tls(configuration: Any) -> ssl.SSLContext:
    """The TLS the kubernetes package asks of urllib3: its CA (file or data), client certificate and
    verification (urllib3's context: TLS 1.2 at least)."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert, cadata=configuration.ca_cert_data)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
