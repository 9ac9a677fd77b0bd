"""Structured logs: one JSON object a line when not on a terminal.

Fields passed as `extra={...}` become keys of the JSON object (and `k=v`
pairs on a terminal), so log lines stay machine-readable without a
separate event API.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

NAMED_FIELDS = "named_fields"
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName", "color_message"}
_context: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar("regokite_log", default=())


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Fields (e.g. the review's uid) for lines logged deep below, where they are not known."""
    token = _context.set((*_context.get(), *fields.items()))
    try:
        yield
    finally:
        _context.reset(token)


def context() -> dict[str, Any]:
    return dict(_context.get())


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's extra fields; `named_fields` (a dict) is spread out, so a line can carry names that
    a LogRecord reserves (`process` in Gatekeeper's violation lines)."""
    found = {k: v for k, v in vars(record).items() if k not in _STANDARD}
    named = found.pop(NAMED_FIELDS, None)
    if isinstance(named, dict):
        found.update(named)
    return found


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_fields(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class ConsoleFormatter(logging.Formatter):
    """One line a record for a terminal. Field values are quoted when they hold
    a line break or other control character, and a multi-line message (a load
    error with its source line) continues indented: text from a request or a
    policy cannot start what looks like a line of its own."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        extra = " ".join(f"{k}={_console_value(v)}" for k, v in _fields(record).items())
        message = record.getMessage().replace("\r", "\\r").replace("\n", "\n    ")
        line = f"{stamp} {record.levelname.lower():7} {record.name}: {message}"
        if extra:
            line += f"  {extra}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _console_value(value: Any) -> str:
    text = str(value)
    return text if text.isprintable() else json.dumps(text)


def configure(level: str = "info", json_lines: bool | None = None) -> None:
    """Route every regokite logger to stderr in the right format."""
    if json_lines is None:
        json_lines = not sys.stderr.isatty()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else ConsoleFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    pool = logging.getLogger("urllib3.connectionpool")
    if not any(isinstance(f, _RetryWarnings) for f in pool.filters):
        pool.addFilter(_RetryWarnings())


class _RetryWarnings(logging.Filter):
    """urllib3's `Retrying (Retry(total=2, ...)) after connection broken by ...`, one per request
    while the API server is away: thousands in an outage. Kept at debug; the retrying loops log
    the outage once (regokite.ops.outage)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and str(record.msg).startswith("Retrying ("):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True
