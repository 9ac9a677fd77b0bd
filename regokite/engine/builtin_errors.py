"""Builtin errors made undefined, as OPA's default evaluation makes them (`strict-builtin-errors` off),
reported so that a policy that silently stopped denying is seen.

OPA's topdown records a builtin's error and goes on with the call undefined; so do the engines here
unless told `strict_builtin_errors`. Each such error an evaluation meets is reported once per place
and evaluation: a log line on `regokite.policy.builtin_error` (the place's file:line:col, its
package, the builtin, the error, the log context such as the review's uid), at most one a minute per
place with the count of those left out, and to every listener (the servers count them in Prometheus,
`ops`). Nothing here imports a metrics library: the engines stay free of the servers' wiring.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from regokite.ops import logging as ops_logging

# errors regorus raises at evaluation that OPA's compiler raises before any (a call with the wrong
# number of operands, an unsafe variable, an unknown function): never a builtin's error
COMPILE_ERROR = re.compile(r"`[\w.]+` expects \d+ arguments?|is unsafe|unknown function|undefined function")

LOG_EVERY = 60.0  # seconds between two log lines of one place

log = logging.getLogger("regokite.policy.builtin_error")


@dataclass(frozen=True)
class UndefinedCall:
    """A builtin call that erred and was made undefined in one evaluation."""

    place: str  # the call's file:line:col as written ("" where the engine gave none)
    policy: str  # the package of the module holding the call
    builtin: str  # the builtin's name ("" where it is not known)
    message: str  # its error


Listener = Callable[[UndefinedCall], None]
_listeners: list[Listener] = []
_lock = threading.Lock()
_logged: dict[str, tuple[float, int]] = {}  # place -> (when last logged, calls left out since)


def listen(listener: Listener) -> None:
    """Hear every undefined call of this process (a server's Prometheus counter)."""
    with _lock:
        if listener not in _listeners:
            _listeners.append(listener)


def unlisten(listener: Listener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def report(call: UndefinedCall) -> None:
    """Log `call` (at most once a minute per place) and tell the listeners."""
    now = time.monotonic()
    with _lock:
        last, left_out = _logged.get(call.place, (None, 0))
        due = last is None or now - last >= LOG_EVERY
        _logged[call.place] = (now, 0) if due else (last, left_out + 1)
        listeners = list(_listeners)
    if due:
        log.warning(
            "builtin error: the call is undefined",
            extra={
                **ops_logging.context(),
                "policy": call.policy,
                "location": call.place,
                "builtin": call.builtin,
                "error": call.message,
                "left_out": left_out,  # lines of this place not logged since the last one
            },
        )
    for listener in listeners:
        listener(call)


# The builtin errors the calls made lenient turned into undefined on this thread since it last drained
# them (extensions' lenient call adds them: regorus calls it on the evaluating thread).
_swallowed = threading.local()


def swallowed(builtin: str, message: str) -> None:
    """A lenient call of `builtin` erred with `message` and answered undefined."""
    found = getattr(_swallowed, "calls", None)
    if found is None:
        found = _swallowed.calls = []
    found.append((builtin, message))


def drain() -> list[tuple[str, str]]:
    """The (builtin, message) pairs `swallowed` since the last drain on this thread."""
    found = getattr(_swallowed, "calls", None) or []
    _swallowed.calls = []
    return found
