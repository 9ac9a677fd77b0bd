"""A bundle service for the tests: HTTPS with a CA of its own, bundles at `/bundles/<name>` with ETags
(304 on If-None-Match), an optional bearer token and client certificate, long polling (`Prefer: ...;wait=N`
held until the bundle changes, answered with OPA's long-polling content type), and `POST /status`
recorded. It is an OCI registry too (`push`: `/v2/<repository>/manifests/<tag>` and `/blobs/<digest>`),
with Docker's token flow when `registry_token` is set (a 401 challenge naming `/token`)."""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from regokite.bundles.download import LONG_POLL_CONTENT_TYPE
from regokite.ops import tls


class BundleService:
    def __init__(
        self,
        directory: Path,
        *,
        token: str | None = None,
        client_ca: bool = False,
        long_polling: bool = False,
        registry_token: str | None = None,
    ) -> None:
        self.directory, self.token, self.long_polling, self.registry_token = (
            directory,
            token,
            long_polling,
            registry_token,
        )
        self.images: dict[str, bytes] = {}  # "<repository>:<tag>" -> manifest
        self.blobs: dict[str, bytes] = {}  # "sha256:<hex>" -> blob
        self.ca = tls.new_ca("bundle service CA")
        cert, key = tls.issue(self.ca, ["127.0.0.1", "localhost"])
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "server.crt").write_bytes(cert)
        (directory / "server.key").write_bytes(key)
        self.ca_file = directory / "ca.crt"
        self.ca_file.write_bytes(tls.pem(self.ca[0]))
        self.bundles: dict[str, bytes] = {}
        self.codes: list[tuple[str, int]] = []  # (path, status) of every answer
        self.statuses: list[dict[str, Any]] = []
        self.changed = threading.Condition()
        context = tls.server_context(directory / "server.crt", directory / "server.key")
        if client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(self.ca_file)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def client_files(self) -> tuple[Path, Path]:
        """A client certificate this service's CA signed."""
        cert, key = tls.issue(self.ca, ["client"])
        (self.directory / "client.crt").write_bytes(cert)
        (self.directory / "client.key").write_bytes(key)
        return self.directory / "client.crt", self.directory / "client.key"

    def put(self, name: str, blob: bytes) -> None:
        with self.changed:
            self.bundles[name] = blob
            self.changed.notify_all()

    def push(self, repository: str, tag: str, bundle: bytes) -> str:
        """An image as `opa build` + `oras push` make it: a config and the bundle as a tar+gzip layer."""
        config = b"{}"
        layer, config_digest = (f"sha256:{hashlib.sha256(b).hexdigest()}" for b in (bundle, config))
        self.blobs.update({layer: bundle, config_digest: config})
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": 2},
            "layers": [
                {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": len(bundle)}
            ],
        }
        self.images[f"{repository}:{tag}"] = json.dumps(manifest).encode()
        return layer

    def answered(self, code: int) -> int:
        """Bundle requests answered with `code`."""
        return sum(1 for path, c in list(self.codes) if c == code and path.startswith("/bundles/"))

    def __enter__(self) -> BundleService:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.changed:
            self.changed.notify_all()


def _etag(blob: bytes) -> str:
    return f'"{hashlib.sha256(blob).hexdigest()[:16]}"'


def _handler(service: BundleService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def _reply(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            service.codes.append((self.path, code))

        def _authorized(self) -> bool:
            if service.token is None or self.headers.get("Authorization") == f"Bearer {service.token}":
                return True
            self._reply(401, b'{"code": "unauthorized"}')
            return False

        def _registry(self) -> None:
            repository, kind, reference = re.fullmatch(r"/v2/(.+)/(manifests|blobs)/(.+)", self.path).groups()
            if service.registry_token and self.headers.get("Authorization") != f"Bearer {service.registry_token}":
                realm = f'Bearer realm="{service.url}/token",service="test",scope="repository:{repository}:pull"'
                self._reply(401, b"{}", {"WWW-Authenticate": realm})
                return
            found = (
                service.images.get(f"{repository}:{reference}") if kind == "manifests" else service.blobs.get(reference)
            )
            if found is None:
                self._reply(404, b"{}")
            else:
                self._reply(200, found, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"})

        def do_GET(self) -> None:
            if self.path.startswith("/token?"):
                if self._authorized():
                    self._reply(200, json.dumps({"token": service.registry_token}).encode())
                return
            if self.path.startswith("/v2/"):
                if service.registry_token or self._authorized():
                    self._registry()
                return
            if not self._authorized():
                return
            name = self.path.removeprefix("/bundles/")
            wait = re.search(r"(?:^|;)\s*wait=(\d+)", self.headers.get("Prefer", ""))
            known = self.headers.get("If-None-Match")
            with service.changed:
                if service.long_polling and wait and known:
                    service.changed.wait_for(
                        lambda: name in service.bundles and _etag(service.bundles[name]) != known, int(wait.group(1))
                    )
                blob = service.bundles.get(name)
            kind = {"Content-Type": LONG_POLL_CONTENT_TYPE} if service.long_polling else {}
            if blob is None:
                self._reply(404, b"{}")
            elif known == _etag(blob):
                self._reply(304, b"", {"ETag": known})  # no Content-Type on a 304
            else:
                self._reply(200, blob, {"ETag": _etag(blob), **(kind or {"Content-Type": "application/gzip"})})

        def do_POST(self) -> None:
            if not self._authorized():
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/status":
                service.statuses.append(json.loads(body))
            self._reply(200)

    return Handler
