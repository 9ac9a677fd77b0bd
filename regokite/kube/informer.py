"""Informers: one list+watch per resource type, an in-memory cache, change handlers.

A watch resumes from the last resourceVersion it saw (bookmarks keep that
fresh on quiet types), and a `410 Gone` (history compacted), any other error
event in a watch, an expired list continuation or a server whose history is
behind ours relists from scratch, turning the difference between the old
cache and the new list into ADDED/MODIFIED/DELETED notifications, so no
change is lost while the API server was away.

A watch resumed from a resourceVersion the server has not reached yet (etcd
restored from a backup) is answered 200 and then nothing: no event, no
bookmark, no 410, while the changes the server makes up to that version are
dropped as older than it. So after a watch failure, and after a watch that
ended without a single event, the informer asks for the server's current
resourceVersion (a list of one item) and relists when ours is ahead of it. A
watch that ends within a second with nothing counts as a failure (backoff),
not as a watch to resume at once. Objects are plain dicts, with
`metadata.managedFields` dropped: nothing downstream reads it and it is most
of an object's size.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from regokite.kube.client import ApiError, KubeClient, WatchStream, error_reason, resource_path
from regokite.ops import controller_metrics as metrics
from regokite.ops.outage import Outage
from regokite.resources import controller_ref, key_of

__all__ = ["ErrorEvent", "Gone", "Informer", "InformerFactory", "Key", "key_of", "staleness"]

log = logging.getLogger("regokite.controller")

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)
Handler = Callable[[str, Obj | None, Obj | None], None]  # (event, new, old)


class ShareFilter(Protocol):
    """What a cache holding only this replica's share keeps (with --shards: the shard cache's filter)."""

    opened: threading.Event  # set at the first view: nothing is listed before it
    generation: int  # counts widenings: a list made under an older one is taken again

    def keeps(self, role: str, obj: Mapping[str, Any]) -> bool: ...


class Gone(Exception):
    """The resourceVersion we resume from is no use (too old, or ahead of the server): relist at once."""


class ErrorEvent(Exception):
    """A watch's ERROR event other than 410: relist after a backoff, as client-go's reflector does
    after any watch error (a resume from the same resourceVersion may fail the same way forever)."""


class ShortWatch(Exception):
    """A watch the server ended within a second with nothing in it: retried with backoff, not at once."""


SHORT_WATCH_SECONDS = 1.0


def _controller_uid(obj: Obj) -> str | None:
    ref = controller_ref(obj)
    return ref.get("uid") if ref else None


def staleness(watches: dict[str, dict[str, Any]]) -> float:
    """For how long the stalest of `watches` (Informer.health) may have missed events: 0 when none has."""
    return max((w.get("missed_events_for_seconds") or 0.0 for w in watches.values()), default=0.0)


class Informer:
    PAGE = 500

    def __init__(
        self,
        client: KubeClient,
        api_version: str,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout: int = 290,
        page_size: int = PAGE,
        share_role: str | None = None,
    ) -> None:
        self.client = client
        self.share_role = share_role  # runtime.shard_cache: how the objects are keyed, when caching only the share
        self.share: ShareFilter | None = None  # attached with --shards (before start): keep only the share
        self.page_size = page_size or None  # a list call's `limit`; 0: one unpaged list
        self.api_version = api_version
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector or None
        self.field_selector = field_selector or None
        self.watch_timeout = watch_timeout
        self.name = f"{resource}.{api_version}" + (f" in {namespace}" if namespace else "")
        self.synced = threading.Event()
        self.resource_version: str | None = None
        self._handlers: list[Handler] = []
        self._lock = threading.RLock()
        self._cache: dict[Key, Obj] = {}
        self._by_owner: dict[str, set[Key]] = {}
        self._orphans: dict[str, set[Key]] = {}
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self.relists = 0
        self._relisted_under = 0  # the share filter's generation the last relist was made under
        self.watch_restarts = 0
        self.connected = False  # a watch stream is open
        self.missed_since: float | None = None  # a watch failed then, and no list has followed: events may be missing
        self.last_event_at: float | None = None  # monotonic time of the last event, bookmark or list
        self._caught_up_at: int | None = None  # the server's resourceVersion when a watch resumed after a failure
        self._outage = Outage(log, "watch")
        self._touched: set[Key] | None = None  # during load(): keys the watch stored or deleted since it began
        self._floors: dict[Key, int] = {}  # objects load() added: a watch event older than them is not applied
        self._floors_until = 0  # the resourceVersion of load()'s list: the floors go once the watch passes it

    @property
    def confirmed(self) -> bool:
        """Whether the cache has missed nothing: no watch failure since the last list, or since a watch
        resumed after one delivered an event or bookmark at or past the server's resourceVersion of
        the moment it resumed (the replay of what happened meanwhile is complete: events come in
        order). Until then the cache may still hold an object deleted during the outage."""
        return self.missed_since is None

    @property
    def alive(self) -> bool:
        """For /healthz: its thread runs (True before it was started)."""
        return self._thread is None or self._thread.is_alive()

    def health(self) -> dict[str, Any]:
        """For /readyz: whether the watch is connected, how old its last event is, whether it may have missed some."""
        now = time.monotonic()
        return {
            "synced": self.synced.is_set(),
            "connected": self.connected,
            "last_event_seconds_ago": None if self.last_event_at is None else round(now - self.last_event_at, 1),
            "missed_events_for_seconds": None if self.missed_since is None else round(now - self.missed_since, 1),
            "objects": len(self),
        }

    # -- reading the cache

    def get(self, namespace: str | None, name: str) -> Obj | None:
        with self._lock:
            return self._cache.get((namespace or "", name))

    def list(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            if namespace is None:
                return list(self._cache.values())
            return [o for k, o in self._cache.items() if k[0] == namespace]

    def keys(self) -> list[Key]:
        """(namespace or "", name) of every cached object."""
        with self._lock:
            return list(self._cache)

    def owned_by(self, uid: str) -> list[Obj]:
        with self._lock:
            return [self._cache[k] for k in self._by_owner.get(uid, ())]

    def orphans(self, namespace: str | None = None) -> list[Obj]:
        """Objects without a controller, in `namespace` (all namespaces when None)."""
        with self._lock:
            if namespace is None:
                return [self._cache[k] for keys in self._orphans.values() for k in keys]
            return [self._cache[k] for k in self._orphans.get(namespace, ())]

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    # -- lifecycle

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer {self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current watch read; the thread is a daemon, so exiting never waits
        for it (closing a stream another thread is reading can block in urllib3)."""
        self._stop.set()

    # -- the loop

    def _path(self) -> str:
        return resource_path(self.api_version, self.resource, self.namespace)

    def _run(self) -> None:
        backoff = 0.2
        share = self.share
        while share is not None and not share.opened.wait(0.5):  # no list before the first shard view
            if self._stop.is_set():
                return
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self._relist()
                elif not self.confirmed:
                    self._caught_up_at = self._check_not_ahead()  # resuming after a failure
                if self._watch() == 0 and not self._stop.is_set():
                    self._check_not_ahead()  # a whole watch without an event or bookmark
                backoff = 0.2
            except Gone as exc:
                log.info("watch history gone, relisting", extra={"informer": self.name, "why": str(exc)})
                self._disconnected()
                self.resource_version = None
            except Exception as exc:  # connection refused/reset, 5xx, an error event, a short watch, ...
                self._disconnected()
                if isinstance(exc, ErrorEvent):
                    self.resource_version = None
                if self._stop.is_set():
                    break
                self._outage.failed(exc, error_reason(exc), informer=self.name)  # one line per outage
                log.debug("watch failed, retrying", extra={"informer": self.name, "error": str(exc)[:500],
                          "retry_in": backoff})  # fmt: skip
                metrics.watch_errors.labels(self.resource).inc()
                self._stop.wait(backoff * (0.5 + random.random()))
                backoff = min(backoff * 2, 5.0)

    def _check_not_ahead(self) -> int | None:
        """Raise Gone when the server's current resourceVersion is behind ours: a watch from ours would
        be silent until the server passes it, dropping every change before (etcd restored from a backup).
        resourceVersions are etcd revisions on every API server; one that is not a number is not compared.
        Returns the server's (None when not a number)."""
        page = self.client.get(self._path(), limit=1, labelSelector=self.label_selector,
                               fieldSelector=self.field_selector)  # fmt: skip
        current = (page.get("metadata") or {}).get("resourceVersion") or ""
        ours = self.resource_version or ""
        if current.isdigit() and ours.isdigit() and int(current) < int(ours):
            raise Gone(f"the server's resourceVersion {current} is behind ours, {ours}")
        return int(current) if current.isdigit() else None

    def _disconnected(self) -> None:
        self.connected = False
        self._caught_up_at = None
        if self.missed_since is None:
            self.missed_since = time.monotonic()

    def keeps(self, obj: Obj) -> bool:
        """Does the cache hold `obj` (always, unless it holds only this replica's share)?"""
        share, role = self.share, self.share_role
        return share is None or role is None or share.keeps(role, obj)

    def _list_all(self) -> tuple[dict[Key, Obj], str, int]:
        """Every object the cache keeps, paged, the list's resourceVersion and the filter's generation it
        was made under. Filtered page by page (a replica caching its share never holds every object); listed
        again when the filter widened meanwhile."""
        while True:
            generation = self.share.generation if self.share is not None else 0
            items: dict[Key, Obj] = {}
            cont: str | None = None
            rv = ""
            while True:
                try:
                    page = self.client.get(
                        self._path(),
                        limit=self.page_size,
                        labelSelector=self.label_selector,
                        fieldSelector=self.field_selector,
                        **{"continue": cont},
                    )
                except ApiError as exc:
                    if exc.status == 410 and cont:  # continuation expired mid-list
                        items, cont = {}, None
                        continue
                    raise
                for obj in page.get("items") or ():
                    if not self.keeps(obj):
                        continue
                    obj.setdefault("apiVersion", self.api_version)
                    obj.setdefault("kind", (page.get("kind") or "").removesuffix("List"))
                    _trim(obj)
                    items[key_of(obj)] = obj
                rv = page["metadata"].get("resourceVersion", rv)
                cont = page["metadata"].get("continue")
                if not cont:
                    break
            if self.share is None or self.share.generation == generation:
                return items, rv, generation

    def _relist(self) -> None:
        items, rv, generation = self._list_all()
        events: list[tuple[str, Obj | None, Obj | None]] = []
        with self._lock:
            self.relists += 1
            self._relisted_under = generation
            old = self._cache
            for k, obj in items.items():
                prev = old.get(k)
                if prev is None:
                    events.append(("ADDED", obj, None))
                elif prev["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    events.append(("MODIFIED", obj, prev))
            for k, prev in old.items():
                if k not in items:
                    events.append(("DELETED", None, prev))
            self._cache = {}
            self._by_owner, self._orphans = {}, {}
            self._floors = {}
            for obj in items.values():
                self._store(obj)
        self.resource_version = rv
        self.missed_since, self.last_event_at = None, time.monotonic()
        self._outage.recovered(informer=self.name)
        self.synced.set()
        log.info("listed", extra={"informer": self.name, "objects": len(items), "resourceVersion": rv})
        for event in events:
            self._notify(*event)

    def _watch(self) -> int:
        """One watch from `resource_version` until the server ends it; returns the events it brought."""
        query = {
            "watch": "true",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.watch_timeout - random.randint(0, 30),
            "labelSelector": self.label_selector,
            "fieldSelector": self.field_selector,
        }
        started = time.monotonic()
        try:
            stream = self.client.stream(self._path(), query, timeout=self.watch_timeout + 60)
        except ApiError as exc:
            if exc.status == 410:
                raise Gone("410 Gone: history compacted") from None
            raise
        self._stream = stream
        if self._stop.is_set():
            stream.close()
            return 0
        self.connected = True
        self._outage.recovered(informer=self.name)
        count = 0
        for event in stream:
            if self._stop.is_set():
                return count
            count += 1
            self.last_event_at = time.monotonic()
            self._apply(event)
        self.watch_restarts += 1
        if count == 0 and time.monotonic() - started < SHORT_WATCH_SECONDS:
            raise ShortWatch("the server ended the watch at once, with nothing in it")
        return count

    def _apply(self, event: Obj) -> None:
        """One watch event into the cache and to the handlers; an ERROR event raises Gone or ErrorEvent."""
        etype, obj = event.get("type"), event.get("object") or {}
        if etype == "ERROR":
            if obj.get("code") == 410:
                raise Gone("410 Gone in the watch: history compacted")
            raise ErrorEvent(f"{obj.get('code')} {obj.get('reason') or ''}: {obj.get('message') or ''}"[:300])
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if etype == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            self._caught_up(rv)
            return
        _trim(obj)
        k = key_of(obj)
        with self._lock:
            prev = self._cache.get(k)
            stale = self._older_than_load(k, rv)
            kept = self.keeps(obj)
            if not stale and (etype == "DELETED" or not kept):
                self._remove(k)
            elif not stale:
                self._store(obj)
        if rv:
            self.resource_version = rv
        self._caught_up(rv)  # after the cache holds this event
        if stale:
            return
        if etype == "DELETED":
            if prev is not None or kept:
                self._notify("DELETED", None, obj)
        elif kept:
            self._notify("ADDED" if prev is None else "MODIFIED", obj, prev)
        elif prev is not None:  # it left the share (its controller changed): its old owner hears of it
            self._notify("MODIFIED", obj, prev)

    def _older_than_load(self, k: Key, rv: str | None) -> bool:
        """Is this watch event older than the version load() added (holding the lock)? Then it is not applied:
        the watch, behind the list, replays what the cache already holds."""
        if self._touched is not None:
            self._touched.add(k)
        if not self._floors or not rv or not rv.isdigit():
            return False
        if int(rv) >= self._floors_until:
            self._floors = {}
            return False
        return int(rv) <= self._floors.get(k, -1)

    def _caught_up(self, rv: str | None) -> None:
        """Confirm the cache once a resumed watch reaches the server's resourceVersion of its resume."""
        if self._caught_up_at is not None and rv and rv.isdigit() and int(rv) >= self._caught_up_at:
            self.missed_since = self._caught_up_at = None

    # -- a shard view change (runtime.shard_cache)

    def load(self, timeout: float = 300.0) -> None:
        """After the share filter widened: the cache holds every object it now keeps. Before the first list,
        waits for it; after, lists the resource and adds the objects the cache lacks, unless the watch
        stored or deleted them meanwhile (its version is newer). Raises when the list fails."""
        if not self.synced.is_set():
            deadline = time.monotonic() + timeout
            while not self.synced.wait(0.2):
                if self._stop.is_set():
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.name}: the first list did not finish within {timeout:.0f} s")
            return
        with self._lock:
            relists, wanted = self.relists, self.share.generation if self.share is not None else 0
            self._touched = set()
        try:
            items, rv, _ = self._list_all()
            with self._lock:
                if self.relists != relists and self._relisted_under >= wanted:
                    return  # a relist meanwhile took the whole list under the widened filter
                added = 0
                for k, obj in items.items():
                    if k in self._cache or k in self._touched:
                        continue
                    self._store(obj)
                    added += 1
                    version = obj["metadata"].get("resourceVersion") or ""
                    if version.isdigit() and rv.isdigit():
                        self._floors[k] = int(version)
                        self._floors_until = max(self._floors_until, int(rv))
        finally:
            with self._lock:
                self._touched = None
        log.info("loaded the share", extra={"informer": self.name, "added": added, "resourceVersion": rv})

    def prune(self) -> int:
        """After the share filter narrowed: drop what it no longer keeps (no handler is told); how many."""
        with self._lock:
            gone = [k for k, obj in self._cache.items() if not self.keeps(obj)]
            for k in gone:
                self._remove(k)
        if gone:
            log.info("dropped objects out of the share", extra={"informer": self.name, "dropped": len(gone)})
        return len(gone)

    # -- cache and indices (hold the lock)

    def _store(self, obj: Obj) -> None:
        k = key_of(obj)
        if k in self._cache:
            self._unindex(k, self._cache[k])
        self._cache[k] = obj
        uid = _controller_uid(obj)
        if uid:
            self._by_owner.setdefault(uid, set()).add(k)
        else:
            self._orphans.setdefault(k[0], set()).add(k)

    def _remove(self, k: Key) -> None:
        obj = self._cache.pop(k, None)
        if obj is not None:
            self._unindex(k, obj)

    def _unindex(self, k: Key, obj: Obj) -> None:
        uid = _controller_uid(obj)
        index, bucket = (self._by_owner, uid) if uid else (self._orphans, k[0])
        keys = index.get(bucket)
        if keys is not None:
            keys.discard(k)
            if not keys:
                del index[bucket]

    def _notify(self, event: str, new: Obj | None, old: Obj | None) -> None:
        for handler in self._handlers:
            try:
                handler(event, new, old)
            except Exception:
                log.exception("informer handler failed", extra={"informer": self.name})


