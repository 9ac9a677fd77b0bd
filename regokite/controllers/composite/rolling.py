"""Rolling updates (RollingRecreate, RollingInPlace), pure: revisions, status checks, the next step.

As Metacontroller does, the parent's `revisionHistory.fieldPaths` (default
`spec`) are snapshotted into revisions; every rolling child belongs to one
revision and is kept at the desired state the sync hook gives for the parent
as it was at that revision. A rollout moves one child at a time to the
latest revision, and only while every child already at the latest revision
passes the type's `statusChecks`; the move is recorded before the child is
touched, so progress survives restarts.

Revisions are stored as `apps/v1` ControllerRevisions owned by the parent
(Metacontroller has its own `metacontroller.k8s.io` ControllerRevision kind):
`data.parentPatch` holds the snapshot, and the children at that revision are
kept in the annotation `regokite.dev/revision-children` in Metacontroller's
shape (`[{apiGroup, kind, names}]`), because a ControllerRevision's data is
immutable.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from regokite.controllers.children import content_hash

ROLLING_METHODS = ("RollingRecreate", "RollingInPlace")
CHILDREN_ANNOTATION = "regokite.dev/revision-children"
CONTROLLER_LABEL = "regokite.dev/controller"

ChildId = tuple[str, str]  # ("Kind.group", name) -- names only: rolling children share the parent's namespace


def group_kind(kind: str, api_version: str) -> str:
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    return f"{kind}.{group}"


# --------------------------------------------------------------------- snapshots


def _get(obj: Any, path: Sequence[str]) -> tuple[bool, Any]:
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return False, None
        obj = obj[part]
    return True, obj


def parent_patch(parent: Mapping[str, Any], field_paths: Iterable[str]) -> dict[str, Any]:
    """The parent's values at `field_paths` (e.g. `spec.template`), nested as in the parent."""
    patch: dict[str, Any] = {}
    for fp in field_paths:
        parts = fp.split(".")
        found, value = _get(parent, parts)
        if not found:
            continue
        node = patch
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = copy.deepcopy(value)
    return patch


def patched_parent(parent: Mapping[str, Any], patch: Mapping[str, Any], field_paths: Iterable[str]) -> dict[str, Any]:
    """The parent as it was at a revision: each field path replaced by the patch's value (or removed)."""
    out = copy.deepcopy(dict(parent))
    for fp in field_paths:
        parts = fp.split(".")
        found, value = _get(patch, parts)
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                if not found:
                    node = None
                    break
                node[part] = {}
            node = node[part]
        if node is None:
            continue
        if found:
            node[parts[-1]] = copy.deepcopy(value)
        else:
            node.pop(parts[-1], None)
    return out


def revision_name(parent: Mapping[str, Any], patch: Mapping[str, Any]) -> str:
    name = parent["metadata"]["name"][:52]
    return f"{name}-{content_hash({'uid': parent['metadata'].get('uid'), 'patch': patch})[:10]}"


# ---------------------------------------------------------------------- revisions


@dataclass
class Revision:
    name: str
    patch: dict[str, Any]
    number: int
    children: set[ChildId] = field(default_factory=set)
    uid: str | None = None
    exists: bool = True

    def children_annotation(self) -> str:
        by_kind: dict[str, list[str]] = {}
        for gk, name in sorted(self.children):
            by_kind.setdefault(gk, []).append(name)
        entries = []
        for gk, names in sorted(by_kind.items()):
            kind, _, group = gk.partition(".")
            entries.append({"apiGroup": group, "kind": kind, "names": names})
        return json.dumps(entries, separators=(",", ":"))


def read_revision(obj: Mapping[str, Any]) -> Revision:
    meta = obj.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(CHILDREN_ANNOTATION) or "[]"
    try:
        entries = json.loads(raw)
    except ValueError:
        entries = []
    children = {
        (f"{e.get('kind')}.{e.get('apiGroup', '')}", n)
        for e in entries
        if isinstance(e, dict)
        for n in e.get("names") or ()
    }
    return Revision(
        name=meta.get("name", ""),
        patch=(obj.get("data") or {}).get("parentPatch") or {},
        number=int(obj.get("revision") or 0),
        children=children,
        uid=meta.get("uid"),
    )


def revision_object(
    controller: str, parent: Mapping[str, Any], owner_ref: Mapping[str, Any], rev: Revision
) -> dict[str, Any]:
    meta = parent["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": rev.name,
            "namespace": meta.get("namespace"),
            "labels": {CONTROLLER_LABEL: controller[:63]},
            "annotations": {CHILDREN_ANNOTATION: rev.children_annotation()},
            "ownerReferences": [dict(owner_ref)],
        },
        "data": {"parentPatch": rev.patch},
        "revision": rev.number,
    }


