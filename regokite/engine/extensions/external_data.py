"""Gatekeeper's `external_data` builtin: keys sent to a Provider over HTTPS, answers cached.

The contract is Gatekeeper's (its docs' External Data page and the frameworks
driver): `external_data({"provider": NAME, "keys": [...]})` POSTs a
`ProviderRequest` (`externaldata.gatekeeper.sh/v1beta1`) with the keys not
found in the response cache to the Provider's `url`, verifying the server
with its `caBundle` (HTTPS only, TLS 1.3 at least) and presenting the
admission server's own certificate as the client certificate (mTLS), and
answers `{"responses": [[key, value]...], "errors": [[key, error]...],
"status_code": N, "system_error": "..."}`. Every item a provider answered is
cached per (provider, key) for the TTL (3 minutes by default; 0 disables).

A failure (unknown provider, refused connection, timeout, a body that is not
a ProviderResponse) is no evaluation error: it is an answer whose
`system_error` says what went wrong, which the template tests, as in
Gatekeeper. Where Gatekeeper leaves `responses` and `errors` null in such an
answer, they are empty arrays here: `count(null)` is undefined in
Gatekeeper's OPA but an error in regorus, so `[]` keeps every template that
counts or iterates them on Gatekeeper's path.

Each call gets the Provider's `timeout` (seconds), cut to what is left of the
admission request's deadline (`call_deadline`), as Gatekeeper's mutation path
documents; with neither, DEFAULT_TIMEOUT.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from regokite.engine.extensions.common import BuiltinError, object_operand, type_name

NAME = "external_data"
MUTATION_NAME = "__regokite_mutation_external_data"  # the mutators' call (Gatekeeper's mutation system)
API_VERSION = "externaldata.gatekeeper.sh/v1beta1"
DEFAULT_TIMEOUT = 3.0  # with no Provider timeout and no request deadline (audit, check)
DEFAULT_CACHE_TTL = 180.0  # Gatekeeper's --external-data-provider-response-cache-ttl default
_MAX_BODY = 8 * 1024 * 1024

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("external_data_deadline", default=None)


@contextlib.contextmanager
def call_deadline(deadline: float | None) -> Iterator[None]:
    """Calls made inside end by `deadline` (a time.monotonic() instant): the webhook's budget."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


class ProviderError(ValueError):
    """A Provider that Gatekeeper would not accept into its cache."""


@dataclass(frozen=True)
class Provider:
    """A `Provider` (externaldata.gatekeeper.sh): where its keys go and how the server is trusted."""

    name: str
    url: str
    timeout: int  # seconds; 0: only the request's deadline (or DEFAULT_TIMEOUT) bounds a call
    ca_bundle: bytes  # PEM, decoded from spec.caBundle's base64

    @classmethod
    def from_spec(cls, name: Any, spec: Any) -> Provider:
        """Gatekeeper's checks: a name, an https URL, a non-negative timeout, a caBundle that parses."""
        if not isinstance(name, str) or not name:
            raise ProviderError("provider name can not be empty")
        if not isinstance(spec, dict):
            raise ProviderError("spec must be an object")
        url, timeout, ca = spec.get("url"), spec.get("timeout", 0), spec.get("caBundle")
        if not isinstance(url, str) or not url:
            raise ProviderError(f"invalid provider url. value: {url!r}")
        if urlsplit(url).scheme != "https":
            raise ProviderError("only HTTPS scheme is supported for Providers")
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
            raise ProviderError(f"provider timeout should be a positive integer. value: {timeout!r}")
        if not isinstance(ca, str) or not ca:
            raise ProviderError("caBundle should be set for HTTPS scheme")
        try:
            pem = base64.b64decode(ca, validate=True)
            ssl.create_default_context(cadata=pem.decode("ascii"))
        except (binascii.Error, ValueError, ssl.SSLError) as exc:
            raise ProviderError(f"failed to parse caBundle: {exc}") from None
        return cls(name, url, timeout, pem)


@dataclass(frozen=True)
class _Cached:
    received: float
    value: Any
    error: str


