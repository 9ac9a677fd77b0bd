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


def generation_unobserved(child: Mapping[str, Any]) -> bool:
    """Beyond Metacontroller (which asks it of RollingInPlace children only): the child's status
    reports an `observedGeneration` that is not its current generation (a status written before the
    update does not count)."""
    observed = (child.get("status") or {}).get("observedGeneration")
    generation = (child.get("metadata") or {}).get("generation")
    return observed is not None and generation is not None and observed != generation


def status_check_failure(child: Mapping[str, Any], checks: Mapping[str, Any] | None) -> str | None:
    """Why `child` fails the type's `statusChecks`, in Metacontroller's words; None when it passes."""
    status = child.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
    for check in (checks or {}).get("conditions") or ():
        kind = check.get("type")
        cond = conditions.get(kind)
        if cond is None:
            return f"required condition type missing: {json.dumps(kind)}"
        for key in ("status", "reason"):
            if check.get(key) is not None and cond.get(key) != check[key]:
                have, want = json.dumps(cond.get(key) or ""), json.dumps(check[key])
                return f"{json.dumps(kind)} condition {key} is {have} (want {want})"
    return None


def passes_status_checks(child: Mapping[str, Any] | None, checks: Mapping[str, Any] | None) -> bool:
    """Every condition check holds on `child`, and its status has observed its generation."""
    return child is not None and not generation_unobserved(child) and status_check_failure(child, checks) is None


# ------------------------------------------------------------------- the rollout


@dataclass
class RolloutPlan:
    latest: Revision
    revisions: list[Revision]
    assignment: dict[ChildId, str]  # child -> revision name
    moved: ChildId | None = None
    paused_by: ChildId | None = None
    waiting: str | None = None  # why a child due to move did not (Metacontroller's RolloutWaiting message)
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
    not_updated: Iterable[ChildId] = (),
) -> RolloutPlan:
    """Decide revisions and at most one child to move to the latest revision.

    `observed` are the rolling children that exist; `desired_latest` the rolling children the
    latest revision wants, in the order the hook returned them (the order children move in, as
    Metacontroller moves them); `checks` the status checks per `Kind.group`; `out_of_date` the
    children at an older revision whose desired state differs from the latest one; `not_updated`
    the observed children that do not yet show the state last desired for them (a cache behind
    the child's update, or the update not made yet).
    """
    desired_latest = list(desired_latest)
    out_of_date = set(out_of_date)
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
    # Gate (Metacontroller's shouldContinueRolling): every child already at the latest revision
    # must exist, show its latest desired state and pass its checks.
    others = any(r != latest.name for r in plan.assignment.values())
    stale_ids = set(not_updated)
    for child in sorted(c for c, r in plan.assignment.items() if r == latest.name):
        why = _not_happy(child, observed.get(child), checks.get(child[0]), child in stale_ids, others)
        if why is not None:
            plan.paused_by = child
            plan.waiting = why
            break
    order = [c for c in desired_latest if c in out_of_date] + sorted(out_of_date - set(desired_latest))
    stale = [c for c in order if plan.assignment.get(c) not in (None, latest.name)]
    if plan.paused_by is None and stale:
        plan.moved = stale[0]
        plan.assignment[plan.moved] = latest.name
    if not stale:
        plan.waiting = None
    # Children of older revisions that are identical to the latest move without a rollout step.
    for child, rev in list(plan.assignment.items()):
        if rev != latest.name and child not in out_of_date:
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


def _not_happy(
    child: ChildId, obj: Mapping[str, Any] | None, checks: Mapping[str, Any] | None, stale: bool, others: bool
) -> str | None:
    """Why a child at the latest revision holds the rollout back, in Metacontroller's words; None
    when it does not. A missing child holds it back only while children remain elsewhere."""
    kind, name = child[0].split(".", 1)[0], child[1]
    if obj is None:
        return f"missing child {kind} {name}" if others else None
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return f"child {kind} {name} is being deleted"
    if stale:
        return f"child {kind} {name} is not updated yet"
    if generation_unobserved(obj):
        return f"child {kind} {name} hasn't observed latest spec"
    failure = status_check_failure(obj, checks)
    return None if failure is None else f"child {kind} {name} failed status check: {failure}"


def updated_condition(plan: RolloutPlan) -> dict[str, str]:
    """The parent's `Updated` condition for this sync, as Metacontroller sets it on a rolling
    controller's status: progressing (a child moved), waiting (one is due but held back), or done."""
    if plan.moved is not None:
        kind = plan.moved[0].split(".", 1)[0]
        return _condition("False", "RolloutProgressing", f"updating {kind} {plan.moved[1]}")
    if plan.waiting is not None:
        return _condition("False", "RolloutWaiting", plan.waiting)
    return _condition("True", "OnLatestRevision", f"latest ControllerRevision: {plan.latest.name}")


def _condition(status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": "Updated", "status": status, "reason": reason, "message": message}


def with_condition(status: Mapping[str, Any] | None, condition: Mapping[str, Any]) -> dict[str, Any]:
    """`status` with `condition` in place of the one of its type (or appended), as Metacontroller's
    SetCondition writes it over the hook's status; a `conditions` that is not a list is an error."""
    new = dict(status or {})
    conditions = new.get("conditions")
    if conditions is None:
        conditions = []
    if not isinstance(conditions, list):
        raise ValueError("status.conditions is not a list: the rollout's Updated condition cannot be set")
    kept = list(conditions)
    for i, cond in enumerate(kept):
        if isinstance(cond, Mapping) and cond.get("type") == condition["type"]:
            kept[i] = dict(condition)
            break
    else:
        kept.append(dict(condition))
    new["conditions"] = kept
    return new