# ----------------------------------------------------------------- status checks


def passes_status_checks(child: Mapping[str, Any] | None, checks: Mapping[str, Any] | None) -> bool:
    """Every condition check holds on `child`. Beyond Metacontroller: when the child's status
    reports `observedGeneration`, it must be the child's current generation (a status written
    before the update does not count)."""
    if child is None:
        return False
    status = child.get("status") or {}
    observed = status.get("observedGeneration")
    generation = (child.get("metadata") or {}).get("generation")
    if observed is not None and generation is not None and observed != generation:
        return False
    conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
    for check in (checks or {}).get("conditions") or ():
        cond = conditions.get(check.get("type"))
        if cond is None:
            return False
        if check.get("status") is not None and cond.get("status") != check["status"]:
            return False
        if check.get("reason") is not None and cond.get("reason") != check["reason"]:
            return False
    return True


# ------------------------------------------------------------------- the rollout


@dataclass
class RolloutPlan:
    latest: Revision
    revisions: list[Revision]
    assignment: dict[ChildId, str]  # child -> revision name
    moved: ChildId | None = None
    paused_by: ChildId | None = None
    changed: set[str] = field(default_factory=set)  # revisions whose children changed (to write)
    obsolete: list[Revision] = field(default_factory=list)  # revisions with no children left (to delete)


def plan_rollout(
    latest_name: str,
    latest_patch: Mapping[str, Any],
    existing: Sequence[Revision],
    observed: Mapping[ChildId, Mapping[str, Any]],
    desired_latest: Iterable[ChildId],
    checks: Mapping[str, Mapping[str, Any] | None],
    out_of_date: Iterable[ChildId],
) -> RolloutPlan:
    """Decide revisions and at most one child to move to the latest revision.

    `observed` are the rolling children that exist; `desired_latest` the rolling children the
    latest revision wants; `checks` the status checks per `Kind.group`; `out_of_date` the
    children at an older revision whose desired state differs from the latest one.
    """
    revs = {r.name: Revision(r.name, r.patch, r.number, set(r.children), r.uid) for r in existing}
    latest = revs.get(latest_name)
    if latest is None:
        number = max((r.number for r in revs.values()), default=0) + 1
        latest = revs[latest_name] = Revision(latest_name, dict(latest_patch), number, exists=False)
    elif latest.number < max(r.number for r in revs.values()):
        latest.number = max(r.number for r in revs.values()) + 1  # rolled back to an earlier snapshot
    plan = RolloutPlan(latest=latest, revisions=list(revs.values()), assignment={})
    live = set(observed) | set(desired_latest)
    for rev in revs.values():
        for child in sorted(rev.children):
            if child in live and child not in plan.assignment:
                plan.assignment[child] = rev.name
    for child in sorted(live):  # new children (and ones no revision records) start at the latest
        if child not in plan.assignment:
            plan.assignment[child] = latest.name
    # Gate: every child already at the latest revision that exists must pass its checks,
    # and none may be missing (a RollingRecreate child between delete and create).
    at_latest = sorted(c for c, r in plan.assignment.items() if r == latest.name)
    for child in at_latest:
        if child in observed and observed[child].get("metadata", {}).get("deletionTimestamp"):
            plan.paused_by = child
            break
        if child in observed and not passes_status_checks(observed[child], checks.get(child[0])):
            plan.paused_by = child
            break
        if child not in observed and any(r != latest.name for r in plan.assignment.values()):
            plan.paused_by = child
            break
    stale = sorted(c for c in out_of_date if plan.assignment.get(c) not in (None, latest.name))
    if plan.paused_by is None and stale:
        plan.moved = stale[0]
        plan.assignment[plan.moved] = latest.name
    # Children of older revisions that are identical to the latest move without a rollout step.
    for child, rev in list(plan.assignment.items()):
        if rev != latest.name and child not in set(out_of_date):
            plan.assignment[child] = latest.name
    for rev in revs.values():
        now = {c for c, r in plan.assignment.items() if r == rev.name}
        if now != rev.children or not rev.exists:
            plan.changed.add(rev.name)
        rev.children = now
        if rev.name != latest.name and not now:
            plan.obsolete.append(rev)
    plan.changed -= {r.name for r in plan.obsolete}
    return plan
