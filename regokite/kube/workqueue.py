"""A work queue keyed by object, in the spirit of client-go's rate-limited queue.

* a key waiting in the queue is never queued twice (adds coalesce);
* a key being processed is not handed to a second worker: an add during
  processing marks it dirty and it is queued again when `done` is called;
* `add_after` schedules a key (resyncs, resyncAfterSeconds);
* `add_rate_limited` backs off exponentially per key until `forget`.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable


class WorkQueue:
    def __init__(self, base_delay: float = 0.005, max_delay: float = 300.0, name: str = "") -> None:
        self.name = name
        self.base_delay = base_delay
        self.max_delay = max_delay
        # one lock, two conditions: an add wakes one idle worker (not all of them and the
        # timer, each of which would take the GIL to go back to sleep), a delayed add the timer
        self._cond = threading.Condition()
        self._timer_cond = threading.Condition(self._cond)
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._waiting: dict[Hashable, float] = {}  # earliest scheduled time per delayed key
        self._seq = itertools.count()
        self._shutting_down = False
        self._timer = threading.Thread(target=self._run_timer, name=f"workqueue-timer-{name}", daemon=True)
        self._timer.start()

    # -- adding

    def add(self, key: Hashable) -> None:
        with self._cond:
            if self._shutting_down or key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        when = time.monotonic() + delay
        with self._cond:
            if self._shutting_down:
                return
            if key in self._waiting and self._waiting[key] <= when:
                return  # an earlier wake-up already covers this one
            self._waiting[key] = when
            heapq.heappush(self._delayed, (when, next(self._seq), key))
            self._timer_cond.notify()

    def add_rate_limited(self, key: Hashable) -> float:
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        delay = min(self.base_delay * (2**n), self.max_delay)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self._cond:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._cond:
            return self._failures.get(key, 0)

    # -- processing

    def get(self, timeout: float | None = None) -> Hashable | None:
        """The next key, or None once shut down (or after `timeout`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._queue:
                if self._shutting_down:
                    return None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            key = self._queue.popleft()
            self._processing.add(key)
            self._dirty.discard(key)
            return key

    def done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def delayed(self) -> int:
        with self._cond:
            return len(self._waiting)

    def shutdown(self) -> None:
        with self._cond:
            self._shutting_down = True
            self._queue.clear()
            self._dirty.clear()
            self._cond.notify_all()
            self._timer_cond.notify_all()

    # -- delayed adds

    def _run_timer(self) -> None:
        with self._cond:
            while not self._shutting_down:
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    when, _, key = heapq.heappop(self._delayed)
                    if self._waiting.get(key) == when:
                        del self._waiting[key]
                        if key not in self._dirty:
                            self._dirty.add(key)
                            if key not in self._processing:
                                self._queue.append(key)
                                self._cond.notify()
                timeout = self._delayed[0][0] - now if self._delayed else None
                self._timer_cond.wait(timeout)
