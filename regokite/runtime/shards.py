"""Sharding: replicas of one controller split its objects, with never two writers for one object.

Membership: every replica holds its own coordination.k8s.io/v1 Lease,
`<group>-<identity>`, labelled `regokite.io/shard-group=<group>` and renewed
like the leader Lease. A Lease whose record has not changed for its
`leaseDurationSeconds` by *this* replica's clock, or that was released (empty
holder), is not a member.

Assignment: rendezvous hashing of `namespace/name` over the members, so a
member joining or leaving moves only its own share.

Never two writers: each replica publishes on its Lease (annotation
`regokite.io/shard-view`) the membership view it acts on, *before* acting on
it, and re-reads every Lease *after* publishing. It acts on an object only
when the object is its own under its view and no live member's published view
gives the object to that member. Two replicas claiming one object therefore
each see the other's claim (both write, then read, through the API server's
linearizable store), and at most one acts; the other waits until the views
agree. A replica about to give objects away (a member joined) first stops
taking work and waits for its in-flight syncs to finish, then publishes. A
replica that cannot renew for `renew_deadline` stops acting at once, before
others (after `lease_duration`) consider it gone; writes are refused from then
on (the client's write guard), and acting resumes only after a fresh publish
and re-read.
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from regokite.errors import RegokiteError
from regokite.kube.client import ApiError, KubeClient, NotLeader
from regokite.ops import controller_metrics as metrics
from regokite.runtime.leader import LeaderSettings, micro_time

log = logging.getLogger("regokite.shards")
GROUP_LABEL = "regokite.io/shard-group"
VIEW_ANNOTATION = "regokite.io/shard-view"
SINGLETON = ("", "regokite.io/leader-only-work")  # work one replica does (the definitions' status)
FORGET_AFTER = 4  # a Lease expired this many lease durations ago is deleted (pods come and go)


class Verdict(enum.Enum):
    MINE = "mine"  # act now; call end() when done
    OTHER = "other"  # another member's object: drop the key
    WAIT = "wait"  # not now (views disagree, a hand-over is draining, our Lease is not fresh): retry later


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def score(member: str, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{member}\0{key}".encode(), digest_size=8).digest(), "big")


def owner(key: str, members: Sequence[str]) -> str | None:
    """The member with the highest hash for `key` (rendezvous hashing); None for no members."""
    return max(members, key=lambda m: score(m, key), default=None)


def lease_name(group: str, identity: str) -> str:
    """`<group>-<identity>`, made a valid object name; a hash keeps two identities that clean alike apart."""
    clean = re.sub(r"[^a-z0-9.-]+", "-", identity.lower()).strip(".-")
    if clean != identity or not clean:
        clean = f"{clean[:40]}-{hashlib.sha256(identity.encode()).hexdigest()[:10]}".strip("-")
    return f"{group}-{clean}"[:253]


class ShareCaches(Protocol):
    """The caches that hold only this replica's share (runtime.shard_cache.ShardCache)."""

    def widen(self, old: Sequence[str], new: Sequence[str]) -> None: ...

    def load(self, stopped: Callable[[], bool]) -> None: ...

    def narrow(self, view: Sequence[str]) -> int: ...


@dataclass
class Peer:
    """Another replica's Lease as this replica last read it."""

    identity: str
    view: tuple[str, ...]
    record: Any  # spec and view: when it changes, the peer is alive
    changed_at: float  # our clock when `record` last changed
    duration: float

    def live(self, now: float) -> bool:
        return bool(self.identity) and now - self.changed_at < self.duration

    def claims(self, key: str) -> bool:
        return self.identity in self.view and owner(key, self.view) == self.identity


