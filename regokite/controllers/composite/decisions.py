"""CompositeController decisions, pure: the parent's selector and claiming (adopt, own, release).

The runtime (`runner`) gathers observed objects from its caches, calls these
functions and carries out what they return; the `plan` command calls the same
functions on files. Nothing here does I/O. The desired children and the diff
are `controllers.children`'s, shared with decorators.

Claiming follows Kubernetes' ControllerRef rules as Metacontroller applies
them: a child whose controller is this parent and that matches the parent's
selector is owned; one that stopped matching is released; an ownerless one
that matches is adopted (unless the parent is being deleted); children of
other controllers are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from regokite.controllers.children import CONTROLLER_UID_LABEL
from regokite.controllers.definitions import CompositeController
from regokite.resources import controller_ref
from regokite.selectors import Selector, SelectorError, parse_selector


def parent_selector(definition: CompositeController, parent: Mapping[str, Any]) -> Selector:
    """generateSelector: `controller-uid=<parent uid>`; otherwise the parent's `spec.selector`."""
    if definition.generate_selector:
        return Selector(((CONTROLLER_UID_LABEL, parent["metadata"]["uid"]),))
    selector = (parent.get("spec") or {}).get("selector")
    if selector is None:
        raise SelectorError("the parent has no spec.selector (and the controller does not set generateSelector)")
    parsed = parse_selector(selector)
    if parsed.empty:
        raise SelectorError("spec.selector is empty: it would claim every object in the namespace")
    return parsed


@dataclass
class Claims:
    owned: list[dict[str, Any]] = field(default_factory=list)
    adopt: list[dict[str, Any]] = field(default_factory=list)
    release: list[dict[str, Any]] = field(default_factory=list)


def claim(parent: Mapping[str, Any], selector: Selector, candidates: Iterable[Mapping[str, Any]]) -> Claims:
    """Sort candidate children into owned, to adopt and to release."""
    uid = parent["metadata"]["uid"]
    deleting = bool(parent["metadata"].get("deletionTimestamp"))
    claims = Claims()
    for obj in candidates:
        meta = obj.get("metadata") or {}
        ref = controller_ref(obj)
        matches = selector.matches(meta.get("labels"))
        if ref is not None:
            if ref.get("uid") != uid:
                continue  # another controller's child
            if matches or deleting:
                claims.owned.append(obj)
            else:
                claims.release.append(obj)
        elif matches and not deleting and not meta.get("deletionTimestamp"):
            claims.adopt.append(obj)
    return claims
