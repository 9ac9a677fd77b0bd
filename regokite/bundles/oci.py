"""Bundles pulled from an OCI registry, as OPA's OCI downloader pulls them (download/oci_download.go).

A service of `type: oci` is a registry; a bundle's `resource` is an image
reference (`ghcr.io/org/policy:1.0`, `org/policy@sha256:...`), its host part
ignored for the service's URL as OPA's resolver does. The image manifest is
read (OCI or Docker schema 2), its first layer of media type
`application/vnd.oci.image.layer.v1.tar+gzip` is the bundle, and that layer's
digest is its ETag: the same digest as the active bundle's is "not modified",
without downloading the blob. The blob's SHA-256 must be its digest. Auth is
the service's credentials (bearer token, client certificate), and Docker's
token flow when the registry asks for it (a 401 with a `Bearer` challenge:
a token from its realm, asked with the service's credentials).

Written on the standard library rather than the `oras` package: a pull is
two GETs and a challenge, and OPA's rules (which layer, what the ETag is)
are its own either way.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import urllib.error
import urllib.parse
from typing import Any

from regokite.bundles.config import BundleSource, Service
from regokite.bundles.download import DownloadError, Reply, open_url

BUNDLE_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFESTS = ", ".join(
    (
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def parse_reference(resource: str) -> tuple[str, str]:
    """(repository, tag or digest) of an image reference; the registry host, when written, is dropped."""
    first, _, rest = resource.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        resource = rest
    if "@" in resource:
        repository, _, reference = resource.partition("@")
    else:
        head, _, tail = resource.rpartition(":")
        repository, reference = (head, tail) if head and "/" not in tail else (resource, "latest")
    if not repository:
        raise DownloadError(f"{resource!r} is not an image reference")
    return repository, reference


def fetch_oci(service: Service, source: BundleSource, etag: str | None) -> Reply:
    """One pull: the manifest, then the bundle layer unless its digest is `etag`."""
    repository, reference = parse_reference(source.resource)
    client = _Registry(service, source.name)
    manifest = client.json(f"/v2/{repository}/manifests/{reference}", MANIFESTS)
    layers = manifest.get("layers") if isinstance(manifest, dict) else None
    if not layers:
        raise DownloadError(f"bundle {source.name}: {source.resource}: no layers in manifest")
    layer = next((d for d in layers if isinstance(d, dict) and d.get("mediaType") == BUNDLE_LAYER), None)
    if layer is None:
        raise DownloadError(f"bundle {source.name}: {source.resource}: no tarball descriptor found in the layers")
    digest = str(layer.get("digest", ""))
    algorithm, _, hex_digest = digest.partition(":")
    if algorithm != "sha256" or not hex_digest:
        raise DownloadError(f"bundle {source.name}: {source.resource}: unsupported layer digest {digest!r}")
    if hex_digest == etag:
        return Reply(None, etag)
    blob = client.get(f"/v2/{repository}/blobs/{digest}", "*/*", source.size_limit_bytes)
    if hashlib.sha256(blob).hexdigest() != hex_digest:
        raise DownloadError(f"bundle {source.name}: {source.resource}: the layer does not match its digest {digest}")
    return Reply(blob, hex_digest)


class _Registry:
    """GETs against the registry with the service's credentials, and a token from its realm when it asks."""

    def __init__(self, service: Service, name: str) -> None:
        self.service, self.name = service, name
        self.authorization: str | None = None  # a registry token, once its realm gave one

    def json(self, path: str, accept: str) -> Any:
        body = self.get(path, accept, 4 * 2**20)
        try:
            return json.loads(body)
        except ValueError:
            raise DownloadError(f"bundle {self.name}: {path}: not a JSON manifest") from None

    def get(self, path: str, accept: str, limit: int) -> bytes:
        try:
            return self._get(path, accept, limit)
        except urllib.error.HTTPError as exc:
            challenge = exc.headers.get("WWW-Authenticate", "")
            if exc.code != 401 or not challenge.lower().startswith("bearer "):
                raise self._error(path, exc) from None
        self.authorization = f"Bearer {self._token(challenge)}"
        try:
            return self._get(path, accept, limit)
        except urllib.error.HTTPError as exc:
            raise self._error(path, exc) from None

    def _get(self, path: str, accept: str, limit: int) -> bytes:
        url = self.service.url + path
        try:
            with open_url(self.service, url, {"Accept": accept}, authorization=self.authorization) as response:
                body = response.read(limit + 1)
        except urllib.error.HTTPError:
            raise  # the caller reads its challenge
        except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
            raise DownloadError(f"bundle {self.name}: {url}: {getattr(exc, 'reason', exc)}") from None
        if len(body) > limit:
            raise DownloadError(f"bundle {self.name}: {path}: larger than {limit} bytes")
        return body

    def _token(self, challenge: str) -> str:
        """Docker's token flow: GET realm?service=...&scope=... with the service's own credentials."""
        fields = dict(_CHALLENGE.findall(challenge))
        realm = fields.pop("realm", "")
        if not realm.startswith(("http://", "https://")):
            raise DownloadError(f"bundle {self.name}: the registry's challenge has no realm: {challenge}")
        url = realm + "?" + urllib.parse.urlencode(fields)
        try:
            with open_url(self.service, url) as response:
                answer = json.loads(response.read(2**20))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DownloadError(f"bundle {self.name}: token from {realm}: {getattr(exc, 'reason', exc)}") from None
        token = answer.get("token") or answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str):
            raise DownloadError(f"bundle {self.name}: token from {realm}: no token in the answer")
        return token

    def _error(self, path: str, exc: urllib.error.HTTPError) -> DownloadError:
        return DownloadError(
            f"bundle {self.name}: {self.service.url}{path}: registry replied with HTTP {exc.code}", exc.code
        )
