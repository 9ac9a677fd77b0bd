"""Hostile slow clients for the admission server: they connect and then barely send.

Each kind holds a connection open in a different phase of a request:

* ``handshake``: a TCP connection that never sends a TLS ClientHello;
* ``idle``: a finished TLS handshake, then nothing;
* ``headers``: a request line, then one header byte every `pace` seconds;
* ``body``: complete headers announcing a body, then one body byte every `pace` seconds.

`hold` opens them and records, per client, how long the server kept the
connection open; used by tests/admission/test_slow_clients.py and
bench/admission_slow_clients.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass

KINDS = ("handshake", "idle", "headers", "body")


@dataclass
class Held:
    kind: str
    opened: bool  # the connection (and, past `handshake`, the TLS handshake) succeeded
    seconds: float | None = None  # from connecting until the server closed it; None if still open at the end
    answer: bytes = b""  # what the server sent before closing, if anything

    @property
    def dropped(self) -> bool:
        return self.seconds is not None


async def _trickle(writer: asyncio.StreamWriter, data: bytes, pace: float) -> None:
    for i in range(len(data)):
        writer.write(data[i : i + 1])
        await writer.drain()
        await asyncio.sleep(pace)


async def slow_client(kind: str, host: str, port: int, ctx: ssl.SSLContext, pace: float, limit: float) -> Held:
    """One client of `kind`; returns when the server drops it or after `limit` seconds."""
    started = time.monotonic()
    try:
        if kind == "handshake":
            reader, writer = await asyncio.open_connection(host, port)
        else:
            reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        return Held(kind, opened=False)
    request_line = b"POST /validate HTTP/1.1\r\nhost: x\r\n"
    sender: asyncio.Task | None = None
    if kind == "headers":
        sender = asyncio.create_task(_trickle(writer, request_line + b"x-slow: " + b"a" * 10_000, pace))
    elif kind == "body":
        writer.write(request_line + b"content-type: application/json\r\ncontent-length: 100000\r\n\r\n")
        sender = asyncio.create_task(_trickle(writer, b"{" + b" " * 99_999, pace))
    answer = b""
    try:
        async with asyncio.timeout(limit):
            while chunk := await reader.read(65536):
                answer += chunk
        seconds: float | None = time.monotonic() - started
    except TimeoutError:
        seconds = None
    except (OSError, ssl.SSLError):
        seconds = time.monotonic() - started
    finally:
        if sender is not None:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError, ssl.SSLError):
                await sender
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
            async with asyncio.timeout(1):
                await writer.wait_closed()
    return Held(kind, opened=True, seconds=seconds, answer=answer[:200])


async def hold(
    url: str, ca: str, counts: dict[str, int], *, pace: float = 0.5, limit: float = 30.0, stagger: float = 0.0
) -> list[Held]:
    """Open `counts[kind]` clients of each kind at once, wait until each is dropped or `limit` passes."""
    host, _, port = url.removeprefix("https://").rpartition(":")
    ctx = ssl.create_default_context(cafile=ca)
    jobs = []
    for kind, count in counts.items():
        for _ in range(count):
            jobs.append(slow_client(kind, host, int(port), ctx, pace, limit))
            if stagger:
                await asyncio.sleep(stagger)
    return list(await asyncio.gather(*jobs))
