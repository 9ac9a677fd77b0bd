"""opa.runtime() and trace() as OPA answers them where no runtime or tracer is configured, as in
Gatekeeper.

opa.runtime(): `{}`. regorus answered its own description (its builtins' names), which no OPA does:
OPA's server answers its environment, configuration and version, and Gatekeeper's driver, like
OPA's own test runner, configures no runtime, so there `opa.runtime()` is an empty object.
regokite's engines answer Gatekeeper's, so no environment variable reaches a policy.

trace(note): `true` (a note for OPA's tracer, which regokite has not); regorus's value was the note.
"""

from __future__ import annotations

from typing import Any

from regokite.engine.extensions.common import builtin, string_operand


@builtin("opa.runtime")
def runtime() -> dict[str, object]:
    return {}


@builtin("trace")
def trace(note: Any) -> bool:
    string_operand("trace", note, 1)
    return True