class Shards:
    """One replica's membership. `run()` renews and follows the other Leases; workers ask `begin()` before
    each sync and call `end()` after it."""

    def __init__(
        self, client: KubeClient, settings: LeaderSettings, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if settings.lease_duration <= settings.renew_deadline:
            raise RegokiteError("sharding: the lease duration must be greater than the renew deadline")
        self.client = client
        self.settings = settings.resolved()
        self.identity: str = self.settings.identity or ""
        self.group = self.settings.name
        self.clock = clock
        self.name = lease_name(self.group, self.identity)
        self.leases = f"/apis/coordination.k8s.io/v1/namespaces/{self.settings.namespace}/leases"
        self._cond = threading.Condition()
        self._io = threading.Lock()  # one round or release at a time
        self._view: tuple[str, ...] = ()  # published, acted on
        self._peers: dict[str, Peer] = {}  # by Lease name
        self._own: dict[str, Any] | None = None  # our Lease as last written
        self._renewed_at: float | None = None  # our clock when the last successful write was sent
        self._acting = False  # published and re-read since the last lapse
        self._paused = False  # giving objects away: no new sync starts
        self._in_flight = 0
        self._listed = False
        self._share_unloaded = False  # a view change whose gained share could not be listed: not ready
        # resync what may have become ours: the objects `only` selects, or (None) every one
        self.on_view_change: list[Callable[[Callable[[str, str], bool] | None], None]] = []
        self.keys: Callable[[], Iterable[tuple[str, str]]] = tuple  # every object acted on (for metrics)
        self.cache: ShareCaches | None = None  # caches of only our share: loaded before a view is acted on

    # -- what workers ask

    def may_act(self) -> bool:
        renewed = self._renewed_at
        return self._acting and renewed is not None and self.clock() - renewed < self.settings.renew_deadline

    @property
    def paused(self) -> bool:
        return self._paused or not self.may_act()

    def owns(self, namespace: str, name: str) -> bool:
        """Is the object ours under our view (True before the first view: the key waits for it)?"""
        view = self._view
        return not view or owner(object_key(namespace, name), view) == self.identity

    def begin(self, namespace: str, name: str) -> Verdict:
        key = object_key(namespace, name)
        with self._cond:
            if self._paused or not self.may_act():
                return Verdict.WAIT
            if owner(key, self._view) != self.identity:
                return Verdict.OTHER
            now = self.clock()  # a peer acting on our view gives this object to us, not to itself
            if any(p.view != self._view and p.live(now) and p.claims(key) for p in self._peers.values()):
                return Verdict.WAIT
            self._in_flight += 1
            return Verdict.MINE

    def end(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def guard(self, method: str, path: str) -> None:
        """The client's write guard: no write once our Lease is not fresh."""
        if not self.may_act():
            raise NotLeader(method, path)

    # -- state for /readyz and metrics

    def owned(self) -> int:
        """How many of the objects acted on our view gives this replica."""
        view = self._view
        return sum(1 for ns, name in self.keys() if owner(object_key(ns, name), view) == self.identity)

    def members(self) -> tuple[str, ...]:
        now = self.clock()
        live = {p.identity for p in self._peers.values() if p.live(now)}
        return tuple(sorted(live | {self.identity}))

    def agreed(self) -> bool:
        now = self.clock()
        return all(p.view == self._view for p in self._peers.values() if p.live(now))

    def ready(self) -> bool:
        return self._listed and bool(self._view) and not self._share_unloaded

    def describe(self) -> dict[str, Any]:
        now = self.clock()
        return {
            "group": self.group,
            "lease": f"{self.settings.namespace}/{self.name}",
            "identity": self.identity,
            "acting": self.may_act(),
            "paused": self._paused,
            "view": list(self._view),
            "agreed": self.agreed(),
            "members": {
                p.identity: {"view": list(p.view), "live": p.live(now)} for p in self._peers.values() if p.identity
            },
        }

    # -- the loop

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.tick(stop)
            except Exception:
                log.exception("sharding: membership round failed")
            stop.wait(self.settings.retry_period)

    def tick(self, stop: threading.Event | None = None) -> None:
        """Renew (republishing our view), read the members, and move to a new view if they changed."""
        with self._io:
            started = self.clock()
            if self._acting and not self.may_act():  # a lapse (even one this thread slept through)
                self._stop_acting("the membership lease was not renewed within the renew deadline")
            if not self._publish(self._view, started):
                return
            if not self._list():
                return
            members = self.members()
            if members != self._view:
                self._move_to(members, stop)
            elif not self._acting:
                self._start_acting("lease renewed and members re-read")

    def _move_to(self, members: tuple[str, ...], stop: threading.Event | None) -> None:
        old = self._view
        giving = bool(set(members) - set(old)) and bool(old)  # a new member takes some of ours
        if giving:
            with self._cond:
                self._paused = True
            while True:
                with self._cond:
                    if self._in_flight:
                        self._cond.wait(self.settings.retry_period)
                    if not self._in_flight:
                        break
                if stop is not None and stop.is_set():
                    return  # shutting down with syncs in flight: give nothing away (release() follows them)
                self._publish(old, self.clock())  # a long sync: keep our Lease (and old claims) alive meanwhile
        try:
            if not self._publish(members, self.clock()) or not self._list():
                # the write may have landed anyway: act again only after a round that publishes and re-reads
                self._stop_acting("could not publish the new view")
                return
            if not self._load_share(old, members, stop):
                # all `old` gives us is still in the caches, and no peer's new view claims any of it: claim only
                # that again and keep acting on it (not ready meanwhile); the next round tries the load again
                self._publish(old, self.clock())
                self._share_unloaded = True
                return
            self._share_unloaded = False
            gained, lost = self._moved(old, members)
            # logged before it takes effect: a write never precedes the line of the view it was made under
            log.info(
                "shard view changed",
                extra={
                    "identity": self.identity,
                    "from": list(old),
                    "to": list(members),
                    "gained": gained,
                    "lost": lost,
                },
            )
            with self._cond:
                self._view = members
            metrics.shard_handovers.labels("in").inc(gained)
            metrics.shard_handovers.labels("out").inc(lost)
            metrics.shard_members.set(len(members))
            metrics.shard_view_changes.inc()
        finally:
            with self._cond:
                self._paused = False
        if self._acting and old:  # what was ours already is in hand: resync only what came to us
            self._resync(lambda ns, name: owner(object_key(ns, name), old) != self.identity)
        else:
            self._start_acting("view published")
        if self.cache is not None:  # what went away has no sync in flight (drained above): out of the caches
            self.cache.narrow(members)

    def _load_share(self, old: tuple[str, ...], members: tuple[str, ...], stop: threading.Event | None) -> bool:
        """The share caches widened to what `old` or `members` gives us, and loaded: nothing is acted on under
        the new view before its objects are in. The Lease is renewed (with the view published) meanwhile."""
        cache = self.cache
        if cache is None or (old and set(old) <= set(members)):
            return True  # only members joined: the highest hash among more members was ours among fewer
        cache.widen(old, members)
        started = time.monotonic()
        done = threading.Event()
        failed: list[str] = []

        def load() -> None:
            try:
                cache.load(lambda: stop is not None and stop.is_set())
            except Exception as exc:
                failed.append(f"{type(exc).__name__}: {exc}"[:300])
            finally:
                done.set()

        threading.Thread(target=load, name="shard-load", daemon=True).start()
        while not done.wait(self.settings.retry_period):
            self._publish(members, self.clock())
        if failed or (stop is not None and stop.is_set()):
            log.warning("could not load the new share", extra={"identity": self.identity, "error": failed[:1]})
            cache.narrow(old)
            return False
        log.info(
            "loaded the new share", extra={"identity": self.identity, "seconds": round(time.monotonic() - started, 3)}
        )
        return True

    def _moved(self, old: Sequence[str], new: Sequence[str]) -> tuple[int, int]:
        """Objects in the caches that a move from view `old` to `new` gives us, and takes from us."""
        gained = lost = 0
        for ns, name in self.keys():
            key = object_key(ns, name)
            was, now = owner(key, old) == self.identity, owner(key, new) == self.identity
            gained += now and not was
            lost += was and not now
        return gained, lost

    def _start_acting(self, why: str) -> None:
        """Act again (a first view, or after a lapse): everything ours is resynced, events may have been missed."""
        if self._acting:
            return
        self._acting = True
        log.info("shard acting", extra={"identity": self.identity, "view": list(self._view), "why": why})
        self._resync(None)

    def _resync(self, only: Callable[[str, str], bool] | None) -> None:
        for fn in list(self.on_view_change):
            try:
                fn(only)
            except Exception:
                log.exception("sharding: resync after a view change failed")

    def _stop_acting(self, why: str) -> None:
        if not self._acting:
            return
        self._acting = False
        log.warning("shard stopped acting", extra={"identity": self.identity, "why": why})

    # -- Lease I/O

    def _body(self, view: Sequence[str], holder: str, duration: int) -> dict[str, Any]:
        now = micro_time()
        own = self._own or {}
        spec = dict(own.get("spec") or {})
        spec.update(holderIdentity=holder, leaseDurationSeconds=duration, renewTime=now)
        spec.setdefault("acquireTime", now)
        meta = {
            "name": self.name,
            "namespace": self.settings.namespace,
            "labels": {GROUP_LABEL: self.group},
            "annotations": {VIEW_ANNOTATION: json.dumps(list(view))},
        }
        if own.get("metadata", {}).get("resourceVersion"):
            meta["resourceVersion"] = own["metadata"]["resourceVersion"]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _publish(self, view: Sequence[str], started: float, holder: str | None = None, duration: int = 0) -> bool:
        """Write our Lease (a renewal) with `view`; on a conflict or a deleted Lease, read or create, retry once."""
        holder = self.identity if holder is None else holder
        duration = duration or max(1, round(self.settings.lease_duration))
        timeout = self.settings.request_timeout
        for _ in range(2):
            body = self._body(view, holder, duration)
            try:
                if self._own is None:
                    self._own = self.client.request("POST", self.leases, body, timeout=timeout)
                else:
                    self._own = self.client.request("PUT", f"{self.leases}/{self.name}", body, timeout=timeout)
                self._renewed_at = started
                return True
            except ApiError as exc:
                if exc.status == 409:  # it exists (a restart under the same identity) or changed: read it
                    self._own = self._read_own(timeout)
                    continue
                if exc.status == 404:  # deleted as forgotten while we were away: create it again
                    self._own = None
                    continue
                log.warning("could not renew the membership lease", extra={"error": str(exc)[:300]})
                return False
            except Exception as exc:
                log.warning("could not renew the membership lease", extra={"error": f"{type(exc).__name__}: {exc}"})
                return False
        return False

    def _read_own(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self.client.request("GET", f"{self.leases}/{self.name}", timeout=timeout)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _list(self) -> bool:
        started = self.clock()
        try:
            found = self.client.request("GET", self.leases, query={"labelSelector": f"{GROUP_LABEL}={self.group}"})
        except Exception as exc:
            log.warning("could not read the membership leases", extra={"error": f"{type(exc).__name__}: {exc}"[:300]})
            return False
        peers: dict[str, Peer] = {}
        for lease in found.get("items") or ():
            name = lease["metadata"]["name"]
            if name == self.name:
                continue
            spec = lease.get("spec") or {}
            view = _view_of(lease)
            record = (spec, view)
            old = self._peers.get(name)
            changed_at = old.changed_at if old is not None and old.record == record else started
            peer = Peer(
                identity=spec.get("holderIdentity") or "",
                view=view,
                record=record,
                changed_at=changed_at,
                duration=float(spec.get("leaseDurationSeconds") or self.settings.lease_duration),
            )
            if started - changed_at > FORGET_AFTER * max(peer.duration, self.settings.lease_duration):
                self._forget(lease)
                continue
            peers[name] = peer
        with self._cond:
            self._peers = peers
        self._listed = True
        return True

    def _forget(self, lease: dict[str, Any]) -> None:
        """Delete a long-expired member's Lease (a pod that is gone), only as we read it."""
        meta = lease["metadata"]
        precondition = {"preconditions": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}}
        try:
            self.client.request("DELETE", f"{self.leases}/{meta['name']}", precondition)
            log.info("deleted an expired membership lease", extra={"lease": meta["name"]})
        except Exception as exc:
            log.debug("could not delete an expired membership lease", extra={"error": str(exc)[:300]})

    def release(self) -> None:
        """Clean shutdown, after the last sync: claim nothing and leave, so others take over on their next round."""
        with self._io:
            with self._cond:
                self._acting = False
                self._view = ()
            if self._own is not None and self._publish((), self.clock(), holder="", duration=1):
                log.info("left the shard group", extra={"identity": self.identity, "lease": self.name})


def _view_of(lease: dict[str, Any]) -> tuple[str, ...]:
    raw = ((lease.get("metadata") or {}).get("annotations") or {}).get(VIEW_ANNOTATION)
    try:
        view = json.loads(raw) if raw else []
    except ValueError:
        return ()
    return tuple(sorted(str(m) for m in view)) if isinstance(view, list) else ()
