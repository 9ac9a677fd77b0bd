"""What one client connection may hold of an admission worker, and for how long.

uvicorn enforces only its keep-alive timeout. Measured against uvicorn 0.54
on uvloop: a TCP connection that never starts its TLS handshake is held for
asyncio's default 60 s, and one that finishes the handshake and then sends
nothing, or its headers or its body a byte at a time, is held for as long as
the client likes, each with its file descriptor and buffers. So a worker
accepts connections itself (`accept`): it takes a new connection only while
it holds fewer than `max_connections` (handshakes included; the rest wait in
the shared listen backlog for any worker with room), gives each a TLS
handshake deadline and the context current at that moment (a rotated
certificate applies to the next handshake), and serves it with
`GuardedProtocol`, uvicorn's HTTP/1.1 protocol with a deadline for each phase
of a request:

* headers: from the connection's start (or the first byte of a later
  request) until the end of the headers, and at most `max_header_bytes`
  (dropped while incomplete, answered 431 when complete);
* body: from the end of the headers until the whole body is in;
* keep-alive: idle between requests (uvicorn's own timer);
* `max_requests` per connection, after which the response says
  `connection: close`.

A connection past a deadline is dropped (reset: a client that stalls will
not read a goodbye either, and a graceful TLS close would hold it longer),
counted in `regokite_admission_connections_dropped_total{reason}`.

uvicorn writes a response's head and its body apart; `CoalescedWrites` sends
what one event-loop step wrote as one TLS record and one `write`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import socket
import ssl
import struct
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from regokite.admission.limits import ConnectionLimits
from regokite.ops import admission_metrics as metrics

log = logging.getLogger("regokite.admission")


class CoalescedWrites:
    """A transport that sends the writes of one event-loop step together, at the end of the step.

    uvicorn writes a response's status line and headers, then its body: two
    TLS records and two `write` calls, and over loopback each `write` also
    runs the receiving side's TCP path on this worker's CPU (10 % of a
    worker's samples under load were in `write`). Joined, a response is one of
    each. Closing sends what is pending first; aborting drops it, as an abort
    drops the transport's own buffer.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if self._pending:
            data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
            self._pending.clear()
            self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # the rest (extra info, reading, protocol) is the transport's
        return getattr(self._transport, name)


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with header and body deadlines, a header size and a request count."""

    def __init__(self, *, limits: ConnectionLimits, on_close: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limits = limits
        self._on_close = on_close
        self._phase = "headers"  # headers, body, busy (deciding, answering) or idle (between requests)
        self._timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._requests = 0
        self._draining = False

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._timer = self.loop.call_later(seconds, self._expire, phase)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self, phase: str) -> None:
        self._timer = None
        self._drop(f"{phase}_timeout")

    def _drop(self, reason: str) -> None:
        metrics.connections_dropped.labels(reason).inc()
        log.debug("connection dropped", extra={"reason": reason, "client": self.client})
        self.transport.abort()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescedWrites(transport, self.loop))  # type: ignore[arg-type]
        self._arm("headers", self.limits.header_timeout)  # the first request, from the end of the handshake

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)
        self._on_close()

    def data_received(self, data: bytes) -> None:
        reading_headers = self._phase in ("headers", "idle")
        if reading_headers:
            self._header_bytes += len(data)
        super().data_received(data)
        if reading_headers and self._phase == "headers" and self._header_bytes > self.limits.max_header_bytes:
            self._drop("headers_too_large")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._phase != "headers":  # a later request on a kept-alive connection
            self._arm("headers", self.limits.header_timeout)

    def on_headers_complete(self) -> None:
        self._header_bytes = 0
        self._arm("body", self.limits.body_timeout)
        size = len(self.url) + sum(len(name) + len(value) for name, value in self.headers)
        if size > self.limits.max_header_bytes:  # all in at once: answered, not dropped
            metrics.connections_dropped.labels("headers_too_large").inc()
            self.app, app = _headers_too_large, self.app
            super().on_headers_complete()
            self.app = app
        else:
            super().on_headers_complete()
        self._requests += 1
        if (self._draining or self._requests >= self.limits.max_requests) and self.cycle is not None:
            self.cycle.keep_alive = False

    def shutdown(self) -> None:
        """The server is stopping (SIGTERM): the review being answered ends the connection (`Connection:
        close`); an idle one stays open until its next review, answered then closed, or its keep-alive
        timeout. uvicorn closes an idle connection at once, which can cross a review the API server is
        sending on it: a POST it does not send again, so an error its failurePolicy turns into a refusal."""
        self._draining = True
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False

    def on_message_complete(self) -> None:
        self._disarm()
        self._phase = "busy"
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._phase = "idle"
        super().on_response_complete()  # arms uvicorn's keep-alive timer


async def _headers_too_large(scope: Any, receive: Any, send: Any) -> None:
    """The ASGI answer to a request whose headers are over the limit (uvicorn answers 503 the same way)."""
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 431, "headers": headers})
    await send({"type": "http.response.body", "body": b"request headers too large"})


async def accept(
    sock: socket.socket,
    tls: Callable[[], ssl.SSLContext],
    protocol: Callable[[Callable[[], None]], GuardedProtocol],
    limits: ConnectionLimits,
) -> None:
    """Accept TLS connections on `sock` while fewer than `limits.max_connections` are open; runs until cancelled.

    `protocol(on_close)` makes the protocol for one connection; it must call
    `on_close` when the connection ends, which frees its place.
    """
    loop = asyncio.get_running_loop()
    room = asyncio.Semaphore(limits.max_connections)
    handshakes: set[asyncio.Task[None]] = set()

    async def start(conn: socket.socket) -> None:
        try:
            await loop.connect_accepted_socket(
                lambda: protocol(room.release),
                conn,
                ssl=tls(),
                ssl_handshake_timeout=limits.handshake_timeout,
                ssl_shutdown_timeout=limits.handshake_timeout,
            )
        except (OSError, TimeoutError) as exc:  # the handshake failed or timed out: the protocol never started
            conn.close()
            room.release()
            reason = "handshake_timeout" if isinstance(exc, TimeoutError | ConnectionAbortedError) else "handshake"
            metrics.connections_dropped.labels(reason).inc()
            log.debug("TLS handshake failed", extra={"error": str(exc) or type(exc).__name__})

    while True:
        await room.acquire()
        try:
            conn, _ = await loop.sock_accept(sock)
        except OSError as exc:  # out of file descriptors, say: wait for some to close
            room.release()
            log.warning("accepting a connection failed", extra={"error": str(exc)})
            await asyncio.sleep(0.1)
            continue
        task = loop.create_task(start(conn))
        handshakes.add(task)
        task.add_done_callback(handshakes.discard)


# classic BPF for the address's SO_REUSEPORT group: `return 1`, the second listener (the newest of two)
NEWEST_LISTENER = struct.pack("HBBI", 0x06, 0, 0, 1)  # BPF_RET | BPF_K
SO_ATTACH_REUSEPORT_CBPF = 51  # Linux's, not in the socket module


def listening(sock: socket.socket) -> bool:
    """Whether a worker of this server already listens on the shared socket (and so answers reviews)."""
    return bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))


def start_listening(sock: socket.socket) -> None:
    """Listen on the supervisor's bound socket, once a worker can answer (again by each worker: the same socket).
    Its SO_REUSEPORT group's BPF program sends every new connection to the newer listener of the address, so a
    server that got SIGTERM receives none it could drop while it finishes the ones it has, and one starting
    receives none before it answers. Alone on the address (or where the kernel has no such program), it gets
    them all. The first worker to listen says the server is serving: a client may connect from then on."""
    first = not listening(sock)
    sock.listen(2048)
    if first:
        host, port = sock.getsockname()[:2]
        log.info("serving admission reviews", extra={"address": f"https://{host}:{port}"})
    if hasattr(socket, "SO_REUSEPORT"):
        program = ctypes.create_string_buffer(NEWEST_LISTENER)
        with contextlib.suppress(OSError):  # not Linux: two servers share new connections by hash
            sock.setsockopt(
                socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, struct.pack("HP", 1, ctypes.addressof(program))
            )


class GuardedServer(uvicorn.Server):
    """uvicorn's server, its connections accepted by `accept` from a socket shared with other workers."""

    def __init__(
        self, config: uvicorn.Config, sock: socket.socket, tls: Callable[[], ssl.SSLContext], limits: ConnectionLimits
    ) -> None:
        super().__init__(config)
        self.sock, self.tls, self.limits = sock, tls, limits
        self.acceptor: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the app and its lifespan, no listener of uvicorn's own

        def protocol(on_close: Callable[[], None]) -> GuardedProtocol:
            return GuardedProtocol(
                limits=self.limits,
                on_close=on_close,
                config=self.config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
            )

        start_listening(self.sock)
        self.acceptor = asyncio.create_task(accept(self.sock, self.tls, protocol, self.limits))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.acceptor is not None:
            self.acceptor.cancel()  # no new connections; uvicorn drains the open ones
        await super().shutdown(sockets=[self.sock])
