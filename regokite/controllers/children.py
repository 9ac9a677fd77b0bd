"""The children one sync writes, pure, shared by CompositeControllers and DecoratorControllers (as
Metacontroller's common/manage_children): each desired child decorated (owner reference, selector
label, content hash), the diff against the observed children as `Action`s, the take-over of a child
Metacontroller applied, and the parent's new status.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from regokite.controllers.definitions import CompositeController
from regokite.resources import Action, ChildType, owner_reference

CONTROLLER_UID_LABEL = "controller-uid"
HASH_ANNOTATION = "regokite.dev/applied-hash"
# what Metacontroller's client-side apply remembers on each child (as kubectl's annotation does)
METACONTROLLER_LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"


def content_hash(obj: Mapping[str, Any]) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def decorate_child(
    definition: CompositeController, parent: Mapping[str, Any], child: Mapping[str, Any]
) -> dict[str, Any]:
    """What regokite applies: the policy's child plus owner reference, selector label and hash
    (a decorator's attachments are also annotated with the decorator that made them)."""
    meta = dict(child["metadata"])
    if definition.child_annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **definition.child_annotations}
        child = {**child, "metadata": meta}
    annotations = dict(meta.get("annotations") or {})
    annotations[HASH_ANNOTATION] = content_hash(child)
    meta = {**meta, "annotations": annotations}
    if definition.generate_selector:
        meta["labels"] = {**(meta.get("labels") or {}), CONTROLLER_UID_LABEL: parent["metadata"]["uid"]}
    ours = owner_reference(parent)
    refs = [r for r in meta.get("ownerReferences") or () if r.get("uid") != ours["uid"] and not r.get("controller")]
    meta["ownerReferences"] = [*refs, ours]
    return {**child, "metadata": meta}


def is_subset(desired: Any, observed: Any) -> bool:
    """Every field the policy sets has that value in the observed object (apply semantics)."""
    if isinstance(desired, dict):
        if not isinstance(observed, dict):
            return False
        return all(is_subset(v, observed.get(k)) for k, v in desired.items() if not (v is None and k not in observed))
    if isinstance(desired, list):
        if not isinstance(observed, list) or len(desired) != len(observed):
            return False
        return all(is_subset(d, o) for d, o in zip(desired, observed, strict=True))
    if isinstance(desired, bool) or isinstance(observed, bool):
        return desired is observed
    return desired == observed


def child_id(obj: Mapping[str, Any]) -> tuple[str | None, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace"), meta.get("name", "")


def plan_children(
    definition: CompositeController,
    parent: Mapping[str, Any],
    types: Sequence[ChildType],
    observed: Mapping[str, Sequence[Mapping[str, Any]]],
    desired: Sequence[Mapping[str, Any]],
) -> list[Action]:
    """Writes that make the owned children (`observed`, by type key) match `desired`."""
    actions: list[Action] = []
    by_key = {t.key: t for t in types}
    rules = {t.key: definition.child_rule(t.api_version, t.resource) for t in types}
    wanted: dict[str, dict[tuple[str | None, str], dict[str, Any]]] = {t.key: {} for t in types}
    for child in desired:
        key = f"{child['kind']}.{child['apiVersion']}"
        wanted[key][child_id(child)] = decorate_child(definition, parent, child)
    for key, t in by_key.items():
        have = {child_id(o): o for o in observed.get(key, ())}
        method = rules[key].update_method if rules[key] else "OnDelete"
        for ident, body in wanted[key].items():
            current = have.get(ident)
            if current is None:
                actions.append(Action("create", t, ident[0], ident[1], body))
                continue
            if current["metadata"].get("deletionTimestamp") or method == "OnDelete":
                continue
            new_hash = body["metadata"]["annotations"][HASH_ANNOTATION]
            old_hash = ((current["metadata"].get("annotations")) or {}).get(HASH_ANNOTATION)
            if old_hash is None:  # never applied by regokite: created by Metacontroller (or adopted)
                actions.append(take_over(t, ident, body, current, recreate=method in ("Recreate", "RollingRecreate")))
                continue
            if method in ("Recreate", "RollingRecreate"):  # rolling: composite.rolling_runner picks what differs
                if new_hash != old_hash:
                    actions.append(
                        Action("recreate", t, ident[0], ident[1], body, current["metadata"].get("uid"), "changed")
                    )
            elif new_hash != old_hash or not is_subset(body, current):
                actions.append(Action("update", t, ident[0], ident[1], body, reason="changed"))
        for ident, current in have.items():
            if ident not in wanted[key] and not current["metadata"].get("deletionTimestamp"):
                actions.append(Action("delete", t, ident[0], ident[1], uid=current["metadata"].get("uid")))
    return actions


def take_over(
    t: ChildType, ident: tuple[str | None, str], body: dict[str, Any], current: Mapping[str, Any], *, recreate: bool
) -> Action:
    """The first write to a child regokite did not create, as Metacontroller would make it on switch-over.

    Metacontroller applies client-side, remembering what it applied in an annotation, and removes
    what it applied before but the hook no longer returns (a three-way merge). Taking over, regokite
    applies (server-side, taking the fields) and then removes, in one merge patch, those fields and the
    annotation. A Recreate child is recreated only if it differs from the desired state, as
    Metacontroller would have done; an unchanged one is kept (same uid) and applied in place."""
    annotations = (current["metadata"].get("annotations")) or {}
    stale: dict[str, Any] = {}
    if METACONTROLLER_LAST_APPLIED in annotations:
        try:
            last = json.loads(annotations[METACONTROLLER_LAST_APPLIED])
        except ValueError:
            last = {}
        stale = removed_fields(last, body) if isinstance(last, dict) else {}
    metadata = body["metadata"]
    compare = {**body, "metadata": {**metadata, "annotations": _without(metadata["annotations"], HASH_ANNOTATION)}}
    same = is_subset(compare, current) and not stale
    cleanup = None
    if METACONTROLLER_LAST_APPLIED in annotations:
        cleanup = {**stale, "metadata": {**stale.get("metadata", {})}}
        cleanup["metadata"]["annotations"] = {
            **cleanup["metadata"].get("annotations", {}),
            METACONTROLLER_LAST_APPLIED: None,
        }
    if recreate and not same:
        return Action("recreate", t, ident[0], ident[1], body, current["metadata"].get("uid"), "changed")
    reason = "taken over" if same else "taken over, changed"
    return Action("update", t, ident[0], ident[1], body, reason=reason, cleanup=cleanup)


def _without(mapping: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


def removed_fields(last: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch nulling the map keys `last` set that `desired` does not (lists are replaced whole
    by the apply, so only maps need it)."""
    patch: dict[str, Any] = {}
    for key, value in last.items():
        if key not in desired:
            patch[key] = None
        elif (
            isinstance(value, dict)
            and isinstance(desired[key], dict)
            and (inner := removed_fields(value, desired[key]))
        ):
            patch[key] = inner
    return patch


def desired_status(parent: Mapping[str, Any], status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The parent's new status (the hook's, plus observedGeneration), or None when unchanged."""
    new = dict(status or {})
    generation = parent["metadata"].get("generation")
    if generation is not None:
        new["observedGeneration"] = generation
    return None if new == (parent.get("status") or {}) else new
