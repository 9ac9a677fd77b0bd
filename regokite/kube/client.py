"""A small REST client over the `kubernetes` package's auth and TLS, speaking plain dicts.

The generated model classes are slow to build for every watched object and
lossy for custom resources, so everything here is raw JSON in and out
(regokite.jsoncodec). Requests whose answer is read whole go over
kube.connections' kept-alive connections, watches over urllib3's pool.

An API server that is starting or overloaded answers 503 or 429 with
`Retry-After`: as client-go does, the request is sent again after the time it
asks (each wait at most RETRY_AFTER_MAX_WAIT, at most RETRY_AFTER_BUDGET in
all, then the answer is the caller's error and its backoff), counted in
`regokite_api_retry_after_total`, logged once per outage (regokite.ops.outage).
urllib3's own Retry-After handling (unbounded, silent, GETs only) is off.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import math
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urljoin

import urllib3
from kubernetes import client, config

from regokite import jsoncodec
from regokite.errors import RegokiteError
from regokite.kube.connections import Connections
from regokite.ops import api_metrics
from regokite.ops.outage import Outage

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
CREDENTIALS_CHECK_SECONDS = 1.0  # how often the credentials' expiry is checked
RETRY_AFTER_MAX_WAIT = 10.0  # seconds one wait for Retry-After may last, whatever the server asks
RETRY_AFTER_BUDGET = 30.0  # seconds of such waits per request before the answer is the caller's
RETRY_AFTER_ATTEMPTS = 10  # client-go's maxRetries
log = logging.getLogger("regokite.kube")


class ApiError(RegokiteError):
    """A non-2xx answer: `status` is the HTTP code, `body` the server's Status object."""

    def __init__(self, status: int, reason: str, body: Any, what: str) -> None:
        self.status = status
        self.reason = reason
        self.body = body
        message = body.get("message") if isinstance(body, dict) else (str(body)[:300] if body else reason)
        super().__init__(f"{what}: {status} {message}")


