"""Gatekeeper's `--log-denies` lines and `--emit-admission-events` Events for each review's violations."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from regokite.admission.decide import Decision
from regokite.admission.policies import PolicySet
from regokite.admission.review import Review
from regokite.gatekeeper.violations import admission_violations, events
from regokite.ops.logging import NAMED_FIELDS

log = logging.getLogger("regokite.admission.violations")


class ViolationReporter:
    """Logs and/or records every constraint violation of a review, as Gatekeeper's webhook does."""

    def __init__(
        self,
        *,
        log_denies: bool,
        events: Callable[[Mapping[str, Any]], None] | None,
        home: str,
        involved_namespace: bool = False,
    ) -> None:
        self.log_denies, self.events, self.home, self.involved = log_denies, events, home, involved_namespace
        self._constraints: tuple[int, dict[str, str]] = (0, {})

    def __call__(self, review: Review, decision: Decision, policy_set: PolicySet) -> None:
        for v in admission_violations(review.request, self._of(policy_set), decision.outcomes):
            if self.log_denies:
                log.info(f"denied admission: {v.message}", extra={NAMED_FIELDS: v.fields("admission")})
            if self.events is not None:
                for e in events(v, "admission", self.home, self.involved):
                    self.events(e)

    def _of(self, policy_set: PolicySet) -> dict[str, str]:
        """Constraint name -> kind, computed once per policy set."""
        if self._constraints[0] != id(policy_set):
            found = {p.name: p.constraint_kind for p in policy_set.policies if p.constraint_kind}
            self._constraints = (id(policy_set), found)
        return self._constraints[1]
