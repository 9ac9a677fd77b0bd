"""OPA's default (not strict) builtin errors on the embedded engine: a builtin's error makes its call
undefined (OPA's topdown records it and goes on; `opa eval`, `opa test`, the REST API without
`strict-builtin-errors` and Gatekeeper evaluate so). regorus has no such switch, so the errors are
found one call at a time: an evaluation that errs at a place is run again on an engine where the
builtin calls written there answer undefined when they err, until it answers or errs where no
builtin call can be made lenient. Calls that never err answer as before. A Refusal (an answer this
engine cannot give as OPA) stays an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from regokite.bundle import Bundle
from regokite.engine import UNDEFINED, Engine, EngineSettings, open_engine
from regokite.errors import EvaluationError, Location

T = TypeVar("T")

# errors regorus raises at evaluation that OPA's compiler raises before any (a call with the wrong
# number of operands, an unsafe variable): never a builtin's error, so never undefined
_COMPILE_ERROR = re.compile(r"`[\w.]+` expects \d+ arguments?|is unsafe|unknown function|undefined function")


class Lenient:
    """An engine's evaluate and query with builtin errors undefined, as OPA without strict errors."""

    ROUNDS = 32

    def __init__(
        self,
        bundle: Bundle,
        settings: EngineSettings,
        strict: Engine | None = None,
        retrying: Callable[[], None] = lambda: None,
    ) -> None:
        """`retrying` is called before an evaluation runs again (`regokite test` drops what it printed)."""
        self._bundle, self._settings = bundle, settings
        self._engine = strict or open_engine(bundle, settings)
        self._at: frozenset[Location] = frozenset()
        self._retrying = retrying

    def evaluate(self, ref: str, input: Any = UNDEFINED) -> Any:
        return self._retried(lambda engine: engine.evaluate(ref, input))

    def query(self, query: str, input: Any = UNDEFINED) -> list[dict[str, Any]]:
        return self._retried(lambda engine: engine.query(query, input))

    def close(self) -> None:
        self._engine.close()

    def _retried(self, evaluation: Callable[[Engine], T]) -> T:
        for _ in range(self.ROUNDS):
            try:
                return evaluation(self._engine)
            except EvaluationError as exc:
                where = exc.location
                if where is None or where in self._at or _COMPILE_ERROR.search(exc.message):
                    raise
            self._at = self._at | {where}
            self._engine.close()
            self._engine = open_engine(self._bundle, self._settings, lenient=self._at)
            self._retrying()
        return evaluation(self._engine)
