"""The only writer to the cluster: creates, server-side apply, patches and deletes with preconditions,
status, finalizers, owner references, Events. Every write is counted here, once, in
`regokite_controller_writes_total{controller, kind, verb}`.

Preconditions: a patch is made "as of" the object it was decided on (its
resourceVersion, as a JSON-patch `test` or in the merge patch), so a write
decided on a stale read is refused with 409 (or 422 for a failed `test`)
instead of undoing a newer change; a delete carries the uid it was decided on.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from regokite.kube.client import JSON_PATCH, MERGE_PATCH, ApiError, KubeClient, resource_path
from regokite.ops import controller_metrics as metrics
from regokite.resources import Action, ChildType, HookEvent, with_defaulted_list_keys

log = logging.getLogger("regokite.controller")
FIELD_MANAGER = "regokite"
EVENT_REPEAT_SECONDS = 60.0
WRITE_THREADS = 16  # child writes in flight at once, over every sync
SHARED_STATUS_ATTEMPTS = 3  # writes of a shared status (update_status), each over the object read again


def utc_now() -> str:
    """Now, as Kubernetes writes timestamps (RFC 3339, seconds, UTC)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Actuator:
    def __init__(self, client: KubeClient, manager: str = FIELD_MANAGER) -> None:
        self.client = client
        self.manager = manager
        self._events: dict[tuple[str, str, str], _SeenEvent] = {}  # by (uid, reason, message)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # a plan's child writes, concurrently

    def path(self, t: ChildType, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        return resource_path(t.api_version, t.resource, namespace if t.namespaced else None, name, sub)

    def _path_of(self, t: ChildType, obj: Mapping[str, Any], sub: str | None = None) -> str:
        meta = obj["metadata"]
        return self.path(t, meta.get("namespace"), meta["name"], sub)

    @staticmethod
    def _count(controller: str, t: ChildType, verb: str, path: str) -> None:
        metrics.applies.labels(controller, t.kind, verb).inc()
        log.debug("wrote", extra={"controller": controller, "verb": verb, "path": path})  # a write audit

    # -- reads

    def read(self, t: ChildType, namespace: str | None, name: str) -> dict[str, Any] | None:
        """A fresh read from the API server (not a cache); None when the object is gone."""
        try:
            return self.client.get(self.path(t, namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    # -- writes

    def apply(
        self,
        t: ChildType,
        obj: dict[str, Any],
        *,
        controller: str,
        verb: str = "apply",
        field_manager: str | None = None,
        parse: bool = True,
    ) -> dict[str, Any] | None:
        """Server-side apply, forced, under `field_manager` (default: the controller's --field-manager);
        the object as applied (None with `parse=False`: its answer is not decoded)."""
        path = self._path_of(t, obj)
        manager = field_manager or self.manager
        result = self.client.apply(path, with_defaulted_list_keys(obj), manager, force=True, parse=parse)
        self._count(controller, t, verb, path)
        return result

    def create_child(
        self, t: ChildType, body: dict[str, Any], *, controller: str, parse: bool = False
    ) -> dict[str, Any] | None:
        """A child the sync found missing, created with a POST under the field manager: the API server takes
        a create for about half of what an apply that creates costs it. Its fields then belong to (manager,
        Update) rather than (manager, Apply), which `apply_child` settles the first time it matters. Found
        there after all (the cache behind, a name taken meanwhile): applied, as every child was before.
        The answer is decoded only with `parse` (a take-over's cleanup reads it): decoding each child's
        answer was a tenth of a converge's JSON decoding in the controller's profile. A resourceVersion
        (a hook copying an observed object) is left out: the apply that created children took it, a POST
        is refused with it."""
        obj = with_defaulted_list_keys(body)
        if "resourceVersion" in obj["metadata"]:
            obj = {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}
        try:
            return self.create(t, obj, controller=controller, parse=parse)
        except ApiError as exc:
            if exc.status != 409:
                raise
            return self.apply_child(t, body, controller=controller, parse=parse, verb="create")

    def apply_child(
        self, t: ChildType, body: dict[str, Any], *, controller: str, parse: bool = False, verb: str = "update"
    ) -> dict[str, Any] | None:
        """Server-side apply of a child, with Metacontroller's three-way merge: what the hook no longer
        returns goes, unless another writer also set it. An apply removes only what its own (manager, Apply)
        entry held, so on a child `create_child` made, a field its (manager, Update) entry alone holds would
        stay: when the answer shows that entry holding what this apply did not set, the entry is folded
        into the Apply one (managedFields rewritten, as of the version applied) and the child applied again,
        which removes it as on a child an apply created. The object as last written (None without `parse`)."""
        applied = self.apply(t, body, controller=controller, verb=verb)
        assert applied is not None
        folded = fold_created_fields(applied["metadata"].get("managedFields") or [], self.manager)
        if folded is None:
            return applied
        owned = {"metadata": {"managedFields": folded}}
        self.patch(t, applied, owned, controller=controller, verb="own-fields", field_manager=self.manager)
        return self.apply(t, body, controller=controller, verb=verb, parse=parse)

    def create(self, t: ChildType, obj: dict[str, Any], *, controller: str, parse: bool = True) -> Any:
        """A create (POST): unlike an apply, refused while the kind's CRD is being deleted, so a writer
        re-creating what that deletion removes cannot hold it up. The object created (None with
        `parse=False`: its answer is not decoded)."""
        meta = obj["metadata"]
        path = self.path(t, meta.get("namespace"))
        result = self.client.request("POST", path, obj, query={"fieldManager": self.manager}, parse=parse)
        self._count(controller, t, "create", path)
        return result

    def patch(
        self,
        t: ChildType,
        obj: Mapping[str, Any],
        patch: dict[str, Any] | list[dict[str, Any]],
        *,
        controller: str,
        verb: str = "patch",
        sub: str | None = None,
        precondition: bool = True,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """A merge patch (an object) or an RFC 6902 patch (a list) of `obj`; with `precondition`, only
        of the version read (409, or 422 for the JSON patch's `test`, when it changed since)."""
        rv = obj["metadata"].get("resourceVersion") if precondition else None
        if isinstance(patch, list):
            body: Any = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, *patch] if rv else patch
            content_type = JSON_PATCH
        else:
            body = copy.deepcopy(patch)
            if rv:
                body.setdefault("metadata", {})["resourceVersion"] = rv
            content_type = MERGE_PATCH
        query = {"fieldManager": field_manager} if field_manager else {}
        path = self._path_of(t, obj, sub)
        result = self.client.patch(path, body, content_type, **query)
        self._count(controller, t, verb, path)
        return result

    def delete(
        self, t: ChildType, namespace: str | None, name: str, uid: str | None, *, controller: str, verb: str = "delete"
    ) -> bool:
        """Delete in the background (the GC takes grandchildren), only the object with `uid` when given;
        False when it is already gone or was replaced."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        path = self.path(t, namespace, name)
        try:
            self.client.delete(path, body)
        except ApiError as exc:
            if exc.status in (404, 409):
                return False
            raise
        self._count(controller, t, verb, path)
        return True

    def _aggregate(self, namespace: str, seen: _SeenEvent, stamp: str) -> bool:
        """Move the existing Event's count and lastTimestamp; False when it is gone (expired: a new one)."""
        try:
            self.client.patch(f"/api/v1/namespaces/{namespace}/events/{seen.name}",
                              {"count": seen.count, "lastTimestamp": stamp})  # fmt: skip
        except ApiError as exc:
            if exc.status != 404:
                raise
            return False
        return True

    def execute_all(self, actions: Sequence[Action], *, controller: str) -> None:
        """A sync plan's child actions, at once (a plan has one action per child). As Metacontroller's,
        a failed write does not stop the others; the first failure is raised once every one is done.
        The first action is written from the calling thread while the pool takes the rest: one thread
        hand-off fewer before a reaction's writes are on the wire (a wake-up on a busy machine)."""
        if not actions:
            return
        futures = []
        if len(actions) > 1:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="writes")
            futures = [self._pool.submit(self.execute, action, controller=controller) for action in actions[1:]]
        failures: list[BaseException] = []
        try:
            self.execute(actions[0], controller=controller)
        except BaseException as exc:  # the others still finish first, as Metacontroller's (and as in the pool)
            failures.append(exc)
        failures += [exc for f in futures if (exc := f.exception()) is not None]
        if failures:
            raise failures[0]

    def execute(self, action: Action, *, controller: str) -> None:
        """One child action of a sync plan."""
        if action.verb in ("create", "update"):
            assert action.body is not None
            write = self.create_child if action.verb == "create" else self.apply_child
            written = write(action.type, action.body, controller=controller, parse=bool(action.cleanup))
            if action.cleanup:
                assert written is not None
                self.patch(action.type, written, action.cleanup, controller=controller, verb="take-over")
        elif action.verb in ("delete", "recreate"):
            self.delete(action.type, action.namespace, action.name, action.uid, controller=controller, verb=action.verb)
        else:
            raise ValueError(f"not a child action: {action.describe()}")

    def set_owner_references(
        self, t: ChildType, obj: dict[str, Any], refs: list[dict[str, Any]], *, controller: str, verb: str
    ) -> dict[str, Any]:
        """Adopt or release: replace ownerReferences, guarded by uid and resourceVersion."""
        patch = {"metadata": {"ownerReferences": refs, "uid": obj["metadata"]["uid"]}}
        return self.patch(t, obj, patch, controller=controller, verb=verb)

    def set_status(
        self,
        t: ChildType,
        obj: dict[str, Any],
        status: dict[str, Any],
        *,
        controller: str,
        as_read: bool = False,
        verb: str = "status",
    ) -> dict:
        """Replace the whole status, through the status subresource when there is one.

        `as_read`: only on the version of `obj` (409 when it changed since); what a conflict means is
        the caller's (a composite's sync writes its status again over a fresh read, as Metacontroller's
        AtomicStatusUpdate; a decorator's leaves it to the next sync, as its UpdateStatus)."""
        sub = _status(t)
        if as_read:
            patch = {"status": merge_patch_to(obj.get("status"), status)}
            return self.patch(t, obj, patch, controller=controller, verb=verb, sub=sub)
        json_patch = [{"op": "add", "path": "/status", "value": status}]
        return self.patch(t, obj, json_patch, controller=controller, verb=verb, sub=sub, precondition=False)

    def update_status(
        self,
        t: ChildType,
        obj: Mapping[str, Any],
        change: Callable[[Mapping[str, Any]], dict[str, Any] | None],
        *,
        controller: str,
        read_first: bool = False,
        attempts: int = SHARED_STATUS_ATTEMPTS,
    ) -> dict[str, Any]:
        """A status several writers share (Gatekeeper's `status.byPod`, one entry per pod), read, changed
        and written: `change(current)` is the merge patch of the status to write over `current` (None:
        nothing to write), sent with its resourceVersion so an entry another writer added since is kept;
        on a 409 the object is read again and `change` asked again, at most `attempts` writes. `obj`
        is the version to start from (`read_first`: only its name; read now). Returns the object as
        written (as read when nothing was to write); raises what the API server answered, the last
        409 included (logged here as given up: the object changed under each write)."""
        path = self._path_of(t, obj)
        current = self.client.get(path) if read_first else obj  # a 404 raised: the caller's (deleted)
        for attempt in range(1, attempts + 1):
            patch = change(current)
            if patch is None:
                return dict(current)
            try:
                return self.patch(t, current, {"status": patch}, controller=controller, verb="status", sub=_status(t))
            except ApiError as exc:
                if exc.status != 409:
                    raise
                if attempt == attempts:
                    log.warning(
                        "status not written: the object changed under each write; the caller retries",
                        extra={"controller": controller, "path": path, "writes": attempts},
                    )
                    raise
            current = self.client.get(path)
        raise AssertionError("unreachable")  # pragma: no cover

    def set_finalizers(self, t: ChildType, obj: dict[str, Any], finalizers: list[str], *, controller: str) -> dict:
        had = len(obj["metadata"].get("finalizers") or ())
        verb = "add-finalizer" if len(finalizers) > had else "remove-finalizer"
        return self.patch(t, obj, {"metadata": {"finalizers": finalizers or None}}, controller=controller, verb=verb)

    # -- the end of a sync

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
        """Record the hook's events, and drop our finalizer once it says `finalized`."""
        for event in events:
            self.event(obj, event.type, event.reason, event.message)
        if release:
            remaining = [f for f in (obj["metadata"].get("finalizers") or ()) if f != finalizer]
            self.set_finalizers(t, obj, remaining, controller=controller)

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str, component: str = "regokite") -> None:
        """Record an Event on `obj`. A repeat (same object, reason and message) is aggregated as client-go's
        recorder does: the existing Event's `count` grows and its `lastTimestamp` moves, written at most once
        a minute (the repeats between are counted, not lost); best effort, never failing a sync."""
        meta = obj.get("metadata") or {}
        key = (meta.get("uid", ""), reason, message)
        now = time.monotonic()
        with self._lock:
            seen = self._events.get(key)
            if seen is not None:
                seen.count += 1
                if now - seen.sent_at < EVENT_REPEAT_SECONDS:
                    return
                seen.sent_at = now
            else:
                seen = self._events[key] = _SeenEvent(now)
                if len(self._events) > 10000:
                    cutoff = now - EVENT_REPEAT_SECONDS
                    self._events = {k: v for k, v in self._events.items() if v.sent_at > cutoff}
        namespace = meta.get("namespace") or "default"
        stamp = utc_now()
        try:
            if seen.name is not None and self._aggregate(namespace, seen, stamp):
                return
            body = _event_body(obj, type_, reason, message, component, stamp, seen.count)
            created = self.client.request("POST", f"/api/v1/namespaces/{namespace}/events", body)
            seen.name = ((created or {}).get("metadata") or {}).get("name") if isinstance(created, dict) else None
        except Exception as exc:  # an Event is best effort; never fail a sync over it
            log.warning("could not record event", extra={"reason": reason, "error": str(exc)[:300]})

    def record_event(self, body: Mapping[str, Any]) -> None:
        """Post an Event built elsewhere (Gatekeeper's violation Events), best effort."""
        namespace = (body.get("metadata") or {}).get("namespace") or "default"
        try:
            self.client.request("POST", f"/api/v1/namespaces/{namespace}/events", dict(body))
        except Exception as exc:  # an Event is best effort
            log.warning("could not record event", extra={"reason": body.get("reason"), "error": str(exc)[:300]})


def fold_created_fields(entries: Sequence[Mapping[str, Any]], manager: str) -> list[Mapping[str, Any]] | None:
    """`entries` (an object's managedFields) with `manager`'s Update entry (its create) folded into its
    Apply entry, when the Update entry holds a field the Apply entry does not (the apply left it out);
    None when there is nothing to fold. Entries of different API versions are left as they are: their
    field paths need not match."""
    created = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Update"), None)
    applied = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"), None)
    if created is None or applied is None or created.get("apiVersion") != applied.get("apiVersion"):
        return None
    if not _holds_more(created.get("fieldsV1") or {}, applied.get("fieldsV1") or {}):
        return None
    merged = {**applied, "fieldsV1": _union(applied.get("fieldsV1") or {}, created.get("fieldsV1") or {})}
    return [merged if e is applied else e for e in entries if e is not created]


def _holds_more(fields: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether the FieldsV1 set `fields` holds a field `other` does not. "." (a map or list itself) is not
    counted: an apply holds a map's keys without it, and a create holds it with them."""
    return any(key != "." and (key not in other or _holds_more(below, other[key])) for key, below in fields.items())


def _union(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Two FieldsV1 sets as one. A node one set holds itself ({}) and the other holds keys below is held
    with those keys (".")."""
    merged = dict(a)
    if (not a) != (not b):
        merged["."] = {}
    for key, below in b.items():
        merged[key] = _union(merged[key], below) if key in merged else below
    return merged


@dataclass
class _SeenEvent:
    """An Event recorded: when last written, how many times it happened, its name once created."""

    sent_at: float
    count: int = 1
    name: str | None = None


def _event_body(
    obj: Mapping[str, Any], type_: str, reason: str, message: str, component: str, stamp: str, count: int
) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": meta.get("namespace") or "default"},
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
        "count": count,
    }


def _status(t: ChildType) -> str | None:
    """The subresource a status is written through: `status`, or none when the type has no such."""
    return "status" if t.status_subresource else None


def merge_patch_to(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: keys `old` has and `new` lacks are
    nulled, maps both have are patched key by key, anything else is replaced."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        patch[key] = merge_patch_to(old[key], value) if key in old else value
    return patch
