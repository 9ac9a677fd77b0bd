"""http.send, enabled per host by --allow-http-send HOST[:PORT].

OPA's request and response shapes, `raise_error`, `timeout`, JSON/YAML body
decoding and its inter-query cache (`cache` honours Cache-Control max-age
and Expires; `force_cache` keeps a response `force_cache_duration_seconds`).
A host outside the allow list is an evaluation error, as OPA's `allow_net`
capability makes it. Redirects are not followed unless `enable_redirect`,
and never to a host outside the list.
"""

from __future__ import annotations

import email.utils
import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import yaml

from regokite.engine.extensions.common import BuiltinError, object_operand, type_name

NAME = "http.send"
DEFAULT_TIMEOUT = 5.0  # OPA's default for http.send
_KNOWN = {
    "method",
    "url",
    "body",
    "raw_body",
    "headers",
    "enable_redirect",
    "force_json_decode",
    "force_yaml_decode",
    "timeout",
    "raise_error",
    "cache",
    "force_cache",
    "force_cache_duration_seconds",
    "tls_insecure_skip_verify",
    "max_retry_attempts",
    "caching_mode",
}
_CACHEABLE = {200, 203, 204, 206, 300, 301, 404, 405, 410, 414, 501}
_DURATION = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class HostNotAllowed(BuiltinError):
    """Always an evaluation error, whatever `raise_error` says: the allow list fails closed."""


def parse_allowed(entries: tuple[str, ...]) -> list[tuple[str, int | None]]:
    """HOST or HOST:PORT (an IPv6 host in brackets) to (host, port or None)."""
    allowed = []
    for entry in entries:
        host, _, port = entry.rpartition(":") if entry.rstrip("]").count(":") >= 1 else (entry, "", "")
        if not host or (port and not port.isdigit()):
            host, port = entry, ""
        allowed.append((host.strip("[]").lower(), int(port) if port else None))
    return allowed


