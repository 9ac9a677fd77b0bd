"""opa.runtime() as OPA answers it where no runtime is configured, as in Gatekeeper: `{}`.

regorus answered its own description (its builtins' names), which no OPA does: OPA's server
answers its environment, configuration and version, and Gatekeeper's driver, like OPA's own test
runner, configures no runtime, so there `opa.runtime()` is an empty object. regokite's engines
answer Gatekeeper's, so no environment variable reaches a policy.
"""

from __future__ import annotations

from collections.abc import Callable


def runtime() -> dict[str, object]:
    return {}


BUILTINS: dict[str, tuple[int, Callable[..., object]]] = {"opa.runtime": (0, runtime)}
