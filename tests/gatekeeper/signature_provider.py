"""A small external data Provider for tests and benches: HTTPS on loopback, tags images signed or unsigned.

It speaks Gatekeeper's ProviderRequest/ProviderResponse: an image under
`registry.example/signed/` is answered `"signed"`, any other image
`"unsigned"`, and a key holding `error` gets an item error
(`<key>_invalid`, as Gatekeeper's dummy provider). With `dummy`, it answers
as Gatekeeper's test/externaldata/dummy-provider does: `<key>_valid`, an
item error for a key starting `error_`, a system error for one ending
`_systemError`. It records each request's body and the client certificate's
subject, and can require a client certificate signed by a given CA (mTLS),
answer slowly, answer garbage, or answer not idempotent.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from regokite.ops.tls import issue, new_ca, pem
from tests.http_replies import reply
from tests.ports import free_port

SIGNED_PREFIX = "registry.example/signed/"


@dataclass
class SignatureProvider:
    directory: Path
    port: int = 0
    client_ca: Path | None = None  # require a client certificate signed by this CA
    delay: float = 0.0
    garbage: bool = False
    dummy: bool = False
    idempotent: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    client_subjects: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.port = self.port or free_port()
        ca = new_ca("signature provider CA")
        cert, key = issue(ca, ["127.0.0.1", "localhost"])
        self.ca_pem = pem(ca[0])
        (self.directory / "provider.crt").write_bytes(cert)
        (self.directory / "provider.key").write_bytes(key)
        self._server: ThreadingHTTPServer | None = None
        self._open: set[Any] = set()  # kept-alive connections: a stopped provider drops them too

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/validate"

    def provider_yaml(self, name: str = "image-signatures", timeout: int = 2) -> str:
        ca = base64.b64encode(self.ca_pem).decode()
        return (
            "apiVersion: externaldata.gatekeeper.sh/v1beta1\nkind: Provider\n"
            f"metadata:\n  name: {name}\nspec:\n  url: {self.url}\n  timeout: {timeout}\n  caBundle: {ca}\n"
        )

    def answer(self, keys: list[str]) -> dict[str, Any]:
        if self.dummy:
            return self.dummy_answer(keys)
        items = []
        for key in keys:
            if "error" in key:
                items.append({"key": key, "error": f"{key}_invalid"})
            else:
                items.append({"key": key, "value": "signed" if key.startswith(SIGNED_PREFIX) else "unsigned"})
        return {
            "apiVersion": "externaldata.gatekeeper.sh/v1beta1",
            "kind": "ProviderResponse",
            "response": {"idempotent": True, "items": items},
        }

    def dummy_answer(self, keys: list[str]) -> dict[str, Any]:
        """Gatekeeper's dummy provider's answer."""
        items: list[dict[str, Any]] = []
        response: dict[str, Any] = {"idempotent": self.idempotent}
        for key in keys:
            if key.endswith("_systemError"):
                response["systemError"] = "testing system error"
                break
            if key.startswith("error_"):
                items.append({"key": key, "error": f"{key}_invalid"})
            elif not key.endswith("_valid"):
                items.append({"key": key, "value": f"{key}_valid"})
        else:
            response["items"] = items
        return {"apiVersion": "externaldata.gatekeeper.sh/v1beta1", "kind": "ProviderResponse", "response": response}

    def start(self) -> SignatureProvider:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.directory / "provider.crt", self.directory / "provider.key")
        if self.client_ca is not None:
            context.load_verify_locations(self.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body are two writes: without it, Nagle waits for the client's delayed ACK
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                provider._open.add(self.connection)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                provider.requests.append(body)
                peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
                if peer:
                    provider.client_subjects.append(dict(x[0] for x in peer["subject"]).get("commonName", ""))
                time.sleep(provider.delay)
                data = (
                    b"not json" if provider.garbage else json.dumps(provider.answer(body["request"]["keys"])).encode()
                )
                reply(self, 200, data)

            def log_message(self, *args: object) -> None:
                pass

        server = _QuietServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for connection in list(self._open):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._open.clear()

    @contextmanager
    def running(self) -> Iterator[SignatureProvider]:
        self.start()
        try:
            yield self
        finally:
            self.stop()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out and left (the timeout tests) is expected: no traceback."""


FIXTURE = Path(__file__).parent / "fixtures" / "external_data"
TEMPLATE = (FIXTURE / "template.yaml").read_text()  # K8sSignedImages: each image checked through the provider
CONSTRAINT = (FIXTURE / "constraint.yaml").read_text()  # on every Pod