class NotLeader(ApiError):
    """A write refused by the write guard: this replica does not hold the leader Lease, or its shard
    membership Lease, or could not renew it in time."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(0, "NotLeader", {"message": "not the leader: write refused"}, f"{method} {path}")


_STATUS_REASONS = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    410: "gone",
    422: "invalid",
    429: "too_many_requests",
    503: "unavailable",
    504: "timeout",
}
ERROR_REASONS = (*_STATUS_REASONS.values(), "not_leader", "client_error", "server_error", "connection", "other")
OUTAGE_REASONS = frozenset({"connection", "timeout", "unavailable", "server_error"})  # the server, not the request
# a request that got no answer (refused, reset, timed out): the API server or the way to it is away
# (not every OSError: a local PermissionError or FileNotFoundError is a bug to show with its traceback)
UNANSWERED = (ConnectionError, TimeoutError, ssl.SSLError, urllib3.exceptions.HTTPError)


def error_reason(exc: BaseException) -> str:
    """A request's failure as one of ERROR_REASONS: a metric label that never carries a message, a host
    or a port (urllib3's `reason` is an exception naming both)."""
    if isinstance(exc, NotLeader):
        return "not_leader"
    if isinstance(exc, ApiError):
        return _STATUS_REASONS.get(exc.status) or ("server_error" if exc.status >= 500 else "client_error")
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        exc = exc.reason
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # a ConnectTimeoutError by inheritance only
        return "connection"
    if isinstance(exc, TimeoutError | urllib3.exceptions.TimeoutError):
        return "timeout"
    if isinstance(exc, UNANSWERED):
        return "connection"
    return "other"


def throttled_refresh(seconds: float, refresh: Callable[[Any], None]) -> Callable[[Any], None]:
    """`refresh` (a Configuration's credentials hook) run at most once per `seconds`.

    The kubernetes package calls the hook before every request, and a
    kubeconfig's re-applies the whole configuration each time (0.15 ms of CPU
    per request here, about a tenth of a controller's CPU under load); tokens
    it renews expire minutes apart. The hook installs itself again when it
    runs, so the throttle puts itself back in front of it.
    """
    last = -math.inf

    def throttled(configuration: Any) -> None:
        nonlocal last, refresh
        now = time.monotonic()
        if now - last < seconds:
            return
        last = now
        refresh(configuration)
        if configuration.refresh_api_key_hook is not throttled:
            refresh, configuration.refresh_api_key_hook = configuration.refresh_api_key_hook, throttled

    return throttled


class KubeClient:
    """Thread-safe: one connection pool shared by workers and informers."""

    def __init__(self, kubeconfig: str | os.PathLike[str] | None = None, *, pool_size: int = 64) -> None:
        cfg = client.Configuration()
        path = kubeconfig or os.environ.get("KUBECONFIG")
        try:
            if path:
                config.load_kube_config(config_file=str(Path(path).expanduser()), client_configuration=cfg)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=cfg)
            else:
                config.load_kube_config(client_configuration=cfg)
        except (config.ConfigException, OSError) as exc:
            raise RegokiteError(f"cannot load Kubernetes credentials: {exc}") from None
        cfg.connection_pool_maxsize = pool_size
        # urllib3's default retries (3, for connection errors), without its Retry-After handling: ours is bounded
        cfg.retries = urllib3.Retry(3, respect_retry_after_header=False)
        if cfg.refresh_api_key_hook is not None:
            cfg.refresh_api_key_hook = throttled_refresh(CREDENTIALS_CHECK_SECONDS, cfg.refresh_api_key_hook)
        self.api = client.ApiClient(cfg)
        self.host = cfg.host
        self._prefix = urllib3.util.parse_url(cfg.host).path or ""  # a host behind a path (a proxy's)
        self._pool: urllib3.HTTPConnectionPool | None = None  # the API server's, once known (see _send)
        # every request but a watch, where they are the same as urllib3's (kube.connections)
        manager = self.api.rest_client.pool_manager
        usable = Connections.usable(cfg, manager)
        self._connections = Connections(cfg.host, cfg, pool_size) if usable else None
        # called before every write (method, path); raises to refuse it (leader election)
        self.write_guard: Callable[[str, str], None] | None = None
        self._closed = threading.Event()  # ends Retry-After waits
        self._throttled = Outage(log, "API requests (answered Retry-After: the server is starting or overloaded)")
        self._throttled_lock = threading.Lock()

    def close(self) -> None:
        self._closed.set()
        if self._connections is not None:
            self._connections.close()
        self.api.close()

    def _answered(self, send: Callable[[], Any], what: str) -> Any:
        """`send()`'s response, sent again while the server answers Retry-After (bounded, see above)."""
        waited = 0.0
        for attempt in range(RETRY_AFTER_ATTEMPTS + 1):
            resp = send()
            delay = retry_after(resp.status, resp.headers.get("Retry-After"))
            if delay is None:
                if attempt == 0 and self._throttled.since is not None:  # answered at once: the outage is over
                    with self._throttled_lock:
                        self._throttled.recovered()
                return resp
            status = str(resp.status)
            if attempt == RETRY_AFTER_ATTEMPTS or waited + delay > RETRY_AFTER_BUDGET or self._closed.is_set():
                api_metrics.retry_after.labels(status, "gave_up").inc()
                return resp
            resp.read()  # the connection goes back to the pool
            api_metrics.retry_after.labels(status, "waited").inc()
            api_metrics.retry_after_seconds.inc(delay)
            with self._throttled_lock:
                self._throttled.failed(
                    RuntimeError(f"{what}: {resp.status}"), status, retry_after_seconds=round(delay, 3)
                )
            self._closed.wait(delay)
            waited += delay
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = 30,
    ) -> Any:
        """One request straight through the client's configured connection pool (its TLS, proxy and
        retries) with the configuration's credentials: the generated client's own request path
        (sanitising, parameter tuples, content-type dispatch) cost a third of a controller's CPU."""
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        target = path + ("?" + urlencode(params) if params else "")
        url = self.host + target
        headers = {**self.api.default_headers, "Accept": "application/json", "Content-Type": content_type}
        for auth in self.api.configuration.auth_settings().values():  # renews expiring credentials first
            headers[auth["key"]] = auth["value"]
        if body is not None and not isinstance(body, str | bytes):
            body = jsoncodec.dumps(body)
        if self._connections is not None and isinstance(timeout, float | int):  # an answer read whole
            return self._send_whole(method, target, body, headers, timeout)
        if isinstance(timeout, tuple):
            limit = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        else:
            limit = urllib3.Timeout(total=timeout)
        sent = {"body": body, "headers": headers, "timeout": limit, "preload_content": False}
        manager = self.api.rest_client.pool_manager
        if type(manager) is not urllib3.PoolManager:  # a proxy's manager: its own request path
            return manager.urlopen(method, url, **sent)
        # straight to the API server's connection pool: the manager's URL parsing and pool lookup on every
        # request were a quarter of the time from a write's start to its first byte on the wire
        pool = self._pool
        if pool is None or pool.pool is None:  # not yet, or closed (the manager's clear() or eviction)
            pool = self._pool = manager.connection_from_url(self.host)
        resp = pool.urlopen(method, self._prefix + target, assert_same_host=False, redirect=False, **sent)
        location = resp.get_redirect_location()
        if location:  # not the API server's way; a proxy's: followed from here on as the manager follows
            resp.drain_conn()
            method, url, sent["body"], sent["headers"] = _redirected(method, url, location, resp.status, body, headers)
            return manager.urlopen(method, url, **sent)
        return resp

    def _send_whole(
        self, method: str, target: str, body: str | bytes | None, headers: dict[str, str], timeout: float
    ) -> Any:
        """A request whose answer is read whole, on kube.connections' keep-alive connections; a redirect
        (not the API server's way; a proxy's) is followed as urllib3's manager follows it."""
        assert self._connections is not None
        sent = body.encode() if isinstance(body, str) else body  # as urllib3 encodes a text
        answer = self._connections.request(method, target, sent, headers, timeout)
        location = answer.get_redirect_location()
        if not location:
            return answer
        url = self.host + target
        method, url, body, headers = _redirected(method, url, location, answer.status, body, headers)
        manager = self.api.rest_client.pool_manager
        limit = urllib3.Timeout(total=timeout)
        return manager.urlopen(method, url, body=body, headers=headers, timeout=limit, preload_content=False)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float = 30,
        parse: bool = True,
    ) -> Any:
        """The answer's JSON; with `parse=False` a success's body is read (the connection goes back to
        the pool) but not decoded, and None returned: a write whose answer nobody reads."""

        def send() -> Any:
            if method != "GET" and self.write_guard is not None:  # asked before every try: a wait may outlast a lease
                self.write_guard(method, path)
            return self._send(method, path, query=query, body=body, content_type=content_type, timeout=timeout)

        resp = self._answered(send, f"{method} {path}")
        data = resp.read()
        if not 200 <= resp.status <= 299:
            raise ApiError(resp.status, resp.reason or "", _json(data), f"{method} {path}")
        return _json(data) if parse else None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def apply(self, path: str, obj: dict[str, Any], manager: str, *, force: bool = True, parse: bool = True) -> Any:
        """Server-side apply; the object as applied (None with `parse=False`, see `request`)."""
        return self.request(
            "PATCH",
            path,
            jsoncodec.dumps(obj),
            query={"fieldManager": manager, "force": "true" if force else None},
            content_type=APPLY_PATCH,
            parse=parse,
        )

    def patch(self, path: str, patch: Any, content_type: str = MERGE_PATCH, **query: Any) -> Any:
        return self.request("PATCH", path, patch, query=query, content_type=content_type)

    def delete(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("DELETE", path, body)

    def stream(self, path: str, query: dict[str, Any], timeout: float) -> WatchStream:
        """A watch: newline-delimited JSON events, until the server ends it or `timeout` of silence."""
        resp = self._answered(lambda: self._send("GET", path, query=query, timeout=(10, timeout)), f"WATCH {path}")
        if resp.status != 200:
            data = resp.read()
            raise ApiError(resp.status, resp.reason or "", _json(data), f"WATCH {path}")
        return WatchStream(resp)


class WatchStream:
    def __init__(self, response: Any) -> None:
        self._response = response

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buf = b""
        try:
            for chunk in self._response.stream(64 * 1024, decode_content=True):
                buf += chunk
                while True:
                    line, sep, rest = buf.partition(b"\n")
                    if not sep:
                        break
                    buf = rest
                    if line.strip():
                        yield jsoncodec.loads(line)
        finally:
            self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing from another thread during shutdown
            self._response.close()


def retry_after(status: int, header: str | None) -> float | None:
    """Seconds to wait before sending again, when the answer asks for it: 429 or 5xx with `Retry-After`
    (seconds, or an HTTP date), as client-go reads it; capped at RETRY_AFTER_MAX_WAIT. None otherwise."""
    if header is None or not (status == 429 or status >= 500):
        return None
    header = header.strip()
    try:
        seconds = float(header)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_WAIT)


def _json(data: bytes) -> Any:
    if not data:
        return {}
    try:
        return jsoncodec.loads(data)
    except ValueError:
        return data.decode(errors="replace")


def resource_path(
    api_version: str, resource: str, namespace: str | None = None, name: str | None = None, sub: str | None = None
) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespace:
        base += f"/namespaces/{quote(namespace, safe='')}"
    base += f"/{resource}"
    if name:
        base += f"/{quote(name, safe='')}"
    if sub:
        base += f"/{sub}"
    return base


def _redirected(
    method: str, url: str, location: str, status: int, body: Any, headers: dict[str, str]
) -> tuple[str, str, Any, dict[str, str]]:
    """The request a redirect asks for, as urllib3's manager would make it: a 303 becomes a GET without
    a body, and credentials stay behind when the redirect leaves the host."""
    target = urljoin(url, location)
    if status == 303 and method != "HEAD":
        method, body = "GET", None
    if urllib3.util.parse_url(target).host != urllib3.util.parse_url(url).host:
        headers = {
            k: v for k, v in headers.items() if k.lower() not in ("authorization", "cookie", "proxy-authorization")
        }
    return method, target, body, headers
