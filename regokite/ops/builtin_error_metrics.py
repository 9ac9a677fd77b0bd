"""The builtin errors policies' evaluations made undefined (engine.builtin_errors), counted for /metrics.

Every server's metrics module imports this, so each server process exports the counter; the servers
that evaluate policies (admission app, audit run, controller process, hook workers, regokite hooks)
register `count` with engine.builtin_errors, whose reports it counts: a policy that silently stopped
denying shows as a rising count. Nothing here imports the engine (ops/ is below it, tests/test_layers.py).
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import Counter

builtin_errors_undefined = Counter(
    "regokite_policy_builtin_errors_total",
    "Builtin calls that erred and were made undefined, as OPA's default evaluation does "
    "(--strict-builtin-errors makes them errors): one per call's place and evaluation, by the policy's "
    "package and the call's file:line:col.",
    ["policy", "place"],
)


class UndefinedCall(Protocol):
    """What is counted of engine.builtin_errors.UndefinedCall."""

    policy: str  # the package of the module holding the call
    place: str  # the call's file:line:col


def count(call: UndefinedCall) -> None:
    """A listener of engine.builtin_errors: one more undefined call at `call`'s place."""
    builtin_errors_undefined.labels(call.policy, call.place).inc()
