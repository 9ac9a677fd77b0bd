"""A Constraint's audit status, as Gatekeeper's audit writes it: pure, no I/O.

Gatekeeper's audit puts on each Constraint `status.auditTimestamp`,
`status.totalViolations` and `status.violations[]` (each `enforcementAction`,
`group`, `version`, `kind`, `namespace`, `name`, `message` cut at 256 characters), the list capped
by `--constraint-violations-limit` (default 20) while the total counts all.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from regokite.gatekeeper.violations import rfc3339, scoped_actions, truncate

DEFAULT_VIOLATIONS_LIMIT = 20


def violation(subject: Any, message: str, enforcement: str, scoped: tuple[str, ...] = ()) -> dict[str, Any]:
    """One `status.violations[]` entry for an audited object (an audit.scan.Subject); a scoped
    constraint's also lists the actions taken at audit (`enforcementActions`), as Gatekeeper's."""
    group, _, version = subject.api_version.rpartition("/")
    entry: dict[str, Any] = {
        "enforcementAction": enforcement,
        "group": group,
        "version": version,
        "kind": subject.kind,
        "name": subject.name,
        "message": truncate(message),
    }
    if subject.namespace:
        entry["namespace"] = subject.namespace
    if scoped:
        entry["enforcementActions"] = list(scoped)
    return entry


def constraint_statuses(
    constraints: Iterable[str],
    findings: Iterable[tuple[Any, Iterable[Any]]],
    *,
    limit: int = DEFAULT_VIOLATIONS_LIMIT,
    now: dt.datetime | None = None,
) -> dict[str, dict[str, Any]]:
    """The status of each named constraint from the audit's findings ((subject, results) pairs):
    every fail or warn result of a constraint is one violation (dryrun and warn ones too)."""
    stamp = rfc3339(now or dt.datetime.now(dt.UTC))
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in constraints}
    for subject, results in findings:
        for r in results:
            if r.policy in found and r.result in ("fail", "warn"):
                scoped = scoped_actions(r.enforcement, r.actions)
                found[r.policy].append(violation(subject, r.message, r.enforcement, scoped))
    return {name: status(entries, limit, stamp) for name, entries in found.items()}


def status(entries: list[dict[str, Any]], limit: int, stamp: str) -> dict[str, Any]:
    ordered = sorted(entries, key=lambda v: (v.get("namespace", ""), v["kind"], v["name"], v["message"]))
    return {"auditTimestamp": stamp, "totalViolations": len(entries), "violations": ordered[: max(0, limit)]}


def same_findings(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a status says the same but for its timestamp (no write needed between passes)."""
    if not old:
        return False
    return {k: v for k, v in old.items() if k != "auditTimestamp"} == {
        k: v for k, v in new.items() if k != "auditTimestamp"
    }
