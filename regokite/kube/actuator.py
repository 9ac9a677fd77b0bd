"""Writes to the cluster: server-side apply, deletes, claims, status, finalizers, Events."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from regokite.controllers.hooks import HookEvent
from regokite.kube.client import JSON_PATCH, ApiError, KubeClient, resource_path
from regokite.ops import controller_metrics as metrics
from regokite.resources import ChildType

log = logging.getLogger("regokite.controller")
FIELD_MANAGER = "regokite"
EVENT_REPEAT_SECONDS = 60.0


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Actuator:
    def __init__(self, client: KubeClient, manager: str = FIELD_MANAGER) -> None:
        self.client = client
        self.manager = manager
        self._recent_events: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()

    def path(self, t: ChildType, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        return resource_path(t.api_version, t.resource, namespace if t.namespaced else None, name, sub)

    # -- children

    def apply(self, t: ChildType, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self.client.apply(self.path(t, meta.get("namespace"), meta["name"]), obj, self.manager, force=True)

    def delete(self, t: ChildType, namespace: str | None, name: str, uid: str | None) -> bool:
        """Delete in the background (the GC takes grandchildren); False when already gone or replaced."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.client.delete(self.path(t, namespace, name), body)
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    def set_owner_references(self, t: ChildType, obj: dict[str, Any], refs: list[dict[str, Any]]) -> dict[str, Any]:
        """Adopt or release: replace ownerReferences, guarded by uid and resourceVersion."""
        meta = obj["metadata"]
        patch = {"metadata": {"ownerReferences": refs, "uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}}
        return self.client.patch(self.path(t, meta.get("namespace"), meta["name"]), patch)

    # -- parents

    def set_status(self, t: ChildType, parent: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Replace the whole status, through the status subresource when there is one."""
        meta = parent["metadata"]
        sub = "status" if t.status_subresource else None
        patch = [{"op": "add", "path": "/status", "value": status}]
        return self.client.patch(self.path(t, meta.get("namespace"), meta["name"], sub), patch, JSON_PATCH)

    def set_finalizers(self, t: ChildType, parent: dict[str, Any], finalizers: list[str]) -> dict[str, Any]:
        meta = parent["metadata"]
        patch = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
        return self.client.patch(self.path(t, meta.get("namespace"), meta["name"]), patch)

    # -- events

    def finish(
        self,
        t: ChildType,
        obj: dict[str, Any],
        events: Iterable[HookEvent],
        *,
        finalizer: str,
        release: bool,
        controller: str,
    ) -> None:
        """The end of a sync: record the hook's events, and drop our finalizer once it says `finalized`."""
        for event in events:
            self.event(obj, event.type, event.reason, event.message)
        if release:
            remaining = [f for f in (obj["metadata"].get("finalizers") or ()) if f != finalizer]
            self.set_finalizers(t, obj, remaining)
            metrics.applies.labels(controller, t.kind, "remove-finalizer").inc()

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str, component: str = "regokite") -> None:
        """Record an Event on `obj`; the same reason and message repeat at most once a minute."""
        meta = obj.get("metadata") or {}
        key = (meta.get("uid", ""), reason, message)
        now = time.monotonic()
        with self._lock:
            if now - self._recent_events.get(key, -1e9) < EVENT_REPEAT_SECONDS:
                return
            self._recent_events[key] = now
            if len(self._recent_events) > 10000:
                cutoff = now - EVENT_REPEAT_SECONDS
                self._recent_events = {k: v for k, v in self._recent_events.items() if v > cutoff}
        namespace = meta.get("namespace") or "default"
        stamp = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.client.request("POST", f"/api/v1/namespaces/{namespace}/events", body)
        except Exception as exc:  # an Event is best effort; never fail a sync over it
            log.warning("could not record event", extra={"reason": reason, "error": str(exc)[:300]})
