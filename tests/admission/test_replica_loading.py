"""A worker loads the cluster data between reviews, in steps: never inside a review, never decided on in part.

Before the engine's first complete load a review is refused as not ready (as before the initial
lists are in); after a change, reviews are decided on the last complete load until the next one is
swapped in whole; a load that takes longer than the watchdog's limit is no stuck review. Each test
drives the steps (or the watchdog's clock) itself: nothing here depends on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from regokite.admission.app import ServingState, create_app
from regokite.admission.policies import load_policy_set
from regokite.admission.reload import REPLICA_MEMORY_FACTOR, ReplicaLoader
from regokite.clusterdata.store import ReplicaStore, TextReplicaStore, parse_resource
from regokite.engine import embedded
from regokite.ops.watchdog import Watchdog
from tests.admission.reviews import deployment, review
from tests.clocks import ManualClock

READS_SETTINGS = """package admission.reads

match := {"rules": [{"apiGroups": ["apps"], "resources": ["deployments"]}]}

replicate := {"namespaced": ["v1/configmaps"]}

settings := data.kubernetes.configmaps[input.request.namespace].settings

deny contains "no settings ConfigMap" if not settings

deny contains "settings blocked" if settings.metadata.labels.blocked == "true"
"""

FILLERS = 300  # about 60 KB of text: many steps of the 4 KB the tests load at a time


class Listed:
    """A replica whose initial lists are in, as a worker's mirror once it has the feeder's copy."""

    def __init__(self, store: ReplicaStore) -> None:
        self.store = store
        self.resources = (parse_resource("v1/configmaps", namespaced=True),)
        self._ready_at = store.generation

    def ready(self) -> bool:
        return True

    def ready_at(self) -> int:
        return self._ready_at

    def pending(self) -> list[str]:
        return []

    def objects(self) -> int:
        return FILLERS + 1  # as the feeder's status says (a mirror does not count what it takes whole)

    def health(self) -> dict[str, dict]:
        return {}


def settings(*, blocked: bool, version: str) -> dict[str, Any]:
    labels = {"blocked": "true"} if blocked else {}
    return {"metadata": {"name": "settings", "namespace": "default", "labels": labels, "resourceVersion": version}}


def fill(store: ReplicaStore) -> None:
    """The objects, taken whole as a worker's mirror takes the feeder's copy (no log of their creation)."""
    listed = TextReplicaStore()
    for i in range(FILLERS):
        meta = {"name": f"filler-{i}", "namespace": "default", "resourceVersion": "1"}
        listed.put("configmaps", {"metadata": meta, "data": {"text": "x" * 150}}, namespaced=True)
    listed.put("configmaps", settings(blocked=False, version="1"), namespaced=True)
    store.replace(listed.document)


@pytest.fixture
def policies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(embedded, "LOAD_STEP_BYTES", 4096)
    (tmp_path / "reads.rego").write_text(READS_SETTINGS)
    return tmp_path


BODY = json.dumps(review(deployment()))


def test_reviews_wait_for_the_first_complete_load_then_are_decided_on_the_last_complete_one(policies: Path) -> None:
    store = TextReplicaStore()
    fill(store)
    policy_set = load_policy_set([str(policies)])
    policy_set.follow(store, stepped=True)
    app = create_app(ServingState(policy_set, replica=Listed(store)))  # type: ignore[arg-type]
    with TestClient(app) as client:  # its portal runs the steps on the event loop's thread, where reviews run
        refused = client.post("/validate", content=BODY)
        assert refused.status_code == 503  # an error: the webhook's failurePolicy applies
        assert refused.json()["error"] == (
            "cluster data not loaded yet (loading 301 objects into the engine): no policy decides before it is"
        )
        readyz = client.get("/readyz")
        assert readyz.status_code == 503
        assert readyz.json()["replication"]["loading"] == "loading 301 objects into the engine"

        first = policy_set.engine.load_replica()
        for _ in range(4):
            client.portal.call(next, first)  # part of the replica is in a copy of the engine
        assert client.post("/validate", content=BODY).status_code == 503  # a part decides nothing
        client.portal.call(list, first)  # the rest: swapped in whole
        assert client.get("/readyz").status_code == 200
        assert client.post("/validate", content=BODY).json()["response"]["allowed"] is True

        store.put("configmaps", settings(blocked=True, version="2"), namespaced=True)
        second = policy_set.engine.load_replica()
        for _ in range(4):
            client.portal.call(next, second)
        during = client.post("/validate", content=BODY).json()["response"]
        assert during["allowed"] is True  # the last complete load, not the change half-loaded
        client.portal.call(list, second)
        after = client.post("/validate", content=BODY).json()["response"]
        assert after["allowed"] is False and after["status"]["message"] == "[admission.reads] settings blocked"
        assert client.get("/readyz").status_code == 200

        elsewhere = review(deployment())
        elsewhere["request"]["namespace"] = elsewhere["request"]["object"]["metadata"]["namespace"] = "team"
        refused = client.post("/validate", content=json.dumps(elsewhere)).json()["response"]
        assert refused["status"]["message"] == "[admission.reads] no settings ConfigMap"
        store.put(
            "configmaps",
            {**settings(blocked=False, version="1"), "metadata": {"name": "settings", "namespace": "team"}},
            namespaced=True,
        )
        # a new object merges in the review that finds it, with no load
        assert client.post("/validate", content=json.dumps(elsewhere)).json()["response"]["allowed"] is True


class SlowStore(TextReplicaStore):
    """Making a document loadable takes `seconds` of the test's clock; the watchdog is looked at then."""

    def __init__(self, clock: ManualClock, watchdog: Watchdog, seconds: float) -> None:
        super().__init__()
        self.clock, self.watchdog, self.seconds = clock, watchdog, seconds
        self.overdue: list[Any] = []
        self.calls = 0

    def loadable(self, document: dict[str, Any]) -> str:
        self.clock.now += self.seconds
        self.calls += 1
        self.overdue += self.watchdog.overdue()
        return super().loadable(document)


