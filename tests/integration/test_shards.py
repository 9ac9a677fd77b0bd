"""`regokite controller --shards` replicas split 1,500 parents; SIGKILL and scale-up hand over without double writes.

Every replica logs each write ("wrote", with the path, at debug) and each
view it moves to ("shard view changed", logged before the view takes effect)
or stops acting on. The audit reads those logs: every write was made under a
view that gave the parent to the writer, the writers of one parent form
consecutive runs, and a parent's new writer wrote only after the old one had
left the view that gave it the parent (or was killed).
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import kube
import pytest
from kube import Cluster, create, get, merge_patch
from kubernetes import client

from regokite.runtime.shards import object_key, owner
from tests.controllers.fanout import CHILDREN, STATUS, controller
from tests.controllers.process import ControllerProcess

GROUP = "shards.regokite.test"
PARENTS = 1500
LEASE = ["--leader-election-lease-duration", "4", "--leader-election-renew-deadline", "3"]
LEASE += ["--leader-election-retry-period", "0.5"]
PARENT_OF = re.compile(r"/(?:fanouts|configmaps)/(p\d+)(?:-\d)?(?:/status)?$")


def _ts(record: dict) -> float:
    return dt.datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def gauge(ctl: ControllerProcess, name: str) -> float:
    for line in ctl.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} in metrics")


def shards_of(ctl: ControllerProcess) -> dict:
    return ctl.readiness().get("shards") or {}


def settled(ctl: ControllerProcess, view: list[str]) -> bool:
    s = shards_of(ctl)
    return s.get("view") == view and s.get("agreed") is True and s.get("acting") is True


class Replica(ControllerProcess):
    def __init__(self, cluster: Cluster, namespace: str, ident: str, files: Path) -> None:
        extra = ["--shards", "--leader-election-namespace", namespace, "--leader-election-id", ident]
        extra += ["--field-manager", f"regokite-{ident}", "--hook-processes", "1", *LEASE]
        super().__init__(
            cluster.kubeconfig,
            policies=[files / "policies"],
            controllers=[files / "controller.yaml"],
            namespace=namespace,
            extra=extra,
        )
        self.ident = ident
        self.killed_at: float | None = None

    def audit(self) -> tuple[list[tuple[float, str]], list[tuple[float, list[str] | None]]]:
        """(time, parent) of every write; (time, view) of every view change, None when it stopped acting."""
        writes, views = [], []
        for r in self.log_records():
            if r.get("msg") == "wrote" and (m := PARENT_OF.search(r.get("path", ""))):
                writes.append((_ts(r), m[1]))
            elif r.get("msg") == "shard view changed":
                views.append((_ts(r), r["to"]))
            elif r.get("msg") == "shard stopped acting":
                views.append((_ts(r), None))
        return writes, views


class Churn(threading.Thread):
    """Changes a parent's spec every few milliseconds until stopped."""

    def __init__(self, api: client.ApiClient, parents: str) -> None:
        super().__init__(daemon=True)
        self.api, self.parents = api, parents
        self.halt = threading.Event()
        self.last: dict[str, str] = {}
        self.count = 0

    def run(self) -> None:
        while not self.halt.wait(0.02):
            name = f"p{(self.count * 37) % 300}"  # the first 300 parents, each changed again and again
            value = f"churn-{self.count}"
            merge_patch(self.api, f"{self.parents}/{name}", {"spec": {"value": value}})
            self.last[name] = value
            self.count += 1

    def stop(self) -> None:
        self.halt.set()
        self.join()


def first_of(namespace: str, ident: str, members: str) -> str:
    """The first parent beyond the churned ones that `members` give `ident`."""
    return next(f"p{i}" for i in range(300, PARENTS) if owner(object_key(namespace, f"p{i}"), list(members)) == ident)


def view_at(views: list[tuple[float, list[str] | None]], t: float) -> list[str] | None:
    current = None
    for at, view in views:
        if at > t:
            break
        current = view
    return current


@pytest.fixture
def files(tmp_path: Path, api: client.ApiClient) -> Path:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "fanout.rego").write_text(CHILDREN + STATUS)
    (tmp_path / "controller.yaml").write_text(controller(GROUP))
    kube.install_crd(api, kube.crd_manifest(GROUP, "Fanout"))
    return tmp_path


