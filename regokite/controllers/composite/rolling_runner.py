"""Rolling updates at run time: ControllerRevisions in the cluster, one child moved per sync.

`RollingUpdates.desired` turns the latest sync response into the children to
converge to: children still at an older revision keep the state the sync hook
gives for the parent at that revision (the hook is evaluated once per older
revision that still has children), and at most one child is moved to the
latest revision per sync, after every child already there passes its status
checks. Revision writes happen before the child is touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from regokite.controllers import children
from regokite.controllers.composite import rolling
from regokite.errors import HookError
from regokite.kube.actuator import Actuator
from regokite.kube.discovery import Discovery
from regokite.resources import owner_reference
from regokite.runtime.manager import Manager

log = logging.getLogger("regokite.controller")


class RollingUpdates:
    def __init__(self, runner: Any, *, manager: Manager, actuator: Actuator, discovery: Discovery) -> None:
        d = runner.definition
        self.definition = d
        self.controller = d.name
        self.field_paths = d.parent.revision_history_field_paths
        self.actuator = actuator
        self.types = [
            t
            for t in runner.child_types
            if (rule := d.child_rule(t.api_version, t.resource)) and rule.update_method in rolling.ROLLING_METHODS
        ]
        self.checks = {
            rolling.group_kind(t.kind, t.api_version): (d.child_rule(t.api_version, t.resource).status_checks)
            for t in self.types
        }
        if not runner.parent_type.namespaced:
            raise HookError(d.name, None, "rolling updates need a namespaced parent (revisions live beside it)")
        self.revision_type = discovery.resolve("apps/v1", "controllerrevisions")
        self.revisions = manager.informers.informer("apps/v1", "controllerrevisions", namespaced=True)

    def desired(
        self,
        parent: dict[str, Any],
        observed: Mapping[str, Sequence[Mapping[str, Any]]],
        latest_children: Sequence[dict[str, Any]],
        evaluate: Callable[[dict[str, Any]], Sequence[dict[str, Any]]],
    ) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The children to converge to, and the parent's `Updated` condition for this sync."""
        keys = {t.key for t in self.types}
        obs = {
            (rolling.group_kind(o["kind"], o["apiVersion"]), o["metadata"]["name"]): o
            for key in keys
            for o in observed.get(key, ())
        }
        latest_want = {
            (rolling.group_kind(c["kind"], c["apiVersion"]), c["metadata"]["name"]): c
            for c in latest_children
            if f"{c['kind']}.{c['apiVersion']}" in keys
        }
        uid = parent["metadata"]["uid"]
        existing = [
            rolling.read_revision(r)
            for r in self.revisions.owned_by(uid)
            if (r["metadata"].get("labels") or {}).get(rolling.CONTROLLER_LABEL) == self.controller[:63]
        ]
        patch = rolling.parent_patch(parent, self.field_paths)
        latest_name = rolling.revision_name(parent, patch)
        # The desired state of each child still recorded at an older revision.
        old_want: dict[str, dict[rolling.ChildId, dict[str, Any]]] = {}
        out_of_date: set[rolling.ChildId] = set()
        for rev in existing:
            held = {c for c in rev.children if c in obs}
            if rev.name == latest_name or not held:
                continue
            then = rolling.patched_parent(parent, rev.patch, self.field_paths)
            want = {
                (rolling.group_kind(c["kind"], c["apiVersion"]), c["metadata"]["name"]): c
                for c in evaluate(then)
                if f"{c['kind']}.{c['apiVersion']}" in keys
            }
            old_want[rev.name] = want
            for child in held:
                old, new = want.get(child), latest_want.get(child)
                if old is None or new is None or children.content_hash(old) != children.content_hash(new):
                    out_of_date.add(child)
        plan = rolling.plan_rollout(
            latest_name,
            patch,
            existing,
            obs,
            latest_want,
            self.checks,
            out_of_date,
            self._not_updated(parent, obs, latest_want),
        )
        self._record(parent, plan)
        if plan.moved or plan.paused_by:
            log.info(
                "rolling update",
                extra={
                    "controller": self.controller,
                    "parent": parent["metadata"]["name"],
                    "revision": plan.latest.name,
                    "moved": "/".join(plan.moved) if plan.moved else None,
                    "paused_by": "/".join(plan.paused_by) if plan.paused_by and out_of_date else None,
                },
            )
        out = []
        for child in latest_children:
            ident = (rolling.group_kind(child["kind"], child["apiVersion"]), child["metadata"]["name"])
            rev = plan.assignment.get(ident)
            if ident in latest_want and rev is not None and rev != plan.latest.name:
                child = old_want.get(rev, {}).get(ident, child)
            out.append(child)
        return out, rolling.updated_condition(plan)

    def _not_updated(
        self,
        parent: Mapping[str, Any],
        observed: Mapping[rolling.ChildId, Mapping[str, Any]],
        latest_want: Mapping[rolling.ChildId, Mapping[str, Any]],
    ) -> set[rolling.ChildId]:
        """The observed children whose applied-state hash is not the one the latest revision wants
        (Metacontroller asks "would applying the latest desired state change it?"): a child cache
        behind the child's update must not let the next child move."""
        stale = set()
        for ident, want in latest_want.items():
            have = observed.get(ident)
            if have is None:
                continue
            wanted = children.decorate_child(self.definition, parent, want)["metadata"]["annotations"]
            applied = (have.get("metadata") or {}).get("annotations") or {}
            if applied.get(children.HASH_ANNOTATION) != wanted[children.HASH_ANNOTATION]:
                stale.add(ident)
        return stale

    def _record(self, parent: dict[str, Any], plan: rolling.RolloutPlan) -> None:
        ns = parent["metadata"].get("namespace")
        owner = owner_reference(parent)
        t, name = self.revision_type, self.controller
        for rev in plan.revisions:
            if rev.name not in plan.changed:
                continue
            if not rev.exists:
                # Created by server-side apply, so the API server encodes `data` itself: a later
                # metadata patch then re-encodes it byte for byte (data is immutable).
                body = rolling.revision_object(self.controller, parent, owner, rev)
                self.actuator.apply(t, body, controller=name, verb="create-revision")
                continue
            patch = {"metadata": {"annotations": {rolling.CHILDREN_ANNOTATION: rev.children_annotation()}}}
            ref = {"metadata": {"namespace": ns, "name": rev.name}}
            self.actuator.patch(t, ref, {**patch, "revision": rev.number}, controller=name, verb="update-revision")
        for rev in plan.obsolete:
            if rev.exists:
                self.actuator.delete(t, ns, rev.name, None, controller=name, verb="delete-revision")
