"""providers.aws.sign_req as OPA: an AWS Signature Version 4 of an http.send request object.

The request comes back with its headers (string values; others read as "" as OPA reads them),
`Authorization`, `host`, `x-amz-date`, `x-amz-content-sha256` for s3 and glacier (the body's
SHA-256, or UNSIGNED-PAYLOAD with `disable_payload_signing`) and `x-amz-security-token` with a
session token. The body is signed as OPA writes it (Go's JSON: keys sorted, `<`, `>` and `&`
escaped, a set as its sorted members); a URL or a body Go could read or write otherwise than
here (escapes, numbers that are not integers, sets whose members Python merges) is an error.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import re
from typing import Any
from urllib.parse import urlsplit

from regokite.engine.extensions.common import BuiltinError, Refusal, builtin, go_json, object_operand, type_name

NAME = "providers.aws.sign_req"
_REQUIRED = ("aws_access_key", "aws_region", "aws_secret_access_key", "aws_service")
_IGNORED = frozenset({"authorization", "user-agent", "x-amzn-trace-id"})
_REQUEST_KEYS = frozenset(  # http.send's request keys: OPA validates the request as http.send's
    {
        *("body", "cache", "caching_mode", "enable_redirect", "force_cache", "force_cache_duration_seconds"),
        *("force_json_decode", "force_yaml_decode", "headers", "max_retry_attempts", "method", "raise_error"),
        *("raw_body", "timeout", "tls_ca_cert", "tls_ca_cert_env_variable", "tls_ca_cert_file", "tls_client_cert"),
        *("tls_client_cert_env_variable", "tls_client_cert_file", "tls_client_key", "tls_client_key_env_variable"),
        *("tls_client_key_file", "tls_insecure_skip_verify", "tls_server_name", "tls_use_system_certs", "url"),
        "cache_ignored_headers",
    }
)
# a path Go's URL.EscapedPath writes as it was written: unreserved and sub-delimiters, no escapes
_PLAIN_PATH = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/]*")
_PLAIN_HOST = re.compile(r"[A-Za-z0-9\-._:]*")
_PLAIN_QUERY = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*")


@builtin(NAME)
def sign_req(request: Any, config: Any, time_ns: Any) -> dict[str, Any]:
    request = object_operand(NAME, request, 1)
    config = object_operand(NAME, config, 2)
    _check_config(config)
    if isinstance(time_ns, bool) or not isinstance(time_ns, int | float):
        raise BuiltinError(f"{NAME}: operand 3 must be number but got {type_name(time_ns)}")
    if (isinstance(time_ns, float) and not time_ns.is_integer()) or not -(2**63) <= time_ns < 2**63:
        raise BuiltinError(f"{NAME}: operand 3 could not convert time_ns value into a unix timestamp")
    _check_request(request)
    headers = request.get("headers", {})
    if not isinstance(headers, dict):
        raise BuiltinError(f"{NAME}: operand 0 must be object but got {type_name(headers)}")
    disable = config.get("disable_payload_signing", False)
    if not isinstance(disable, bool):
        raise BuiltinError(f"{NAME}: operand 2 invalid value for 'disable_payload_signing' in AWS config")
    if not all(isinstance(k, str) for k in headers):
        raise _unmatched("a header name that is not a string")
    strings = {k: v if isinstance(v, str) else "" for k, v in headers.items()}
    body = _body(request)
    when = datetime.datetime.fromtimestamp(int(time_ns) // 10**9, tz=datetime.UTC)
    authorization, signed = _sign(strings, request, body, config, when, disable)
    return {**request, "headers": {**strings, "Authorization": authorization, **signed}}


def _check_config(config: dict[str, Any]) -> None:
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        listed = ", ".join(f'"{k}"' for k in missing)
        raise BuiltinError(f"{NAME}: operand 2 missing required AWS config parameters(s): {{{listed}}}")
    invalid = [k for k in _REQUIRED if not isinstance(config[k], str)]
    if invalid:
        listed = ", ".join(f'"{k}"' for k in invalid)
        raise BuiltinError(f"{NAME}: operand 2 invalid values for required AWS config parameters(s): {{{listed}}}")


def _check_request(request: dict[str, Any]) -> None:
    unknown = sorted(k for k in request if k not in _REQUEST_KEYS)
    if unknown:
        raise BuiltinError(f"{NAME}: invalid request parameters(s): {{{', '.join(map(json.dumps, unknown))}}}")
    missing = sorted(k for k in ("method", "url") if k not in request)
    if missing:
        raise BuiltinError(f"{NAME}: missing required request parameters(s): {{{', '.join(map(json.dumps, missing))}}}")
    invalid = sorted(k for k in ("method", "url") if not isinstance(request[k], str))
    if invalid:
        listed = ", ".join(map(json.dumps, invalid))
        raise BuiltinError(f"{NAME}: operand 1 invalid values for required request parameters(s): {{{listed}}}")


def _body(request: dict[str, Any]) -> bytes:
    if "raw_body" in request:
        raw = request["raw_body"]
        return raw.encode() if isinstance(raw, str) else b""
    if "body" in request:
        return go_json(NAME, request["body"]).encode()
    return b""


def _sign(
    headers: dict[str, str],
    request: dict[str, Any],
    body: bytes,
    config: dict[str, Any],
    when: datetime.datetime,
    disable_payload_signing: bool,
) -> tuple[str, dict[str, str]]:
    parts = urlsplit(request["url"])
    host = parts.netloc.rpartition("@")[2]
    for what, text, plain in (
        ("path", parts.path, _PLAIN_PATH),
        ("host", host, _PLAIN_HOST),
        ("query", parts.query, _PLAIN_QUERY),
    ):
        if not plain.fullmatch(text):
            raise _unmatched(f"the URL {what} {text!r}")
    service, region = config["aws_service"], config["aws_region"]
    content = "UNSIGNED-PAYLOAD" if disable_payload_signing else hashlib.sha256(body).hexdigest()
    day, stamp = when.strftime("%Y%m%d"), when.strftime("%Y%m%dT%H%M%SZ")
    signed = {"host": host, "x-amz-date": stamp}
    if service in ("s3", "glacier"):
        signed["x-amz-content-sha256"] = content
    if isinstance(config.get("aws_session_token"), str) and config["aws_session_token"]:
        signed["x-amz-security-token"] = config["aws_session_token"]
    to_sign = dict(signed)
    for key, value in headers.items():
        if key.lower() not in _IGNORED:
            to_sign[key.lower()] = value
    names = sorted(to_sign)
    canonical = f"{request['method']}\n{parts.path}\n{parts.query}\n"
    canonical += "".join(f"{k}:{to_sign[k]}\n" for k in names) + "\n" + ";".join(names) + "\n" + content
    scope = f"{day}/{region}/{service}/aws4_request"
    string_to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = ("AWS4" + config["aws_secret_access_key"]).encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    credential = f"{config['aws_access_key']}/{scope}"
    return f"AWS4-HMAC-SHA256 Credential={credential},SignedHeaders={';'.join(names)},Signature={signature}", signed


def _unmatched(what: str) -> Refusal:
    return Refusal(f"{NAME}: {what} may be signed otherwise than OPA signs it: use --engine opa")
