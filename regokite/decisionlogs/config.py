"""The `decision_logs` section of OPA's configuration file, read as OPA reads it (defaults from OPA's
plugins/logs); keys regokite does not act on are refused by name, never ignored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from regokite.bundles.config import ConfigError, Service

_KEYS = {"service", "resource", "reporting", "mask_decision", "drop_decision", "console", "partition_name"}
_REPORTING = {"buffer_type", "buffer_size_limit_events", "buffer_size_limit_bytes", "upload_size_limit_bytes",
              "min_delay_seconds", "max_delay_seconds", "trigger"}  # fmt: skip
_REFUSED = {
    "plugin": "custom decision log plugins are Go code: regokite has none",
    "request_context": "regokite logs admission reviews, which carry no HTTP request headers to copy",
    "nd_builtin_cache": "regokite does not record non-deterministic builtin results",
    "mask_decision_before_drop": "regokite evaluates drop before mask, as OPA does by default",
}
_REFUSED_REPORTING = {
    "max_decisions_per_second": "decisions are not rate-limited here; the buffer's bound drops and counts",
}


@dataclass(frozen=True)
class DecisionLogConfig:
    service: Service | None  # where batches go (None: console only)
    resource: str = "/logs"
    console: bool = False
    mask_decision: str = "system/log/mask"
    drop_decision: str = "system/log/drop"
    buffer_type: str = "size"  # OPA's default: bounded by buffer_size_limit_bytes; "event": by events
    buffer_size_limit_events: int = 10000
    buffer_size_limit_bytes: int = 0  # the events' JSON bytes the size buffer holds at most (0: no limit, as OPA)
    upload_size_limit_bytes: int = 32768  # a gzip'd batch's most bytes
    min_delay_seconds: float = 300.0
    max_delay_seconds: float = 600.0
    immediate: bool = False  # trigger: immediate (upload as soon as a chunk fills)
    labels: Mapping[str, str] | None = None


def parse(section: Mapping[str, Any], services: Mapping[str, Service], labels: Mapping[str, str] | None = None) -> (
    DecisionLogConfig
):  # fmt: skip
    """`section` (decision_logs) with `services` (the file's, parsed by bundles.config) and its `labels`."""
    _known(section, _KEYS, _REFUSED, "decision_logs")
    reporting = section.get("reporting") or {}
    if not isinstance(reporting, Mapping):
        raise ConfigError("decision_logs.reporting: expected an object")
    _known(reporting, _REPORTING, _REFUSED_REPORTING, "decision_logs.reporting")
    name = section.get("service")
    if name is None and len(services) == 1 and not section.get("console"):
        name = next(iter(services))  # OPA: the only service when none is named
    if name is not None and name not in services:
        raise ConfigError(f"decision_logs.service: no service named {name!r}")
    buffer_type = reporting.get("buffer_type", "size")
    if buffer_type not in ("size", "event"):
        raise ConfigError("decision_logs.reporting.buffer_type: expected size or event")
    other = "buffer_size_limit_bytes" if buffer_type == "event" else "buffer_size_limit_events"
    if other in reporting:  # OPA refuses the other type's bound
        raise ConfigError(f"decision_logs.reporting.{other}: not supported for the {buffer_type} buffer type")
    in_bytes = "buffer_size_limit_bytes" in reporting
    if reporting.get("trigger", "periodic") not in ("periodic", "immediate"):
        raise ConfigError("decision_logs.reporting.trigger: expected periodic or immediate")
    low = _number(reporting, "min_delay_seconds", 300.0)
    high = _number(reporting, "max_delay_seconds", 600.0)
    if high < low:
        raise ConfigError("decision_logs.reporting: max_delay_seconds must not be less than min_delay_seconds")
    return DecisionLogConfig(
        service=services[name] if name is not None else None,
        resource="/" + str(section.get("resource", "/logs")).lstrip("/"),
        console=bool(section.get("console", False)),
        mask_decision=str(section.get("mask_decision", "system/log/mask")).strip("/"),
        drop_decision=str(section.get("drop_decision", "system/log/drop")).strip("/"),
        buffer_type=buffer_type,
        buffer_size_limit_events=int(_number(reporting, "buffer_size_limit_events", 10000)),
        buffer_size_limit_bytes=int(_number(reporting, "buffer_size_limit_bytes", 1)) if in_bytes else 0,
        upload_size_limit_bytes=int(_number(reporting, "upload_size_limit_bytes", 32768)),
        min_delay_seconds=low,
        max_delay_seconds=high,
        immediate=reporting.get("trigger") == "immediate",
        labels=labels,
    )


def _known(section: Mapping[str, Any], known: set[str], refused: dict[str, str], where: str) -> None:
    for key in section:
        if key in refused:
            raise ConfigError(f"{where}.{key}: not supported: {refused[key]}")
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key")


def _number(section: Mapping[str, Any], key: str, default: float) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"decision_logs.reporting.{key}: expected a positive number")
    return float(value)
