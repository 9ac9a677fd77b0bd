"""Error types shared by every layer.

Each error carries enough to name *what* was wrong and *where* (file, line,
column, policy, rule), because a policy author must be able to act on it
without reading a traceback.
"""

from __future__ import annotations

import functools
import json
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

_LOCATION = re.compile(r"-->\s*(?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+)")
_MESSAGE = re.compile(r"^error:\s*(?P<msg>.*)$", re.MULTILINE)


class RegokiteError(Exception):
    """Base of every error regokite reports to a user instead of a traceback."""


class HookError(RegokiteError):
    """A hook could not run or its response is invalid; `reason` is the Event reason."""

    def __init__(self, package: str, rule: str | None, message: str, reason: str = "InvalidHookOutput") -> None:
        self.package = package
        self.rule = rule
        self.message = message
        self.reason = reason
        where = f"{package}, rule {rule}" if rule else package
        super().__init__(f"policy {where}: {message}")


def release_frames(exc: BaseException) -> None:
    """Clear the locals of the finished frames `exc` (and the exceptions it chains) passed through.

    A regorus engine is pinned to the thread that made it; an exception kept
    in a reference cycle (stored in a local or a dict of a frame its own
    traceback holds) keeps the engines in those frames alive until the
    collector frees the cycle on whatever thread it runs, where PyO3 refuses
    the drop ("Engine is unsendable"). Cleared here, they go on this thread.
    """
    seen: set[int] = set()
    chained: BaseException | None = exc
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        traceback.clear_frames(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__


_P = ParamSpec("_P")
_R = TypeVar("_R")


def frames_released(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """`function`, whose failures leave its frames (and the regorus engines in them) to be freed
    on the calling thread however its caller keeps the exception: for every function that builds
    or evaluates on a regorus engine and lets an error out."""

    @functools.wraps(function)
    def released(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except BaseException as exc:
            release_frames(exc)
            del args, kwargs  # this frame stays in the traceback too (a _Bound holds its engine)
            raise

    return released


def display_path(file: Path) -> str:
    """A file as messages name it: relative to the working directory when it is below it."""
    try:
        return str(file.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(file)


def show(value: Any, limit: int = 300) -> str:
    """A value as an error message quotes it: JSON (what a policy author wrote), cut at `limit` characters."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class PolicyLoadError(RegokiteError):
    """A bundle could not be loaded: syntax error, bad data file, conflicting data."""

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        source_line: str | None = None,
        *,
        also: tuple[str, ...] = (),
    ) -> None:
        self.message = message
        self.location = location
        self.source_line = source_line
        self.also = also  # further problems of the same load, each "file:line:col: message"
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.location}: {self.message}" if self.location else self.message
        if self.source_line is not None and self.location is not None:
            caret = " " * max(self.location.col - 1, 0) + "^"
            head = f"{head}\n    {self.source_line}\n    {caret}"
        return "".join([head, *(f"\n{line}" for line in self.also)])


class EvaluationError(RegokiteError):
    """Evaluating a query failed (runtime error, engine panic, bad query)."""

    def __init__(self, query: str, message: str, location: Location | None = None) -> None:
        self.query = query
        self.message = message
        self.location = location
        where = f" at {location}" if location else ""
        super().__init__(f"evaluating {query}: {message}{where}")


class EvaluationRefused(EvaluationError):
    """The engine cannot answer as OPA would (a Refusal of the embedded engine's) or has not the data
    to: never the policy's own error, which OPA raises too (Gatekeeper makes that one a violation)."""


class EngineUnavailable(RegokiteError):
    """The engine cannot be reached (sidecar OPA down) or lost its state."""


def engine_diagnostic(text: str) -> tuple[str, Location | None]:
    """Split a regorus error text into its message and location.

    regorus formats errors like rustc (`--> file:line:col`, a source excerpt,
    `error: message`) and appends a Rust backtrace when RUST_BACKTRACE is set.
    """
    text = text.split("Stack backtrace:", 1)[0].strip()
    loc_match = _LOCATION.search(text)
    msg_match = _MESSAGE.search(text)
    message = msg_match.group("msg").strip() if msg_match else text.splitlines()[0] if text else ""
    if loc_match is None:
        return message or "unknown engine error", None
    location = Location(loc_match["file"].strip(), int(loc_match["line"]), int(loc_match["col"]))
    return message, location
