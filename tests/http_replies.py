"""A reply from a test's `http.server` handler (stand-ins for webhooks, providers, API servers), written
one way: status, headers, the body's length, the body."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def reply(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> None:
    handler.send_response(status)
    for name, value in {**(headers or {}), "Content-Type": content_type}.items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
