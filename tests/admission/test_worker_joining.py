"""A worker that starts beside serving ones accepts connections only once it can decide (worker.until_it_decides)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from regokite.admission.worker import until_it_decides


class Engine:
    def __init__(self) -> None:
        self.generation = 1

    def loaded_generation(self) -> int:
        return self.generation


def state(engine: Engine, stopping: bool = False) -> SimpleNamespace:
    replica = SimpleNamespace(ready=lambda: True, ready_at=lambda: 2, objects=lambda: 6, pending=lambda: [])
    return SimpleNamespace(replica=replica, policy_set=SimpleNamespace(engine=engine), stopping=lambda: stopping)


def test_it_returns_once_the_engine_holds_the_replica() -> None:
    engine = Engine()

    async def scenario() -> bool:
        waiting = asyncio.create_task(until_it_decides(state(engine)))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)
        still_waiting = not waiting.done()
        engine.generation = 2  # the loader caught up with the replica
        await asyncio.wait_for(waiting, 5)
        return still_waiting

    assert asyncio.run(scenario())


def test_a_stopping_worker_does_not_wait() -> None:
    asyncio.run(asyncio.wait_for(until_it_decides(state(Engine(), stopping=True)), 5))  # type: ignore[arg-type]