def test_a_replica_load_longer_than_the_watchdog_limit_is_no_stuck_review(policies: Path) -> None:
    clock = ManualClock()
    watchdog = Watchdog(1, limit=5.0, clock=clock)
    store = SlowStore(clock, watchdog, seconds=6.0)  # each step longer than a review may take
    fill(store)
    policy_set = load_policy_set([str(policies)])
    policy_set.follow(store, stepped=True)
    allowed: list[float] = []
    state = ServingState(policy_set, replica=Listed(store), watch=watchdog.tracker(0))  # type: ignore[arg-type]
    loader = ReplicaLoader(state, state.watch, allowed.append)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(loader.run())  # as a worker runs it
        yield
        task.cancel()

    with TestClient(create_app(state, lifespan)) as client:
        early = client.post("/validate", content=BODY)  # during the load: refused, or (past it) decided
        assert early.status_code == 503 or early.json()["response"]["allowed"] is True
        deadline = time.monotonic() + 60
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the replica was never loaded"
            time.sleep(0.05)
        assert client.post("/validate", content=BODY).json()["response"]["allowed"] is True
    assert store.calls >= 10  # the load took 60+ s of the watchdog's clock, in steps of 6 s
    assert store.overdue == []  # no step, and no review, past its limit
    assert allowed and allowed[-1] == REPLICA_MEMORY_FACTOR * store.text_bytes()  # the supervisor's allowance


class BreakableStore(TextReplicaStore):
    """A store whose text regorus refuses while `broken` (as data it cannot take would be)."""

    broken = False

    def loadable(self, document: dict[str, Any]) -> str:
        return "{not json" if self.broken else super().loadable(document)


def test_a_change_that_cannot_be_loaded_fails_reviews_closed_until_a_load_completes(policies: Path) -> None:
    """Deciding on the last load for good, while the data moved on, would be deciding on data not loaded."""
    store = BreakableStore()
    store.max_lag = 0.0  # each load_replica call loads again
    fill(store)
    policy_set = load_policy_set([str(policies)])
    policy_set.follow(store, stepped=True)
    app = create_app(ServingState(policy_set, replica=Listed(store)))  # type: ignore[arg-type]
    with TestClient(app) as client:
        client.portal.call(list, policy_set.engine.load_replica())
        assert client.post("/validate", content=BODY).json()["response"]["allowed"] is True
        store.broken = True
        store.put("configmaps", settings(blocked=True, version="2"), namespaced=True)
        client.portal.call(list, policy_set.engine.load_replica())
        failed = client.post("/validate", content=BODY)
        assert failed.status_code != 200 or failed.json()["response"]["allowed"] is False, failed.text
        assert "could not be loaded" in failed.text
        store.broken = False
        client.portal.call(list, policy_set.engine.load_replica())
        after = client.post("/validate", content=BODY).json()["response"]
        assert after["allowed"] is False and after["status"]["message"] == "[admission.reads] settings blocked"


def test_the_memory_allowance_is_set_before_the_first_load(policies: Path) -> None:
    """The first load holds regorus's copy beside the text: a worker measured only after it was killed for it."""
    store = TextReplicaStore()
    fill(store)
    policy_set = load_policy_set([str(policies)])
    policy_set.follow(store, stepped=True)
    allowed: list[float] = []
    state = ServingState(policy_set, replica=Listed(store))  # type: ignore[arg-type]
    loader = ReplicaLoader(state, lambda *_: None, allowed.append)
    steps = policy_set.engine.load_replica

    def counted() -> Any:
        assert allowed == [REPLICA_MEMORY_FACTOR * store.text_bytes()]  # before any step runs
        yield from steps()

    policy_set.engine.load_replica = counted  # type: ignore[method-assign]
    asyncio.run(loader.load(policy_set))
    assert policy_set.engine.loaded_generation() == store.generation
