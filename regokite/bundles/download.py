"""One request to a bundle service, as OPA's downloader makes it (download/download.go).

`GET <service url>/<resource>` with the service's headers and credentials
(bearer token, client certificate), its CA, `If-None-Match` with the last
ETag (304: not modified) and `Prefer: modes=snapshot` (regokite takes no
delta bundles). A server that answers with the content type
`application/vnd.openpolicyagent.bundles` holds long polls: the requests
after it add `wait=<long_polling_timeout_seconds>`, and a 304 keeps that
state. The delays between requests are OPA's: after a success a uniform draw
between min_delay_seconds and max_delay_seconds (none when long polling),
after a failure OPA's DefaultBackoff from 100 ms (factor 1.6, jitter 0.2)
capped at max_delay_seconds.
"""

from __future__ import annotations

import random
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from regokite.bundles.config import BundleSource, Service
from regokite.errors import RegokiteError

LONG_POLL_CONTENT_TYPE = "application/vnd.openpolicyagent.bundles"
MIN_RETRY_DELAY = 0.1  # OPA's minRetryDelay
_CHUNK = 1 << 16


class DownloadError(RegokiteError):
    """The service did not give a bundle: unreachable, refused, or an HTTP error (`code` set then)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Reply:
    """A bundle (`blob`, with its `etag`), or `blob` None: not modified since `etag`."""

    blob: bytes | None
    etag: str | None
    long_polling: bool = False  # the server holds long polls


def tls_context(service: Service) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=service.ca_cert)
    if service.allow_insecure_tls:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if service.client_tls is not None:
        tls = service.client_tls
        context.load_cert_chain(tls.cert, tls.private_key, password=tls.private_key_passphrase)
    return context


def open_url(
    service: Service,
    url: str,
    headers: Mapping[str, str] | None = None,
    *,
    data: bytes | None = None,
    authorization: str | None = None,
    timeout: float | None = None,
) -> Any:
    """urlopen with the service's headers, its credentials (its bearer token unless `authorization`), its CA and
    client certificate; a POST when there is `data`."""
    sent = {**service.headers, **(headers or {})}
    authorization = authorization or service.authorization()
    if authorization:
        sent["Authorization"] = authorization
    request = urllib.request.Request(url, data, sent, method="POST" if data is not None else "GET")
    context = tls_context(service) if url.startswith("https://") else None
    return urllib.request.urlopen(request, timeout=timeout or service.response_header_timeout_seconds, context=context)


def fetch(service: Service, source: BundleSource, etag: str | None, *, long_poll: bool = False) -> Reply:
    """One GET of the bundle; `long_poll`: ask the server to hold the request (Prefer: wait)."""
    url = f"{service.url}/{source.resource.lstrip('/')}"
    headers = {"Prefer": "modes=snapshot"}
    if etag:
        headers["If-None-Match"] = etag
    timeout = service.response_header_timeout_seconds
    wait = source.polling.long_polling_timeout_seconds
    if long_poll and wait:
        headers["Prefer"] += f";wait={wait}"
        timeout += wait
    try:
        with open_url(service, url, headers, timeout=timeout) as response:
            blob = _read_limited(response, source.size_limit_bytes, source.name)
            holds = response.headers.get("Content-Type", "") == LONG_POLL_CONTENT_TYPE
            return Reply(blob, response.headers.get("ETag"), holds)
    except urllib.error.HTTPError as exc:
        if exc.code == 304:  # no content type on a 304 (RFC 7232): the long-polling state stays
            return Reply(None, exc.headers.get("ETag") or etag, long_poll)
        try:
            said = HTTPStatus(exc.code).phrase  # OPA's http.StatusText
        except ValueError:
            said = f"HTTP {exc.code}"
        raise DownloadError(f"bundle {source.name}: {url}: server replied with {said}", exc.code) from None
    except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DownloadError(f"bundle {source.name}: {url}: {reason}") from None


def _read_limited(response: object, limit: int, name: str) -> bytes:
    """The body, refused past the bundle's size_limit_bytes (a compressed bundle is no larger than that)."""
    chunks, total = [], 0
    while chunk := response.read(_CHUNK):  # type: ignore[attr-defined]
        total += len(chunk)
        if total > limit:
            raise DownloadError(f"bundle {name}: larger than size_limit_bytes ({limit})")
        chunks.append(chunk)
    return b"".join(chunks)


def next_delay(source: BundleSource, failures: int, long_polling: bool, rng: random.Random | None = None) -> float:
    """Seconds to the next request: OPA's jittered delay after a success (0 when the server long-polls),
    its backoff after `failures` failures in a row."""
    rng = rng or random.Random()
    low, high = source.polling.min_delay_seconds, source.polling.max_delay_seconds
    if failures:
        backoff = min(float(high), MIN_RETRY_DELAY * 1.6 ** (failures - 1))
        return min(float(high), backoff * rng.uniform(0.8, 1.2))
    if long_polling and source.polling.long_polling_timeout_seconds:
        return 0.0
    return low + rng.random() * (high - low)
