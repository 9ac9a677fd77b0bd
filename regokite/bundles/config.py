"""OPA's configuration file (`opa run --config-file`), read as OPA reads it.

The keys regokite acts on are `services`, `bundles`, `keys`, `status`,
`labels` and `persistence_directory`; `decision_logs` is kept as given for the
decision logger. OPA's defaults and checks are OPA's (download/config.go,
plugins/bundle/config.go, keys/keys.go): polling 60-120 s, `resource`
`bundles/<name>`, one service used when a bundle names none, `${VAR}`
replaced from the environment. A key OPA has and regokite does not serve
(discovery, plugins, OAuth2 credentials, ...) is refused by
its name: a configuration is never half read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from regokite import yamldoc
from regokite.errors import RegokiteError

DEFAULT_MIN_DELAY = 60  # OPA's polling defaults, seconds
DEFAULT_MAX_DELAY = 120
DEFAULT_PERSISTENCE_DIRECTORY = ".opa"  # OPA's, below the working directory
SIGNING_ALGORITHMS = frozenset(f"{kind}{bits}" for kind in ("RS", "PS", "ES", "HS") for bits in (256, 384, 512))

_TOP = {"services", "bundles", "keys", "status", "decision_logs", "labels", "persistence_directory"}
_REFUSED_TOP = {
    "discovery": "discovery bundles",
    "plugins": "custom plugins",
    "bundle": "the singular `bundle` key (OPA's deprecated form; use `bundles`)",
    "server": "the `server` settings (regokite serves admission, not OPA's REST API)",
    "storage": "the disk storage backend",
    "caching": "the inter-query cache settings",
    "nd_builtin_cache": "the non-deterministic builtin cache",
    "distributed_tracing": "distributed tracing",
    "default_decision": "default_decision (OPA's REST API)",
    "default_authorization_decision": "default_authorization_decision (OPA's REST API)",
}
_ENV = re.compile(r"\$\{([^}]+)\}")


class ConfigError(RegokiteError):
    """The configuration file is not one regokite can serve exactly as OPA would."""


@dataclass(frozen=True)
class ClientTls:
    cert: str
    private_key: str
    private_key_passphrase: str | None = None


@dataclass(frozen=True)
class Service:
    """A bundle or status service: `url` is the base that `resource` paths are joined to."""

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    type: str = "http"  # or "oci": an OCI registry (regokite.bundles.oci)
    bearer_token: str | None = None  # the token, read from token_path when given there
    bearer_token_path: str | None = None
    bearer_scheme: str = "Bearer"
    client_tls: ClientTls | None = None
    ca_cert: str | None = None
    allow_insecure_tls: bool = False
    response_header_timeout_seconds: float = 10.0

    def authorization(self) -> str | None:
        """The Authorization header, the token file read at each request (a rotated token is taken)."""
        token = self.bearer_token
        if self.bearer_token_path:
            try:
                token = Path(self.bearer_token_path).read_text().strip()
            except OSError as exc:
                raise ConfigError(f"services.{self.name}.credentials.bearer.token_path: {exc}") from None
        return f"{self.bearer_scheme} {token}" if token is not None else None


@dataclass(frozen=True)
class Key:
    """A verification key (`keys.<id>`): a PEM public key, or the secret of an HS* algorithm."""

    id: str
    algorithm: str = "RS256"
    key: str = ""
    scope: str = ""


@dataclass(frozen=True)
class Signing:
    """A bundle's `signing`: which key verifies it (else the JWT's `kid`), the scope it must carry,
    and globs of files left out of verification."""

    keyid: str = ""
    scope: str = ""
    exclude_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Polling:
    min_delay_seconds: int = DEFAULT_MIN_DELAY
    max_delay_seconds: int = DEFAULT_MAX_DELAY
    long_polling_timeout_seconds: int | None = None


@dataclass(frozen=True)
class BundleSource:
    """One entry of `bundles`: downloaded from `service` at `resource`."""

    name: str
    service: str
    resource: str
    polling: Polling = field(default_factory=Polling)
    signing: Signing | None = None
    persist: bool = False
    size_limit_bytes: int = 1024**3  # OPA's default: gzip bombs stop here


@dataclass(frozen=True)
class StatusConfig:
    service: str | None = None
    partition_name: str | None = None
    console: bool = False
    prometheus: bool = False


@dataclass(frozen=True)
class OpaConfig:
    services: Mapping[str, Service] = field(default_factory=dict)
    bundles: Mapping[str, BundleSource] = field(default_factory=dict)
    keys: Mapping[str, Key] = field(default_factory=dict)
    status: StatusConfig | None = None
    decision_logs: Mapping[str, Any] | None = None  # as given: the decision logger reads it
    labels: Mapping[str, str] = field(default_factory=dict)
    persistence_directory: str = DEFAULT_PERSISTENCE_DIRECTORY

    def service(self, name: str) -> Service:
        return self.services[name]

    def with_urls(self, urls: list[str]) -> OpaConfig:
        """`--bundle URL`s added as bundles, each from a service of its own (polled with OPA's defaults)."""
        services, bundles = dict(self.services), dict(self.bundles)
        for url in urls:
            base, _, resource = url.partition("://")[2].partition("/")
            scheme = url.partition("://")[0]
            name = url
            if name in bundles:
                raise ConfigError(f"--bundle {url}: given twice")
            services[name] = Service(name, f"{scheme}://{base}")
            bundles[name] = BundleSource(name, name, resource)
        return replace(self, services=services, bundles=bundles)


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> OpaConfig:
    """`--config-file PATH`: YAML or JSON, `${VAR}` replaced from the environment as OPA does."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"--config-file {path}: {exc.strerror or exc}") from None
    env = os.environ if environ is None else environ
    text = _ENV.sub(lambda m: env.get(m.group(1), ""), text)
    try:
        doc = yamldoc.load(text)
    except yamldoc.YAMLError as exc:
        raise ConfigError(f"--config-file {path}: invalid YAML: {exc}") from None
    try:
        return parse_config({} if doc is None else doc)
    except ConfigError as exc:
        raise ConfigError(f"--config-file {path}: {exc}") from None


def parse_config(doc: Any) -> OpaConfig:
    top = _object(doc, "the configuration")
    for key in top:
        if key in _REFUSED_TOP:
            raise ConfigError(f"{key}: regokite does not serve {_REFUSED_TOP[key]}")
        if key not in _TOP:
            raise ConfigError(f"{key}: not a key of OPA's configuration that regokite knows")
    services = _services(top.get("services"))
    keys = {name: _key(name, spec) for name, spec in _object(top.get("keys") or {}, "keys").items()}
    bundles = {
        name: _bundle(name, spec, services, keys) for name, spec in _object(top.get("bundles") or {}, "bundles").items()
    }
    status = _status(top["status"], services) if top.get("status") is not None else None
    decision_logs = top.get("decision_logs")
    if decision_logs is not None:
        _object(decision_logs, "decision_logs")
    labels = {str(k): str(v) for k, v in _object(top.get("labels") or {}, "labels").items()}
    directory = top.get("persistence_directory", DEFAULT_PERSISTENCE_DIRECTORY)
    return OpaConfig(
        services, bundles, keys, status, decision_logs, labels, _string(directory, "persistence_directory")
    )


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be an object, got {type(value).__name__}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


def _only(spec: dict[str, Any], where: str, known: set[str], refused: Mapping[str, str] | None = None) -> None:
    for key in spec:
        if refused and key in refused:
            raise ConfigError(f"{where}.{key}: regokite does not support {refused[key]}")
        if key not in known:
            raise ConfigError(f"{where}.{key}: not a key regokite knows here (known: {', '.join(sorted(known))})")


def _services(value: Any) -> dict[str, Service]:
    """OPA takes `services` as an object keyed by name or a list of objects with `name`."""
    if value is None:
        return {}
    if isinstance(value, list):
        named: dict[str, Any] = {}
        for i, spec in enumerate(value):
            name = _object(spec, f"services[{i}]").get("name")
            named[_string(name, f"services[{i}].name")] = spec
        value = named
    return {name: _service(name, spec) for name, spec in _object(value, "services").items()}


_SERVICE_KEYS = {
    "name",
    "url",
    "headers",
    "credentials",
    "tls",
    "allow_insecure_tls",
    "response_header_timeout_seconds",
}
_REFUSED_SERVICE = {"keys": "per-service keys"}
_REFUSED_CREDENTIALS = {
    "oauth2": "OAuth2 credentials",
    "s3_signing": "AWS S3 signing",
    "gcp_metadata": "GCP metadata tokens",
    "azure_managed_identity": "Azure managed identities",
    "plugin": "credential plugins",
}


def _service(name: str, spec: Any) -> Service:
    where = f"services.{name}"
    spec = _object(spec, where)
    kind = spec.get("type", "http")
    if kind not in ("http", "oci"):
        raise ConfigError(f"{where}.type: {kind!r}: regokite knows http and oci services")
    _only(spec, where, _SERVICE_KEYS, _REFUSED_SERVICE)
    url = _string(spec.get("url"), f"{where}.url").rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{where}.url: {url!r} is not an http(s) URL")
    tls = _object(spec.get("tls") or {}, f"{where}.tls")
    _only(tls, f"{where}.tls", {"ca_cert", "system_ca_required"})
    credentials = _object(spec.get("credentials") or {}, f"{where}.credentials")
    _only(credentials, f"{where}.credentials", {"bearer", "client_tls"}, _REFUSED_CREDENTIALS)
    bearer = _object(credentials.get("bearer") or {}, f"{where}.credentials.bearer")
    _only(bearer, f"{where}.credentials.bearer", {"token", "token_path", "scheme"})
    client = _object(credentials.get("client_tls") or {}, f"{where}.credentials.client_tls")
    _only(client, f"{where}.credentials.client_tls", {"cert", "private_key", "private_key_passphrase", "ca_cert"})
    client_tls = None
    if client:
        client_tls = ClientTls(
            _string(client.get("cert"), f"{where}.credentials.client_tls.cert"),
            _string(client.get("private_key"), f"{where}.credentials.client_tls.private_key"),
            client.get("private_key_passphrase"),
        )
    headers = {str(k): str(v) for k, v in _object(spec.get("headers") or {}, f"{where}.headers").items()}
    timeout = spec.get("response_header_timeout_seconds", 10)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ConfigError(f"{where}.response_header_timeout_seconds must be a positive number")
    return Service(
        name,
        url,
        headers,
        kind,
        bearer_token=bearer.get("token"),
        bearer_token_path=bearer.get("token_path"),
        bearer_scheme=bearer.get("scheme", "Bearer"),
        client_tls=client_tls,
        ca_cert=tls.get("ca_cert") or client.get("ca_cert"),  # client_tls.ca_cert: OPA's older place for it
        allow_insecure_tls=bool(spec.get("allow_insecure_tls", False)),
        response_header_timeout_seconds=float(timeout),
    )


def _key(name: str, spec: Any) -> Key:
    where = f"keys.{name}"
    spec = _object(spec, where)
    _only(spec, where, {"algorithm", "key", "private_key", "scope"})
    algorithm = spec.get("algorithm", "RS256")
    if algorithm not in SIGNING_ALGORITHMS:
        raise ConfigError(
            f"{where}.algorithm: unsupported {algorithm!r} (one of {', '.join(sorted(SIGNING_ALGORITHMS))})"
        )
    if "key" not in spec:
        raise ConfigError(f"{where}.key: a verification key (PEM public key, or the HS* secret) is required")
    return Key(name, algorithm, _string(spec["key"], f"{where}.key"), _string(spec.get("scope", ""), f"{where}.scope"))


def _bundle(name: str, spec: Any, services: Mapping[str, Service], keys: Mapping[str, Key]) -> BundleSource:
    where = f"bundles.{name}"
    spec = _object(spec, where)
    known = {"service", "resource", "polling", "signing", "persist", "size_limit_bytes", "trigger"}
    _only(spec, where, known)
    if spec.get("trigger", "periodic") != "periodic":
        raise ConfigError(f"{where}.trigger: regokite polls (periodic); {spec['trigger']!r} is not supported")
    service = spec.get("service") or ""
    if not service:
        if len(services) != 1:
            raise ConfigError(f"{where}.service: name the service (there are {len(services)})")
        service = next(iter(services))
    if service not in services:
        raise ConfigError(f"{where}.service: no service named {service!r}")
    resource = _string(spec.get("resource", f"bundles/{name}"), f"{where}.resource")
    signing = _signing(spec["signing"], where, keys) if spec.get("signing") is not None else None
    limit = spec.get("size_limit_bytes", 1024**3)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise ConfigError(f"{where}.size_limit_bytes must be a positive integer")
    persist = spec.get("persist", False)
    if not isinstance(persist, bool):
        raise ConfigError(f"{where}.persist must be true or false")
    return BundleSource(name, service, resource, _polling(spec.get("polling"), where), signing, persist, limit)


def _polling(value: Any, where: str) -> Polling:
    spec = _object(value or {}, f"{where}.polling")
    _only(spec, f"{where}.polling", {"min_delay_seconds", "max_delay_seconds", "long_polling_timeout_seconds"})
    low, high, long = (spec.get(k) for k in ("min_delay_seconds", "max_delay_seconds", "long_polling_timeout_seconds"))
    for key, v in (("min_delay_seconds", low), ("max_delay_seconds", high), ("long_polling_timeout_seconds", long)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ConfigError(f"{where}.polling.{key} must be a whole number of seconds, got {v!r}")
    if (low is None) != (high is None):
        missing = "max_delay_seconds" if high is None else "min_delay_seconds"
        raise ConfigError(f"{where}.polling: missing {missing!r} (OPA takes both or neither)")
    if low is not None and high is not None and high < low:
        raise ConfigError(f"{where}.polling: max polling delay must be >= min polling delay")
    if long is not None and long < 1:
        raise ConfigError(f"{where}.polling.long_polling_timeout_seconds must be at least 1")
    if low is None or high is None:
        return Polling(long_polling_timeout_seconds=long)
    return Polling(low, high, long)


def _signing(value: Any, where: str, keys: Mapping[str, Key]) -> Signing:
    spec = _object(value, f"{where}.signing")
    _only(spec, f"{where}.signing", {"keyid", "scope", "exclude_files"})
    keyid = _string(spec.get("keyid", ""), f"{where}.signing.keyid")
    if keyid and keyid not in keys:
        raise ConfigError(f"{where}.signing.keyid: no key named {keyid!r} in keys")
    exclude = spec.get("exclude_files") or []
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise ConfigError(f"{where}.signing.exclude_files must be a list of file globs")
    return Signing(keyid, _string(spec.get("scope", ""), f"{where}.signing.scope"), tuple(exclude))


def _status(value: Any, services: Mapping[str, Service]) -> StatusConfig:
    spec = _object(value, "status")
    _only(spec, "status", {"service", "partition_name", "console", "prometheus"}, {"plugin": "status plugins"})
    service = spec.get("service")
    if service is not None and service not in services:
        raise ConfigError(f"status.service: no service named {service!r}")
    if service is None and not spec.get("console") and not spec.get("prometheus") and services:
        service = next(iter(services))  # OPA's default: the first service
    return StatusConfig(service, spec.get("partition_name"), bool(spec.get("console")), bool(spec.get("prometheus")))
