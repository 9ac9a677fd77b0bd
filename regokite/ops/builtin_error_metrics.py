"""The builtin errors policies' evaluations made undefined (engine.builtin_errors), counted for /metrics.

Every server's metrics module imports this, so each server process exports the counter for what its
own evaluations met: a policy that silently stopped denying shows as a rising count.
"""

from __future__ import annotations

from prometheus_client import Counter

from regokite.engine import builtin_errors

builtin_errors_undefined = Counter(
    "regokite_policy_builtin_errors_total",
    "Builtin calls that erred and were made undefined, as OPA's default evaluation does "
    "(--strict-builtin-errors makes them errors): one per call's place and evaluation, by the policy's "
    "package and the call's file:line:col.",
    ["policy", "place"],
)


def _count(call: builtin_errors.UndefinedCall) -> None:
    builtin_errors_undefined.labels(call.policy, call.place).inc()


builtin_errors.listen(_count)
