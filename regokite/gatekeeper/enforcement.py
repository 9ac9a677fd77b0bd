"""Gatekeeper's enforcement actions at its enforcement points.

A constraint's `spec.enforcementAction` (`deny` when absent, `dryrun`,
`warn`) is taken at every enforcement point. `scoped` takes
`spec.scopedEnforcementActions` instead: each entry's action is taken at the
points it names (`*`: every point), and a point that no entry names does not
apply the constraint at all. regokite's processes are Gatekeeper's points:
the admission server is `validation.gatekeeper.sh`, `regokite audit`
`audit.gatekeeper.sh`, `regokite check` and `regokite verify`
`gator.gatekeeper.sh`.

Gatekeeper's constraint controller refuses a constraint whose action (or
scoped action, or point) it does not know: it is neither enforced by the
webhook nor audited, and its status says why (the controller's message,
kept here word for word). gator does not validate actions: it reports such a
constraint's violations under that action, and only `deny` fails a run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from regokite.structural.field_errors import go_quote

WEBHOOK = "validation.gatekeeper.sh"
AUDIT = "audit.gatekeeper.sh"
GATOR = "gator.gatekeeper.sh"
VAP = "vap.k8s.io"
ALL_POINTS = "*"
SUPPORTED_POINTS = (WEBHOOK, AUDIT, GATOR, VAP)
ACTIONS = ("deny", "dryrun", "warn")  # what a scoped entry may take
SCOPED = "scoped"
POINT_OF_PROCESS = {"webhook": WEBHOOK, "audit": AUDIT, "gator": GATOR}
NOT_VALIDATED = "could not validate enforcement actions"  # the controller's status prefix


@dataclass(frozen=True)
class Enforcement:
    """What a constraint does on a violation, at each enforcement point."""

    action: str = "deny"  # spec.enforcementAction as written
    scoped: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (action, points) of each scoped entry
    refused: str | None = None  # why Gatekeeper's controller refuses it: neither webhook nor audit apply it

    def at(self, point: str) -> tuple[str, ...]:
        """The actions taken at `point` (sorted; several for a scoped constraint that names the point
        in several entries); none: the constraint is not applied there."""
        if self.refused is not None and point != GATOR:
            return ()
        if self.action != SCOPED:
            return (self.action,)
        return tuple(sorted({a for a, points in self.scoped if point in points or ALL_POINTS in points}))

    def logged_actions(self, point: str) -> list[str]:
        """`constraint_enforcement_actions` of Gatekeeper's violation lines: a scoped constraint's
        actions at the point, else none."""
        return list(self.at(point)) if self.action == SCOPED else []


class EnforcementError(ValueError):
    """scopedEnforcementActions that gator cannot read either (not a list of entries)."""


def read_enforcement(spec: dict[str, Any]) -> Enforcement:
    """A constraint's enforcement from its spec; EnforcementError when `scoped` comes without a list
    of entries (gator refuses that constraint too), `refused` when the controller would refuse it."""
    action = spec.get("enforcementAction")
    action = "deny" if action in (None, "") else action
    if not isinstance(action, str):
        raise EnforcementError("spec.enforcementAction must be a string")
    if action != SCOPED:
        refused = None if action in ACTIONS else unrecognized_action(action)
        return Enforcement(action, (), refused)
    entries = spec.get("scopedEnforcementActions")
    if entries is None:
        raise EnforcementError("missing required field: spec.scopedEnforcementActions must be defined")
    scoped = _scoped_entries(entries)
    return Enforcement(action, scoped, _scoped_refusal(scoped))


def _scoped_entries(entries: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    shape = "scopedEnforcementActions value must be a [{action: string, enforcementPoints: [{name: string}]}]"
    if not isinstance(entries, list):
        raise EnforcementError(shape)
    found = []
    for entry in entries:
        points = entry.get("enforcementPoints") if isinstance(entry, dict) else None
        action = entry.get("action", "") if isinstance(entry, dict) else None
        if not isinstance(action, str) or not isinstance(points, list | None):
            raise EnforcementError(shape)
        names = [p.get("name", "") if isinstance(p, dict) else None for p in points or []]
        if not all(isinstance(n, str) for n in names):
            raise EnforcementError(shape)
        found.append((action, tuple(names)))
    return tuple(found)  # type: ignore[arg-type]


def _scoped_refusal(scoped: Sequence[tuple[str, tuple[str, ...]]]) -> str | None:
    """Gatekeeper's ValidateScopedEnforcementAction: unknown points, then unknown actions."""
    points: list[str] = []
    actions: list[str] = []
    for action, names in scoped:
        if action not in ACTIONS:
            actions.append(action)
        if not names:
            points.append("")
        points += [n for n in names if n not in (*SUPPORTED_POINTS, ALL_POINTS)]
    errors = []
    if points:
        errors.append(
            f"unrecognized enforcement points: constraint will not be enforced for enforcement points"
            f" {go_list(points)}, supported enforcement points are {go_list(SUPPORTED_POINTS)}"
        )
    if actions:
        errors.append(
            f"unrecognized enforcementAction: {go_list(actions)} is not within the supported list {go_list(ACTIONS)}"
        )
    return "\n".join(errors) or None


def unrecognized_action(action: str) -> str:
    """Gatekeeper's message for an enforcementAction it does not know."""
    return (
        f"unrecognized enforcementAction: {go_quote(action)} is not within the supported list"
        f" {go_list((*ACTIONS, SCOPED))}"
    )


def go_list(values: Sequence[str]) -> str:
    """A []string as Go's %v prints it."""
    return "[" + " ".join(values) + "]"