def test_three_replicas_split_the_parents_and_hand_over_on_kill_and_scale_up_without_double_writes(
    cluster: Cluster, api: client.ApiClient, namespace: str, files: Path
) -> None:
    parents = f"/apis/{GROUP}/v1/namespaces/{namespace}/fanouts"
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"

    def converged(value: str = "v0") -> int:
        done = {
            p["metadata"]["name"] for p in get(api, parents)["items"] if (p.get("status") or {}).get("configMaps") == 3
        }
        values = defaultdict(int)
        for cm in get(api, configmaps)["items"]:
            if (cm.get("data") or {}).get("value") == value and cm["metadata"].get("ownerReferences"):
                values[cm["metadata"]["name"].rsplit("-", 1)[0]] += 1
        return sum(1 for name in done if values[name] == 3)

    a, b, c = (Replica(cluster, namespace, x, files) for x in "abc")
    d = Replica(cluster, namespace, "d", files)
    with a, b, c:
        for r in (a, b, c):
            kube.wait_for(lambda r=r: settled(r, ["a", "b", "c"]), what=f"{r.ident} in a view of three")
        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            body = lambda i: {"metadata": {"name": f"p{i}"}, "spec": {"value": "v0"}}  # noqa: E731
            list(pool.map(lambda i: create(api, parents, {"apiVersion": f"{GROUP}/v1", "kind": "Fanout", **body(i)}),
                          range(PARENTS)))  # fmt: skip
        kube.wait_for(converged, lambda n: n == PARENTS, what="1,500 parents converged", timeout=240, interval=1)
        print(f"3 replicas: {PARENTS} parents converged in {time.monotonic() - started:.1f} s")

        owned = {}
        for r in (a, b, c):
            kube.wait_for(lambda r=r: gauge(r, "regokite_shard_owned_objects"), lambda n: n > 0, what="owned gauge")
            owned[r.ident] = gauge(r, "regokite_shard_owned_objects")
        print(f"owned per replica: {owned}")
        assert sum(owned.values()) == PARENTS
        assert all(0.25 * PARENTS <= n <= 0.42 * PARENTS for n in owned.values()), owned

        # From here on, parents change all the time, so hand-overs happen with syncs in flight.
        churn = Churn(api, parents)
        churn.start()

        # SIGKILL c: a and b take its parents once its Lease has expired by their clocks (4 s).
        victim = first_of(namespace, "c", "abc")  # beyond the churned ones
        c.proc.kill()
        c.proc.wait()
        c.killed_at = time.time()
        killed = time.monotonic()
        merge_patch(api, f"{parents}/{victim}", {"spec": {"value": "after-kill"}})
        kube.wait_for(
            lambda: get(api, f"{configmaps}/{victim}-2")["data"]["value"],
            lambda v: v == "after-kill",
            what="c's parent applied by a survivor",
            timeout=4 + 10,  # the lease, then a list of the parents and children it did not cache (busy machine)
            interval=0.1,
        )
        print(f"after SIGKILL: a spec change on c's parent applied in {time.monotonic() - killed:.2f} s")
        for r in (a, b):
            kube.wait_for(lambda r=r: settled(r, ["a", "b"]), what=f"{r.ident} in a view of two")

        # Scale 3 -> 4 (d joins a and b): d takes its share, and a change to one of d's parents is d's.
        with d:
            for r in (a, b, d):
                kube.wait_for(lambda r=r: settled(r, ["a", "b", "d"]), what=f"{r.ident} in a view of three again")
            mine = first_of(namespace, "d", "abd")
            merge_patch(api, f"{parents}/{mine}", {"spec": {"value": "after-join"}})
            kube.wait_for(
                lambda: get(api, f"{configmaps}/{mine}-2")["data"]["value"], lambda v: v == "after-join", what="d"
            )
            manager = [m["manager"] for m in get(api, f"{configmaps}/{mine}-2")["metadata"]["managedFields"]]
            assert "regokite-d" in manager
            kube.wait_for(lambda: gauge(d, "regokite_shard_owned_objects"), lambda n: n > 0.2 * PARENTS, what="d")
            assert gauge(d, 'regokite_shard_handovers_total{direction="in"}') > 0.2 * PARENTS
            assert gauge(a, 'regokite_shard_handovers_total{direction="out"}') > 0
            churn.stop()
            for name, value in churn.last.items():  # every change, made under whichever owner, arrived
                kube.wait_for(
                    lambda name=name: get(api, f"{configmaps}/{name}-0")["data"]["value"],
                    lambda v, value=value: v == value,
                    what=f"{name} at {value}",
                )
            print(f"churn: {churn.count} spec changes to {len(churn.last)} parents, all applied")
            for r in (a, b, d):
                r.stop()

    audit({r.ident: r for r in (a, b, c, d)}, namespace)


def audit(replicas: dict[str, Replica], namespace: str) -> None:
    by_parent: dict[str, list[tuple[float, str]]] = defaultdict(list)
    views = {}
    for ident, r in replicas.items():
        writes, views[ident] = r.audit()
        assert writes, f"{ident} wrote nothing"
        for t, parent in writes:
            view = view_at(views[ident], t)
            assert view and owner(object_key(namespace, parent), view) == ident, (
                f"{ident} wrote {parent} at {t} under the view {view}"
            )
            by_parent[parent].append((t, ident))
    handed = 0
    for parent, writes in by_parent.items():
        writes.sort()
        runs = [writes[0]]
        for w in writes[1:]:
            if w[1] != runs[-1][1]:
                runs.append(w)
        assert len({ident for _, ident in runs}) == len(runs), f"{parent}: writers interleave: {runs}"
        for (_, old), (t_new, new) in itertools.pairwise(runs):
            last_old = max(t for t, ident in writes if ident == old and t < t_new)
            gone = replicas[old].killed_at
            key = object_key(namespace, parent)
            left = [t for t, view in views[old] if t >= last_old and (view is None or owner(key, view) != old)]
            assert (gone is not None and gone <= t_new) or any(t <= t_new for t in left), (
                f"{parent}: {new} wrote at {t_new} before {old} (last write {last_old}) let it go"
            )
            handed += 1
    print(f"audit: {sum(len(w) for w in by_parent.values())} writes to {len(by_parent)} parents, {handed} hand-overs")
    assert handed > 0


