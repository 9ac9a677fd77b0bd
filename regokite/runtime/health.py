"""The controller's health and metrics endpoint: /healthz (liveness), /readyz (readiness), /metrics.

Separate from the manager that answers the questions: this module only serves
the answers over HTTP (200 when healthy or ready, 503 otherwise, the detail as JSON).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from regokite.ops.metrics import exposition

log = logging.getLogger("regokite.controller")
Detail = Callable[[], dict[str, Any]]


def serve_health(port: int, host: str, liveness: Detail, readiness: Detail) -> ThreadingHTTPServer:
    """Serve on a daemon thread; `liveness()["healthy"]` and `readiness()["ready"]` decide the status codes.
    Port 0 picks a free one: read it from the server's `server_address`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                body, ctype = exposition()
                self._reply(200, body, ctype)
            elif self.path == "/healthz":
                live = liveness()
                self._reply(200 if live["healthy"] else 503, _json(live), "application/json")
            elif self.path == "/readyz":
                detail = readiness()
                self._reply(200 if detail["ready"] else 503, _json(detail), "application/json")
            else:
                self._reply(404, b"not found\n")

        def _reply(self, status: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    log.info("serving metrics and health", extra={"port": server.server_address[1]})
    return server


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=1).encode() + b"\n"
