"""One list+watch per resource per pod: a feeder process replicates, admission workers mirror it.

Each admission worker needs the replicated objects in its own engine, but
the API server need not send them once per worker: the supervisor forks one
feeder process (`run_feed`) that holds the informers and the store
(`Replicator`), and each worker (`ReplicaFeed`) connects to it over a Unix
socket, asks for the resources its policies declare, and keeps a mirror
store: the whole document when it connects, then each batch of changes, with
the feeder's readiness and watch health beside them. A replacement worker
takes a copy from the feeder instead of listing again. A worker is ready once
the feeder has every resource it asked for in: a status is taken before the
data sent with it, so what arrives holds at least what that status says.

If the feeder dies the supervisor starts another; workers keep deciding on
the data they hold, say so in their watch health, reconnect, and take the new
feeder's copy once it has listed everything they asked for (it sends only its
status until then).

Both ends hold a `TextReplicaStore`: each object as its JSON text, so a
worker keeps no Python copy of the replicated objects (its engine loads
the texts joined). The protocol, over `multiprocessing.connection`
(authenticated, pickled messages):

* worker -> feeder: `(refs, excluded)`, the resources its policies read and
  the namespace patterns left out, again whenever they change.
* feeder -> worker: `(kind, status, payload)`, status being `{"seeded":
  [resource...], "health": {resource: watch health}, "objects": n}` taken
  before the payload, so the payload holds at least what `seeded` says:
  - `("document", status, bytes)`: the whole store's document pickled
    (`resource -> [namespace ->] name -> JSON text`); the worker replaces its
    own with it (first, and whenever the feeder's log no longer reaches back);
  - `("changes", status, [Change...])`: the store's changes since the last
    message, in order; each value is None (a removal) or that document's
    shape at the change's path (an object's text, or dicts down to texts);
  - `("status", status, None)`: no data (nothing new for `HEALTH_SECONDS`,
    or the worker's resources are still being listed: no document yet).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import socket
import threading
import time
from collections.abc import Iterable
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from regokite.clusterdata.store import ResourceRef, TextReplicaStore
from regokite.kube.client import KubeClient
from regokite.replication.replicate import Replicator

log = logging.getLogger("regokite.clusterdata")

POLL_SECONDS = 0.01  # how often the feeder looks for new changes: the delay it adds to a change
HEALTH_SECONDS = 1.0  # how often the watch health goes out when nothing else does
RECONNECT_SECONDS = 0.5
SILENCE_SECONDS = 30 * HEALTH_SECONDS  # a worker that hears nothing for this long (a hung feeder) counts the feed lost


def _seeded(replicator: Replicator) -> list[str]:
    """The resources whose initial list is in the store."""
    pending = set(replicator.pending())
    return [str(r) for r in replicator.resources if str(r) not in pending]


def _status(replicator: Replicator) -> dict[str, Any]:
    return {
        "seeded": _seeded(replicator),
        "health": replicator.health(),
        "objects": len(replicator.store),
    }


def run_feed(address: str, authkey: bytes, kubeconfig: str | None, root: str) -> None:
    """The feeder process: serve every worker that connects until the supervisor is gone."""
    parent = os.getppid()
    replicator = Replicator(KubeClient(kubeconfig), TextReplicaStore(root))
    listener = Listener(address, family="AF_UNIX", authkey=authkey)
    threading.Thread(target=_accept, args=(listener, replicator), name="feed accept", daemon=True).start()
    log.info("replica feeder serving", extra={"pid": os.getpid()})
    while os.getppid() == parent:
        time.sleep(0.5)
    replicator.stop()


def _accept(listener: Listener, replicator: Replicator) -> None:
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError) as exc:  # a bad handshake (authkey) is that client's problem
            log.warning("replica feed: connection refused", extra={"error": str(exc)})
            continue
        threading.Thread(target=_serve, args=(conn, replicator), name="feed worker", daemon=True).start()


def _serve(conn: Connection, replicator: Replicator) -> None:
    """One worker: its requests on a thread of their own; once every resource it asked for is listed,
    the document and then its changes as they come (until then only the status: a worker that
    holds data from an earlier feeder keeps deciding on it)."""
    asked: dict[str, set[str]] = {}
    threading.Thread(target=_requests, args=(conn, replicator, asked), name="feed requests", daemon=True).start()
    store = replicator.store
    seen: int | None = None
    sent_seeded: list[str] | None = None  # what the last data sent said was listed
    sent_at = 0.0
    try:
        while True:
            quiet = seen == store.generation and _seeded(replicator) == sent_seeded
            if quiet and time.monotonic() - sent_at < HEALTH_SECONDS:
                time.sleep(POLL_SECONDS)  # nothing new and no health due: no status to build
                continue
            status = _status(replicator)
            # only the first document waits for everything asked; a worker that has one gets the changes
            # of what it holds while a resource asked later is listed (its status says what is seeded)
            waiting = seen is None and ("refs" not in asked or not asked["refs"] <= set(status["seeded"]))
            changes = None if seen is None else store.changes_since(seen)
            if waiting:
                if time.monotonic() - sent_at < HEALTH_SECONDS:
                    time.sleep(POLL_SECONDS)
                    continue
                conn.send(("status", status, None))
            elif changes is None:
                seen, document = _pickled(store)
                conn.send(("document", status, document))
            elif changes or status["seeded"] != sent_seeded:
                # a resource listed after the changes that filled it went out: its readiness goes as
                # (possibly empty) changes, since a worker takes what is seeded only beside data
                seen += len(changes)
                conn.send(("changes", status, changes))
            elif time.monotonic() - sent_at >= HEALTH_SECONDS:
                conn.send(("status", status, None))
            else:
                time.sleep(POLL_SECONDS)
                continue
            if not waiting:
                sent_seeded = status["seeded"]
            sent_at = time.monotonic()
    except (OSError, EOFError, ValueError):  # the worker is gone
        conn.close()
    except Exception:  # any other failure ends this worker's feed loudly: it reconnects and takes a copy
        log.exception("replica feed: serving a worker failed")
        conn.close()


def _pickled(store: TextReplicaStore) -> tuple[int, bytes]:
    """The whole document, pickled under the store's lock, and its generation."""
    holder: list[bytes] = []
    generation = store.full(lambda document: holder.append(pickle.dumps(document, pickle.HIGHEST_PROTOCOL)))
    return generation, holder[0]


