"""The API server's own floor under the Fanout job, for `bench.controller_converge` to divide by.

A controller cannot converge faster than the API server takes the writes the
job needs: per parent its create, three ConfigMap applies and one status
patch. `write_job` makes them directly, with regokite's own REST client (the
cheapest client here: no model classes, credentials checked once a second),
from a number of threads, each parent's writes either

* `sequential`: one thread makes a parent's five writes in order, or
* `pipelined`: after the create, its four writes are independent tasks for
  any thread (as a controller's write pool takes them);

the bench sweeps THREADS x MODES and calls the fastest the floor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

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


def write_job(kubeconfig: str, ns: str, n: int, threads: int, mode: str, statuses: int = 1) -> FloorRun:
    """The job's writes for n parents in namespace `ns` (which must exist), timed; `statuses=2` first
    writes the status of no children, as the contract's creating sync does."""
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

    try:
        t0 = time.perf_counter()
        for f in [pool.submit(one, i) for i in range(n)]:
            f.result()
        with lock:
            rest = list(later)
        for f in rest:
            f.result()
        return FloorRun(threads, mode, n, time.perf_counter() - t0, statuses)
    finally:
        pool.shutdown()
        client.close()