class StatusWatch(threading.Thread):
    """Every status a parent is given from `since` on, by watching the parents."""

    def __init__(self, api: client.ApiClient, parents: str, since: str) -> None:
        super().__init__(daemon=True)
        self.api, self.parents, self.rv = api, parents, since
        self.halt = threading.Event()
        self.seen: list[tuple[str, object]] = []

    def run(self) -> None:
        while not self.halt.is_set():
            for event in kube.watch(self.api, self.parents, resource_version=self.rv, timeout_seconds=5):
                obj = event["object"]
                self.rv = obj["metadata"].get("resourceVersion") or self.rv
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.seen.append((obj["metadata"]["name"], (obj.get("status") or {}).get("configMaps")))
                if self.halt.is_set():
                    return


def cached(ctl: ControllerProcess, namespace: str) -> dict[str, int]:
    """How many objects each of the replica's informers holds, by resource."""
    watches = ctl.readiness().get("watches") or {}
    return {name.split(".")[0]: w["objects"] for name, w in watches.items() if name.endswith(f" in {namespace}")}


def test_each_replica_caches_only_its_share_and_a_survivor_loads_the_moved_parents_before_acting(
    cluster: Cluster, api: client.ApiClient, namespace: str, files: Path
) -> None:
    n = 120
    parents = f"/apis/{GROUP}/v1/namespaces/{namespace}/fanouts"
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    names = [f"p{i}" for i in range(n)]
    share = {x: {p for p in names if owner(object_key(namespace, p), ["a", "b"]) == x} for x in "ab"}

    def converged(among: set[str], value: str) -> int:
        done = {
            p["metadata"]["name"] for p in get(api, parents)["items"] if (p.get("status") or {}).get("configMaps") == 3
        }
        values: dict[str, int] = defaultdict(int)
        for cm in get(api, configmaps)["items"]:
            if (cm.get("data") or {}).get("value") == value and cm["metadata"].get("ownerReferences"):
                values[cm["metadata"]["name"].rsplit("-", 1)[0]] += 1
        return sum(1 for p in among & done if values[p] == 3)

    a, b = (Replica(cluster, namespace, x, files) for x in "ab")
    with a:
        with b:
            for r in (a, b):
                kube.wait_for(lambda r=r: settled(r, ["a", "b"]), what=f"{r.ident} in a view of two")
            for p in names:
                create(api, parents, {"apiVersion": f"{GROUP}/v1", "kind": "Fanout", "metadata": {"name": p},
                                      "spec": {"value": "v0"}})  # fmt: skip
            kube.wait_for(lambda: converged(set(names), "v0"), lambda k: k == n, what="converged", timeout=120)
            orphans = sum(not cm["metadata"].get("ownerReferences") for cm in get(api, configmaps)["items"])
            for r in (a, b):  # each holds its parents, their children and the ConfigMaps no parent controls
                mine = len(share[r.ident])
                kube.wait_for(lambda r=r: cached(r, namespace), lambda c, m=mine: c == {"fanouts": m,
                              "configmaps": 3 * m + orphans}, what=f"{r.ident}'s caches")  # fmt: skip
            since = get(api, parents)["metadata"]["resourceVersion"]
        # b left (SIGTERM): a loads b's parents and children before it acts on them
        statuses = StatusWatch(api, parents, since)
        statuses.start()
        kube.wait_for(lambda: settled(a, ["a"]), what="a alone")
        assert cached(a, namespace) == {"fanouts": n, "configmaps": 3 * n + orphans}
        for p in share["b"]:
            merge_patch(api, f"{parents}/{p}", {"spec": {"value": "moved"}})
        kube.wait_for(lambda: converged(share["b"], "moved"), lambda k: k == len(share["b"]), what="b's parents by a")
        owned = [cm for cm in get(api, configmaps)["items"] if cm["metadata"].get("ownerReferences")]
        assert len(owned) == 3 * n  # no duplicate children
        statuses.halt.set()
        wrong = [(p, s) for p, s in statuses.seen if s != 3]
        assert not wrong, f"a status written from a cache without the parent's children: {wrong[:5]}"
        for p in get(api, parents)["items"]:  # a wrote the moved parents' status, for their new spec
            assert p["status"].get("observedGeneration") == p["metadata"]["generation"], p["metadata"]["name"]
        assert gauge(a, 'regokite_shard_handovers_total{direction="in"}') >= len(share["b"])