def _requests(conn: Connection, replicator: Replicator, asked: dict[str, set[str]]) -> None:
    try:
        while True:
            refs, excluded = conn.recv()
            replicator.exclude(excluded)
            replicator.ensure(refs)
            asked["refs"] = {str(r) for r in refs}
    except (OSError, EOFError, ValueError):
        return
    except Exception:  # a request that cannot be served ends the connection, not only this thread
        log.exception("replica feed: a worker's request failed")
        conn.close()


class ReplicaFeed:
    """A worker's mirror of the feeder's store, with the Replicator's interface for the admission server."""

    def __init__(self, address: str, authkey: bytes, client: KubeClient, store: TextReplicaStore) -> None:
        self.address, self.authkey = address, authkey
        self.client = client  # for access checks before asking for a resource
        self.store = store
        self._wanted: set[ResourceRef] = set()
        self._excluded: tuple[str, ...] = ()
        self._status: dict[str, Any] = {"seeded": [], "health": {}, "objects": 0}
        self._held: set[str] = set()  # the resources whose objects the mirror holds
        self._ready_at: int | None = None  # the store's generation when it last became ready
        self._changed = threading.Condition()
        self._conn_lock = threading.Lock()  # the connection is sent on, shut down and closed under it
        self._conn: Connection | None = None
        self._stopped = threading.Event()
        self._announced = False
        threading.Thread(target=self._follow, name="replica feed", daemon=True).start()

    @property
    def resources(self) -> tuple[ResourceRef, ...]:
        return tuple(sorted(self._wanted))

    def exclude(self, patterns: Iterable[str]) -> None:
        self._excluded = tuple(sorted(set(patterns)))
        self._ask()

    def ensure(self, refs: Iterable[ResourceRef]) -> None:
        with self._changed:
            if not set(refs) <= self._wanted:
                self._ready_at = None
            self._wanted |= set(refs)
        self._ask()

    def ready(self) -> bool:
        return bool(self._wanted) and not self.pending()

    def ready_at(self) -> int | None:
        """The store's generation when it became ready (what an engine must hold at least), or None."""
        return self._ready_at if self.ready() else None

    def wait_ready(self, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(self.ready, timeout)

    def pending(self) -> list[str]:
        return [str(r) for r in sorted(self._wanted) if str(r) not in self._held]

    def health(self) -> dict[str, dict]:
        """The feeder's watches; each marked disconnected while this worker cannot reach the feeder."""
        if self._conn is not None:
            return self._status["health"]
        return {name: {**watch, "connected": False} for name, watch in self._status["health"].items()}

    def objects(self) -> int:
        return self._status["objects"]

    def stop(self) -> None:
        """End the feed: the follower sees its connection end and closes it (closed here, its
        descriptor could be reused by another file before the follower closed it again)."""
        self._stopped.set()
        with self._conn_lock:
            if self._conn is not None:
                with contextlib.suppress(OSError), socket.socket(fileno=os.dup(self._conn.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)

    def _ask(self) -> None:
        with self._conn_lock:
            if self._conn is not None:
                with contextlib.suppress(OSError, ValueError):  # the follower reconnects and asks again
                    self._conn.send((sorted(self._wanted), self._excluded))

    def _follow(self) -> None:
        while not self._stopped.is_set():
            try:
                conn = Client(self.address, family="AF_UNIX", authkey=self.authkey)
            except (OSError, EOFError):  # the feeder is starting, or being replaced
                time.sleep(RECONNECT_SECONDS)
                continue
            with self._conn_lock:
                if self._stopped.is_set():
                    conn.close()
                    return
                self._conn = conn
            self._ask()
            try:
                while True:
                    if not conn.poll(SILENCE_SECONDS):  # a feeder that says nothing is as good as gone
                        raise EOFError(f"nothing from the feeder for {SILENCE_SECONDS:.0f}s")
                    self._receive(*conn.recv())
            except Exception as exc:  # whatever ends the feed, the worker says so in its watch health
                with self._conn_lock:
                    self._conn = None
                    conn.close()
                if not self._stopped.is_set():
                    log.error("replica feed lost; deciding on the data held", extra={"error": str(exc)})
                    time.sleep(RECONNECT_SECONDS)

    def _receive(self, kind: str, status: dict[str, Any], payload: Any) -> None:
        if kind == "document":
            self.store.replace(pickle.loads(payload))
        elif kind == "changes":
            self.store.apply(payload)
        with self._changed:
            if kind != "status":  # the data now holds what the feeder had listed when it sent this
                self._held = set(status["seeded"])
                if self._ready_at is None and self.ready():
                    self._ready_at = self.store.generation
            self._status = status
            self._changed.notify_all()
        if not self._announced and self._wanted and self.ready():
            self._announced = True
            log.info("replica received", extra={"objects": status["objects"], "resources": status["seeded"]})
