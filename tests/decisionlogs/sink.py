"""A decision log service for tests and bench.admission_load: an HTTP server on a free port recording the
gzip'd batches POSTed to it."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink:
    """A decision log service: records each POST's (headers, gzip'd body); answers `failures` 500s first."""

    def __init__(self, failures: int = 0) -> None:
        self.batches: list[tuple[dict[str, str], bytes]] = []
        self.failures = failures
        self.attempts = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                sink.attempts += 1
                if sink.failures:
                    sink.failures -= 1
                    self.send_response(500)
                else:
                    sink.batches.append((dict(self.headers), body))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[dict]:
        return [e for _, body in self.batches for e in json.loads(gzip.decompress(body))]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
