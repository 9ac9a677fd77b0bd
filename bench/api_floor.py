"""The API server's own floor under the Fanout job, for `bench.controller_converge` to divide by.

A controller cannot converge faster than the API server takes the writes the
job needs: per parent its create, three ConfigMap applies and one status
patch. `write_job` makes them directly, with regokite's own REST client (the
cheapest client here: no model classes, credentials checked once a second),
from a number of threads, each parent's writes either

* `sequential`: one thread makes a parent's five writes in order, or
* `pipelined`: after the create, its four writes are independent tasks for
  any thread (as a controller's write pool takes them);

the bench sweeps THREADS x MODES and calls the fastest the floor. With `watched`, the run also holds
the two watches a controller of the job cannot do without (its parents and its children, as
regokite's informers open them) and decodes their events: what those writes cost the API server
once somebody reacts to them.

`python -m bench.api_floor react KUBECONFIG NAMESPACE` is the reaction's floor: a process that does
a controller's reaction with nothing in between, no cache, no queue, no hook: on each parent event
whose `spec.value` it has not written yet, the three children's applies at once (regokite's write
pool does the same), then the status patch (the generation it observed), until killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.common import Phase
from regokite.kube.client import JSON_PATCH, KubeClient

THREADS = (1, 2, 4, 8, 16, 32)
MODES = ("sequential", "pipelined")
WRITES_PER_PARENT = 5  # create, three children, status
# Metacontroller's contract writes the hook's status on the sync that creates the children too (none
# observed yet), so a conforming controller makes one more write per parent than the job itself needs
FANOUTS = "/apis/example.com/v1/namespaces/{ns}/fanouts"


@dataclass(frozen=True)
class FloorRun:
    threads: int
    mode: str
    parents: int
    seconds: float
    statuses: int = 1  # status writes per parent
    watched: bool = False  # under a controller's watches (`watching`)
    events: int = 0  # what those watches brought
    cpu: Phase | None = field(default=None, compare=False)  # where the CPU went meanwhile, once measured

    @property
    def writes(self) -> int:
        return (WRITES_PER_PARENT - 1 + self.statuses) * self.parents

    @property
    def rate(self) -> float:
        return self.writes / self.seconds

    def describe(self) -> str:
        return f"{self.threads:2d} threads, {self.mode:<10}"


def parent(ns: str, name: str, value: str = "v0") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Fanout",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"value": value},
    }


def _child(ns: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
    ref = {
        "apiVersion": "example.com/v1",
        "kind": "Fanout",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {"name": name, "namespace": ns, "ownerReferences": [ref]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"value": "v0"}}


def react(kubeconfig: str, ns: str) -> None:
    """The reaction's floor (see the module's doc): watches the parents of `ns` until killed."""
    client = KubeClient(kubeconfig, pool_size=16)
    parents = FANOUTS.format(ns=ns)
    pool = ThreadPoolExecutor(16)
    written: dict[str, Any] = {}
    rv = client.get(parents, limit=1)["metadata"]["resourceVersion"]
    print("ready", flush=True)  # parents created from now on are seen
    while True:
        for event in client.stream(parents, {"watch": "true", "resourceVersion": rv}, timeout=600):
            obj = event["object"]
            rv = obj["metadata"]["resourceVersion"]
            name, value = obj["metadata"]["name"], (obj.get("spec") or {}).get("value")
            if event["type"] == "DELETED" or written.get(name) == value:
                continue
            written[name] = value
            writes = []
            for c in range(3):
                body = _child(ns, f"{name}-{c}", obj)
                body["data"]["value"] = value
                path = f"/api/v1/namespaces/{ns}/configmaps/{name}-{c}"
                writes.append(pool.submit(client.apply, path, body, "bench", force=True))
            for f in writes:
                f.result()
            status = {"configMaps": 3, "observedGeneration": obj["metadata"].get("generation")}
            client.patch(f"{parents}/{name}/status", [{"op": "add", "path": "/status", "value": status}], JSON_PATCH)


@contextlib.contextmanager
def watching(client: KubeClient, watches: list[tuple[str, Callable[[], Any]]]) -> Iterator[list[int]]:
    """Watches on each (path, poke), open (the API server answered) before this yields, each read and
    decoded by a thread until the block ends; yields the events each brought so far. At the end each
    reader stops at the event its `poke` (a write seen on that path) brings: closing a stream another
    thread is reading can block in urllib3."""
    counts = [0] * len(watches)
    streams = []
    stop = threading.Event()
    for path, _ in watches:
        rv = client.get(path, limit=1)["metadata"]["resourceVersion"]
        query = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        streams.append(client.stream(path, query, timeout=600))

    def read(i: int) -> None:
        for _ in streams[i]:
            counts[i] += 1
            if stop.is_set():
                return

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(len(watches))]
    for reader in readers:
        reader.start()
    try:
        yield counts
    finally:
        stop.set()
        for (_, poke), reader in zip(watches, readers, strict=True):
            poke()
            reader.join(timeout=30)
        for stream in streams:
            stream.close()


def write_job(
    kubeconfig: str, ns: str, n: int, threads: int, mode: str, statuses: int = 1, watched: bool = False
) -> FloorRun:
    """The job's writes for n parents in namespace `ns` (which must exist), timed; `statuses=2` first
    writes the status of no children, as the contract's creating sync does; `watched`: under the
    watches of a controller of the job (`watching` its parents and ConfigMaps)."""
    client = KubeClient(kubeconfig, pool_size=threads + 2)
    parents = FANOUTS.format(ns=ns)
    pool = ThreadPoolExecutor(threads)
    later: list[Future[Any]] = []
    lock = threading.Lock()

    def set_status(path: str, counts: list[int]) -> None:
        for count in counts:
            client.patch(path, [{"op": "add", "path": "/status", "value": {"configMaps": count}}], JSON_PATCH)

    def one(i: int) -> None:
        created = client.request("POST", parents, parent(ns, f"p{i}"))
        writes: list[Callable[[], Any]] = []
        for c in range(3):
            name = f"p{i}-{c}"
            body = _child(ns, name, created)
            writes.append(partial(client.apply, f"/api/v1/namespaces/{ns}/configmaps/{name}", body, "bench"))
        writes.append(partial(set_status, f"{parents}/p{i}/status", [0, 3][-statuses:]))
        if mode == "sequential":
            for write in writes:
                write()
            return
        with lock:
            later.extend(pool.submit(write) for write in writes)

    configmaps = f"/api/v1/namespaces/{ns}/configmaps"
    watches = (
        [
            (parents, lambda: client.patch(f"{parents}/p0", {"metadata": {"labels": {"watched": "done"}}})),
            (configmaps, lambda: client.request("POST", configmaps, {"metadata": {"name": "watched-done"}})),
        ]
        if watched
        else []
    )
    try:
        with watching(client, watches) as events:
            t0 = time.perf_counter()
            for f in [pool.submit(one, i) for i in range(n)]:
                f.result()
            with lock:
                rest = list(later)
            for f in rest:
                f.result()
            run = FloorRun(threads, mode, n, time.perf_counter() - t0, statuses, watched)
            deadline = time.monotonic() + 30  # each write's event read, as a controller reads them all
            while watched and sum(events) < run.writes and time.monotonic() < deadline:
                time.sleep(0.01)
            return dataclasses.replace(run, events=sum(events))
    finally:
        pool.shutdown()
        client.close()


if __name__ == "__main__" and sys.argv[1:2] == ["react"]:
    react(sys.argv[2], sys.argv[3])
