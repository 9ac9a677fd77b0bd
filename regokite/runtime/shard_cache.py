"""Caches that hold only this replica's share (`--shards`): which objects a share-filtered informer keeps,
and the widen / load / narrow steps a view change takes on them.

An informer declares a role when it is created (`InformerFactory.informer(share=...)`):

* `SELF`: the object is keyed by its own `namespace/name` (composite parents, decorator targets, a
  Watch's objects);
* `OWNER` / `OWNER_CLUSTER`: the object is keyed by its controlling owner reference's name, in the
  object's namespace (`OWNER`: the owner is namespaced) or in none (`OWNER_CLUSTER`); an object with no
  controller is kept whole (it may be adopted by any parent whose selector matches it).

The key is the one `runtime.shards` hashes, so a filtered cache holds what the replica acts on: its parents
and their children. Everything else (related objects a customize hook reads, the
replicated data policies read, controller revisions) comes from informers without a role, which keep
every object. The watch streams still bring every event and each is decoded (the API server cannot
select by hash); an event outside the share is dropped after decoding, before it is stored or handled.

Nothing decides on data not loaded yet: on a view change the filter first widens to the objects that
either the old or the new view gives this replica; every filtered informer then lists its resource and
adds the objects it gained (`Informer.load`); only then does `Shards` act on the new view. Once the
objects given away have no sync in flight (a replica drains before it gives objects away), the filter
narrows to the new view and the caches drop them (`Informer.prune`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from regokite.resources import controller_ref
from regokite.runtime.shards import object_key, owner

SELF = "self"
OWNER = "owner"
OWNER_CLUSTER = "owner-cluster"
ROLES = (SELF, OWNER, OWNER_CLUSTER)


def owner_role(owner_scopes: set[bool]) -> str | None:
    """The role of objects whose controllers are of types with these scopes (namespaced: True); None (kept
    whole) when they mix: the owner reference does not say in which namespace its name is."""
    if owner_scopes == {True}:
        return OWNER
    if owner_scopes == {False}:
        return OWNER_CLUSTER
    return None


def share_key(role: str, obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(namespace, name) that `role` hashes for `obj`; None: kept whole (no controller to key it by)."""
    meta = obj.get("metadata") or {}
    if role == SELF:
        return meta.get("namespace") or "", meta.get("name") or ""
    ref = controller_ref(obj)
    if ref is None:
        return None
    return (meta.get("namespace") or "") if role == OWNER else "", ref.get("name") or ""


class ShareFilter:
    """What this replica's filtered caches keep: objects that one of `views` gives `identity`.

    `opened` is set at the first view: a filtered informer lists nothing before it (a list of every
    object would raise the process's memory to what the share is meant to save). `generation` counts
    widenings: a list that was paging while the filter widened is taken again."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.opened = threading.Event()
        self.generation = 0
        self._views: tuple[tuple[str, ...], ...] = ()
        self._lock = threading.Lock()

    def keeps(self, role: str, obj: Mapping[str, Any]) -> bool:
        key = share_key(role, obj)
        if key is None:
            return True
        k = object_key(*key)
        return any(owner(k, view) == self.identity for view in self._views)

    def widen(self, old: Sequence[str], new: Sequence[str]) -> None:
        """Keep what either view gives us (a view change under way)."""
        with self._lock:
            self._views = tuple(tuple(v) for v in (old, new) if v)
            self.generation += 1
        self.opened.set()

    def narrow(self, view: Sequence[str]) -> None:
        """Keep only what `view` gives us (a view change done, or one that failed: back to the old)."""
        with self._lock:
            self._views = (tuple(view),) if view else ()


class ShardCache:
    """The filter and the filtered caches of every controller set this process runs (`Shards.cache`)."""

    def __init__(self, identity: str) -> None:
        self.filter = ShareFilter(identity)
        self._lock = threading.Lock()
        self._sources: list[CacheSource] = []

    def attach(self, source: CacheSource) -> None:
        """A running controller set's informers (an InformerFactory): its filtered ones follow view changes."""
        with self._lock:
            self._sources.append(source)

    def detach(self, source: CacheSource) -> None:
        with self._lock:
            self._sources = [s for s in self._sources if s is not source]

    def caches(self) -> list[ShareCache]:
        with self._lock:
            sources = list(self._sources)
        return [cache for source in sources for cache in source.filtered()]

    def widen(self, old: Sequence[str], new: Sequence[str]) -> None:
        self.filter.widen(old, new)

    def load(self, stopped: Callable[[], bool]) -> None:
        """Every filtered cache holds what the widened filter keeps: a list each, side by side (a hand-over
        waits for the longest, not their sum); raises the first error when one cannot list."""
        caches = self.caches()
        if not caches or stopped():
            return
        with ThreadPoolExecutor(len(caches), thread_name_prefix="shard-load") as pool:
            for done in [pool.submit(cache.load) for cache in caches]:
                done.result()

    def narrow(self, view: Sequence[str]) -> int:
        """Keep only `view`'s share; the objects dropped."""
        self.filter.narrow(view)
        return sum(cache.prune() for cache in self.caches())


class ShareCache(Protocol):
    """What ShardCache needs of a filtered informer (kube.informer.Informer)."""

    def load(self) -> None: ...

    def prune(self) -> int: ...


class CacheSource(Protocol):
    """Where the filtered informers come from (kube.informer.InformerFactory)."""

    def filtered(self) -> Sequence[ShareCache]: ...