class ExternalData:
    """The builtin for one process: the Providers served now, the response cache and the client certificate.

    The Providers are replaced whole when a policy set loads; engines and
    their clones share this object, and with it the cache (as Gatekeeper's
    is per pod).
    """

    def __init__(self, *, cache_ttl: float = DEFAULT_CACHE_TTL, client_cert: tuple[str, str] | None = None) -> None:
        self.cache_ttl = cache_ttl
        self._client_cert = client_cert
        self._providers: dict[str, Provider] = {}
        self._cache: dict[tuple[str, str], _Cached] = {}
        self._contexts: dict[tuple[Provider, float], ssl.SSLContext] = {}
        self._lock = threading.Lock()
        self._connections = threading.local()

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process starts from (its settings and Providers): locks, connections and the
        cache are per process."""
        return {"cache_ttl": self.cache_ttl, "client_cert": self._client_cert, "providers": self.providers}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(cache_ttl=state["cache_ttl"], client_cert=state["client_cert"])  # type: ignore[misc]
        self._providers = dict(state["providers"])

    def set_providers(self, providers: Sequence[Provider]) -> None:
        with self._lock:
            self._providers = {p.name: p for p in providers}

    @property
    def providers(self) -> dict[str, Provider]:
        with self._lock:
            return dict(self._providers)

    def __call__(self, request: Any) -> dict[str, Any]:
        name, keys = _operand(request)
        items, missing = self._from_cache(name, keys)
        status, system_error = 0, ""
        if missing:
            with self._lock:
                provider = self._providers.get(name)
            if provider is None:
                return _answer([], 400, f"provider {name!r} is not found in provider cache")
            try:
                status, answered, system_error = self._ask(provider, missing)
            except _CallFailed as exc:
                return _answer([], exc.status, str(exc))
            self._remember(name, answered)
            items += answered
        return _answer(items, status, system_error)

    def for_mutation(self, request: Any) -> dict[str, Any]:
        """Gatekeeper's mutation system's call: the keys sent as they are (its mutation path keeps no
        response cache), the answer `{"items": {key: {"value", "error"}}}` or `{"error"}` for the
        provider as a whole, in its words (unknown, unreachable, a system error, not idempotent)."""
        name, keys = _operand(request)
        with self._lock:
            provider = self._providers.get(name)
        if provider is None:  # Gatekeeper logs it, then finds no answer of it
            return {"error": f"failed to find external data provider {name} in responses"}
        try:
            _, raw = self._post_request(provider, keys)
            parsed = _parsed(raw)
            items, system_error = _items(parsed)
        except _CallFailed as exc:
            return {"error": f"failed to send external data request to provider {name}: {exc}"}
        if system_error.strip():
            why = f"non-empty system error: {system_error.strip()}"
        elif (parsed.get("response") or {}).get("idempotent") is not True:
            why = "non-idempotent response"
        else:
            return {"items": {key: {"value": value, "error": error} for key, value, error in items}}
        return {"error": f"failed to validate external data response from provider {name}: {why}"}

    def _from_cache(self, name: str, keys: list[str]) -> tuple[list[tuple[str, Any, str]], list[str]]:
        items: list[tuple[str, Any, str]] = []
        missing: list[str] = []
        now = time.monotonic()
        with self._lock:
            for key in keys:
                hit = self._cache.get((name, key)) if self.cache_ttl > 0 else None
                if hit is None or now - hit.received > self.cache_ttl:
                    missing.append(key)
                else:
                    items.append((key, hit.value, hit.error))
        return items, missing

    def _remember(self, name: str, items: list[tuple[str, Any, str]]) -> None:
        if self.cache_ttl <= 0:
            return
        now = time.monotonic()
        with self._lock:
            if len(self._cache) > 100_000:  # expired entries go once the cache is large
                self._cache = {k: v for k, v in self._cache.items() if now - v.received <= self.cache_ttl}
            for key, value, error in items:
                self._cache[(name, key)] = _Cached(now, value, error)

    def _ask(self, provider: Provider, keys: list[str]) -> tuple[int, list[tuple[str, Any, str]], str]:
        status, raw = self._post_request(provider, keys)
        return (status, *_items(_parsed(raw)))

    def _post_request(self, provider: Provider, keys: list[str]) -> tuple[int, bytes]:
        body = json.dumps({"apiVersion": API_VERSION, "kind": "ProviderRequest", "request": {"keys": keys}})
        return self._post(provider, body.encode(), _timeout(provider))

    def _post(self, provider: Provider, body: bytes, timeout: float) -> tuple[int, bytes]:
        if timeout <= 0:
            raise _CallFailed(500, "failed to send external data request: the admission deadline has passed")
        parts = urlsplit(provider.url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Type": "application/json"}
        for attempt in (0, 1):  # a kept-alive connection the provider closed is retried once, fresh
            connection, reused = self._connection(provider, timeout)
            try:
                if connection.sock is not None:  # a kept-alive connection: this call's own timeout
                    connection.sock.settimeout(timeout)
                connection.request("POST", path, body=body, headers=headers)
                reply = connection.getresponse()
                data = reply.read(_MAX_BODY + 1)
            except (OSError, http.client.HTTPException) as exc:
                self._drop(provider)
                if reused and attempt == 0 and not isinstance(exc, TimeoutError):
                    continue
                raise _CallFailed(500, f"failed to send external data request: {exc}") from None
            if reply.will_close:
                self._drop(provider)
            if len(data) > _MAX_BODY:
                self._drop(provider)
                raise _CallFailed(500, "failed to read external data response: larger than 8 MiB")
            return reply.status, data
        raise AssertionError("unreachable")

    def _connection(self, provider: Provider, timeout: float) -> tuple[http.client.HTTPSConnection, bool]:
        """This thread's kept-alive connection to the provider (regorus pins an engine to a thread)."""
        table: dict[str, tuple[Provider, http.client.HTTPSConnection]] = self._connections.__dict__.setdefault(
            "table", {}
        )
        entry = table.get(provider.name)
        if entry is not None and entry[0] == provider and entry[1].sock is not None:
            return entry[1], True
        parts = urlsplit(provider.url)
        try:
            context = self._context(provider)
        except (OSError, ssl.SSLError) as exc:
            raise _CallFailed(400, f"failed to load the client certificate: {exc}") from None
        host, port = parts.hostname or "", parts.port or 443
        connection = _Connection(host, port, timeout=timeout, context=context)
        table[provider.name] = (provider, connection)
        return connection, False

    def _drop(self, provider: Provider) -> None:
        table = getattr(self._connections, "table", {})
        entry = table.pop(provider.name, None)
        if entry is not None:
            entry[1].close()

    def _context(self, provider: Provider) -> ssl.SSLContext:
        """TLS 1.3, the provider's CA, and the client certificate as its files are now (rotation)."""
        stamp = _mtime(self._client_cert)
        with self._lock:
            context = self._contexts.get((provider, stamp))
        if context is not None:
            return context
        context = ssl.create_default_context(cadata=provider.ca_bundle.decode("ascii"))
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        if self._client_cert is not None:
            context.load_cert_chain(*self._client_cert)
        with self._lock:
            self._contexts = {k: v for k, v in self._contexts.items() if k[0].name != provider.name}
            self._contexts[(provider, stamp)] = context
        return context