def _trim(obj: Obj) -> None:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)


class InformerFactory:
    """Shares one informer per (resource, namespace, selector, share role) among every controller.

    In a sharded process (`sharded`), an informer asked for with a share role (runtime.shard_cache) holds
    only this replica's share once `use_share` attached the filter (`--shards`); one asked for without
    keeps every object, so a resource read both ways is watched twice. Otherwise roles are ignored."""

    def __init__(self, client: KubeClient, namespace: str | None = None, *, sharded: bool = False) -> None:
        self.client = client
        self.namespace = namespace
        self.sharded = sharded
        self._informers: dict[tuple[str, str, str | None, str | None, str | None, str | None], Informer] = {}
        self._started = False
        self._share: ShareFilter | None = None

    def informer(
        self,
        api_version: str,
        resource: str,
        *,
        namespaced: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
        namespace: str | None = None,
        share: str | None = None,
    ) -> Informer:
        """`namespace` narrows a namespaced resource further than the factory's namespace (a Watch's);
        `share` is the role (runtime.shard_cache) by which a replica's cache may hold only its share."""
        ns = (namespace or self.namespace) if namespaced else None
        share = share if self.sharded else None
        k = (api_version, resource, ns, label_selector, field_selector, share)
        if k not in self._informers:
            inf = Informer(
                self.client,
                api_version,
                resource,
                namespace=ns,
                label_selector=label_selector,
                field_selector=field_selector,
                share_role=share,
            )
            if share is not None:
                inf.share = self._share
            self._informers[k] = inf
            if self._started:
                inf.start()
        return self._informers[k]

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def use_share(self, share: ShareFilter) -> None:
        """Informers with a share role (now and later) keep only what `share` keeps."""
        self._share = share
        for inf in self._informers.values():
            if inf.share_role is not None:
                inf.share = share

    def filtered(self) -> list[Informer]:
        """The informers that hold only this replica's share."""
        return [i for i in self._informers.values() if i.share is not None]

    def start(self) -> None:
        self._started = True
        for inf in self._informers.values():
            inf.start()

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers.values())

    def wait_synced(self, timeout: float) -> bool:
        """Every informer listed, but those waiting for the first shard view (runtime.shards loads them)."""
        deadline = time.monotonic() + timeout
        waiting = [i for i in self._informers.values() if i.share is None or i.share.opened.is_set()]
        return all(inf.synced.wait(max(0.0, deadline - time.monotonic())) for inf in waiting)

    def stop(self) -> None:
        for inf in self._informers.values():
            inf.stop()