class HttpSend:
    """The http.send builtin for one allow list; one instance per engine family
    (clones share it, and with it the cache)."""

    def __init__(self, hosts: tuple[str, ...], max_timeout: float) -> None:
        self._allowed = parse_allowed(hosts)
        self._max_timeout = max_timeout
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def __call__(self, request: Any) -> dict[str, Any]:
        request = object_operand(NAME, request, 1)
        unknown = sorted(str(k) for k in request if k not in _KNOWN and not str(k).startswith("tls_"))
        if unknown:
            raise BuiltinError(f"{NAME}: invalid request parameters(s): {set(unknown)}")
        for field in ("method", "url"):
            if not isinstance(request.get(field), str):
                raise BuiltinError(f'{NAME}: "{field}" must be a string')
        raise_error = request.get("raise_error", True)
        try:
            return self._send(request)
        except HostNotAllowed:
            raise
        except BuiltinError as exc:
            if raise_error is not False:
                raise
            return {"status_code": 0, "error": {"code": "eval_http_send_network_error", "message": str(exc)}}

    def _send(self, request: dict[str, Any]) -> dict[str, Any]:
        url = request["url"]
        self.check_host(url)
        key = json.dumps(request, sort_keys=True, default=sorted)
        cached = self._cached(key)
        if cached is not None:
            return cached
        response, max_age = self._fetch(request)
        if max_age is not None and response["status_code"] in _CACHEABLE:
            with self._lock:
                self._cache[key] = (time.monotonic() + max_age, response)
        return response

    def check_host(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BuiltinError(f"{NAME}: unsupported URL {url!r}: expected http:// or https://")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname.lower()
        if not any(host == h and (p is None or p == port) for h, p in self._allowed):
            raise HostNotAllowed(f"{NAME}: unallowed host: {host} (allow it with --allow-http-send {host}:{port})")

    def _cached(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                return None
            if entry[0] <= time.monotonic():
                del self._cache[key]
                return None
            return entry[1]

    def _timeout(self, request: dict[str, Any]) -> float:
        value = request.get("timeout")
        if value is None:
            return min(DEFAULT_TIMEOUT, self._max_timeout)
        if isinstance(value, bool):
            raise BuiltinError(f"{NAME}: timeout must be a duration string or a number of nanoseconds")
        if isinstance(value, int | float):
            seconds = value / 1e9
        elif isinstance(value, str):
            seconds = _duration(value)
        else:
            raise BuiltinError(f"{NAME}: timeout must be a duration string, got {type_name(value)}")
        return min(seconds, self._max_timeout) if seconds > 0 else self._max_timeout

    def _fetch(self, request: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
        headers = request.get("headers") or {}
        if not isinstance(headers, dict):
            raise BuiltinError(f"{NAME}: headers must be an object")
        data = None
        if "raw_body" in request:
            data = str(request["raw_body"]).encode()
        elif "body" in request:
            data = json.dumps(request["body"], separators=(",", ":"), default=sorted).encode()
        outgoing = urllib.request.Request(
            request["url"],
            data=data,
            method=request["method"].upper(),
            headers={str(k): str(v) for k, v in headers.items()},
        )
        context = None
        if request.get("tls_insecure_skip_verify") is True:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context),
            _Redirects(self if request.get("enable_redirect") is True else None),
        )
        try:
            with opener.open(outgoing, timeout=self._timeout(request)) as reply:
                status, reason, body, reply_headers = reply.status, reply.reason, reply.read(), reply.headers
        except urllib.error.HTTPError as reply:
            status, reason, body, reply_headers = reply.code, reply.reason, reply.read(), reply.headers
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BuiltinError(f"{NAME}: {request['method'].upper()} {request['url']}: {reason}") from None
        response = {
            "status": f"{status} {reason}",
            "status_code": status,
            "body": _decode_body(request, reply_headers.get("Content-Type", ""), body),
            "raw_body": body.decode(errors="replace"),
            "headers": _headers(reply_headers),
        }
        return response, _max_age(request, reply_headers)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only when the request enabled it, and only to an allowed host."""

    def __init__(self, sender: HttpSend | None) -> None:
        self._sender = sender

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        if self._sender is None:
            return None
        self._sender.check_host(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _duration(text: str) -> float:
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        total += float(match[1]) * _UNITS[match[2]]
        position = match.end()
    if position != len(text) or not text:
        raise BuiltinError(f"{NAME}: invalid timeout {text!r}")
    return total


def _decode_body(request: dict[str, Any], content_type: str, body: bytes) -> Any:
    kind = content_type.split(";", 1)[0].strip().lower()
    try:
        if request.get("force_json_decode") is True or kind == "application/json" or kind.endswith("+json"):
            return json.loads(body) if body else None
        if request.get("force_yaml_decode") is True or kind in ("application/yaml", "application/x-yaml"):
            return yaml.safe_load(body) if body else None
    except (ValueError, yaml.YAMLError) as exc:
        raise BuiltinError(f"{NAME}: could not decode the response body: {exc}") from None
    return None


def _headers(headers: Any) -> dict[str, list[str]]:
    result: dict[str, list[str]] = {}
    for name, value in headers.items():
        result.setdefault(name.lower(), []).append(value)
    return result


def _max_age(request: dict[str, Any], headers: Any) -> float | None:
    """How long a response may be cached, or None."""
    if request.get("force_cache") is True:
        seconds = request.get("force_cache_duration_seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            raise BuiltinError(f"{NAME}: force_cache_duration_seconds must be a number with force_cache")
        return float(seconds)
    if request.get("cache") is not True:
        return None
    directives = [d.strip().lower() for d in headers.get("Cache-Control", "").split(",") if d.strip()]
    if "no-store" in directives or "no-cache" in directives:
        return None
    for directive in directives:
        if directive.startswith("max-age="):
            try:
                return max(float(directive[8:]) - float(headers.get("Age", 0) or 0), 0.0) or None
            except ValueError:
                return None
    expires = headers.get("Expires")
    if expires:
        try:
            when = email.utils.parsedate_to_datetime(expires).timestamp()
        except (TypeError, ValueError):
            return None
        return (when - time.time()) if when > time.time() else None
    return None