class _Connection(http.client.HTTPSConnection):
    """No Nagle delay on small requests (Go's HTTP client, Gatekeeper's, sets TCP_NODELAY too)."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _CallFailed(Exception):
    """The call could not be made or understood: a `system_error` answer with this status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _operand(request: Any) -> tuple[str, list[str]]:
    request = object_operand(NAME, request, 1)
    name, keys = request.get("provider", ""), request.get("keys", [])
    if not isinstance(name, str):
        raise BuiltinError(f"{NAME}: provider must be a string but got {type_name(name)}")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise BuiltinError(f"{NAME}: keys must be an array of strings")
    return name, keys


def _timeout(provider: Provider) -> float:
    limit = float(provider.timeout) if provider.timeout > 0 else None
    deadline = _deadline.get()
    if deadline is not None:
        left = deadline - time.monotonic()
        return min(limit, left) if limit is not None else left
    return limit if limit is not None else DEFAULT_TIMEOUT


def _parsed(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise _CallFailed(500, f"failed to unmarshal external data response: {exc}") from None


def _items(parsed: Any) -> tuple[list[tuple[str, Any, str]], str]:
    """A ProviderResponse's items and systemError, read as Go's encoding/json would (absent fields empty)."""
    response = parsed.get("response") if isinstance(parsed, dict) else None
    if not isinstance(parsed, dict) or not isinstance(response, dict | None):
        raise _CallFailed(500, "failed to unmarshal external data response: not a ProviderResponse object")
    response = response or {}
    items, system_error = response.get("items") or [], response.get("systemError") or ""
    if not isinstance(items, list) or not isinstance(system_error, str):
        raise _CallFailed(500, "failed to unmarshal external data response: items must be an array")
    found = []
    for item in items:
        key, error = (item.get("key") or "", item.get("error") or "") if isinstance(item, dict) else (None, None)
        if not isinstance(key, str) or not isinstance(error, str):
            raise _CallFailed(500, "failed to unmarshal external data response: an item's key and error are strings")
        found.append((key, item.get("value"), error))
    return found, system_error


def _answer(items: list[tuple[str, Any, str]], status: int, system_error: str) -> dict[str, Any]:
    return {
        "responses": [[key, value] for key, value, error in items if not error],
        "errors": [[key, error] for key, _, error in items if error],
        "status_code": status,
        "system_error": system_error,
    }


def _mtime(files: tuple[str, str] | None) -> float:
    if files is None:
        return 0.0
    try:
        return max(Path(f).stat().st_mtime for f in files)
    except OSError:
        return 0.0
