"""Hook evaluation in worker processes, each call bounded by its hook's timeout.

regorus holds the GIL while it evaluates and cannot be interrupted, so a hook
evaluated in the controller's own process would freeze every other
controller, the leader Lease renewal and `/healthz` until it returned, and a
runaway one for good. `HookWorkers` keeps N processes, each with its own
engine over the same bundle, and hands each call to an idle one over a pipe
(JSON both ways). The handing thread notes the call in the shared
`regokite.ops.watchdog` table (as the admission server's workers note their
reviews); a supervisor thread kills a worker past its call's timeout and the
call fails with a `HookTimeout` HookError naming package and timeout, so
only that parent's sync fails (Warning Event, backoff) while the others go on
in the remaining processes; a fresh worker takes the killed one's place.

Workers are forked from a fork server started fresh (multiprocessing's
`forkserver`), never from the controller's own threaded process, where a
fork could copy a lock some other thread holds. `reload(bundle)` moves every
later call onto workers built for a new policy set.

With replicated cluster data (`store`), each worker holds a mirror of it: a
call carries the store's changes since the generation that worker last got
(nothing when none), or the whole document for a worker that has none yet (a
new or replacing one), so a hook always sees the data as it was when its
call was handed over, and no change is ever sent twice to one worker.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from regokite import jsoncodec
from regokite.bundle import Bundle
from regokite.clusterdata.store import ReplicaStore, decode_changes, encode_changes
from regokite.controllers.hooks import ResolvedHook, evaluate_hook
from regokite.controllers.schema import DEFAULT_HOOK_TIMEOUT, HookTarget
from regokite.engine import EngineSettings, builtin_errors, open_engine
from regokite.errors import HookError, RegokiteError
from regokite.ops import builtin_error_metrics
from regokite.ops import controller_metrics as metrics
from regokite.ops import logging as ops_logging
from regokite.ops.watchdog import Overdue, Watchdog

builtin_errors.listen(builtin_error_metrics.count)  # this server's /metrics counts its undefined calls

log = logging.getLogger("regokite.controller")
START_SECONDS = 120.0  # a worker must have built its engine by then
# how often calls are checked against their timeouts: a call is killed at most this late
# (hook timeouts are seconds; checking more often costs the controller's other threads the GIL)
SUPERVISE_SECONDS = 0.1
_CONTEXT = multiprocessing.get_context("forkserver")


@dataclass(eq=False)
class Worker:
    process: Any  # multiprocessing's ForkServerProcess
    conn: Connection
    slot: int
    generation: int
    note: Any = field(repr=False)  # the watchdog tracker of `slot`
    seen: int | None = None  # the replica generation its mirror holds; None: no data sent yet


class HookWorkers:
    """`processes` evaluation processes over `bundle`; `evaluate` is safe from any number of threads."""

    def __init__(
        self,
        bundle: Bundle,
        *,
        processes: int = 1,
        engine: EngineSettings | None = None,
        store: ReplicaStore | None = None,
    ) -> None:
        self.processes = max(1, processes)
        self._bundle = bundle
        self._store = store
        self._engine = engine or EngineSettings()  # an in-process kind: each worker builds its own
        # a worker of an older policy set may still be busy (until its call's timeout) beside the new set
        self._watchdog = Watchdog(3 * self.processes, DEFAULT_HOOK_TIMEOUT)
        self._slots = threading.Condition()
        self._free = list(range(self._watchdog.slots))
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._generation = 0
        self._killed: dict[int, Overdue] = {}  # pid -> why the supervisor killed it
        self._workers: dict[int, Worker] = {}  # slot -> worker, for the supervisor
        self._closed = threading.Event()
        _CONTEXT.set_forkserver_preload([__name__])
        for worker in self._start_set(bundle, 0):
            self._idle.put(worker)
        threading.Thread(target=self._supervise, name="hook-watchdog", daemon=True).start()

    @property
    def bundle(self) -> Bundle:
        return self._bundle

    # -- calls

    def evaluate(self, hook: ResolvedHook, request: Mapping[str, Any]) -> dict[str, Any]:
        """The raw response document; HookError when the policy fails, or with reason HookTimeout when
        the call outlived `hook.timeout` (its worker is replaced)."""
        call = [hook.package, list(hook.rules), hook.whole_rule, request]
        for _attempt in range(self.processes + 1):  # a worker that died while idle: the call goes on to another
            worker = self._take()
            payload, seen = self._payload(worker, call)
            worker.note(hook.package, hook.timeout)
            try:
                worker.conn.send_bytes(payload)
            except OSError:
                worker.note(None)
                self._replace(worker)
                continue
            try:
                reply = worker.conn.recv_bytes()
            except (EOFError, OSError):
                worker.note(None)
                why = self._replace(worker)
                if why is not None:
                    raise HookError(
                        hook.package,
                        None,
                        f"evaluation did not finish within its timeout of {why.limit:g}s; its process was replaced",
                        reason="HookTimeout",
                    ) from None
                raise HookError(hook.package, None, "the evaluation process exited", reason="PolicyError") from None
            worker.note(None)
            worker.seen = seen
            self._give_back(worker)
            answer = jsoncodec.loads(reply)
            if "error" in answer:
                package, rule, message, reason = answer["error"]
                raise HookError(package, rule, message, reason)
            return answer["ok"]
        raise HookError(hook.package, None, "no evaluation process could take the call", reason="PolicyError")

    def _payload(self, worker: Worker, call: list[Any]) -> tuple[bytes, int | None]:
        """The call for `worker`, with the replicated data it lacks; the generation it will then hold."""
        store = self._store
        if store is None:
            return jsoncodec.dumps(call), None
        if worker.seen is not None:
            changes = store.changes_since(worker.seen)
            if changes is not None:
                sync = [{"changes": encode_changes(changes)}] if changes else []
                return jsoncodec.dumps([*call, *sync]), worker.seen + len(changes)
        whole: list[str] = []
        generation = store.full(lambda document: whole.append(json.dumps(document)))
        return (json.dumps(call)[:-1] + ', {"full": ' + whole[0] + "}]").encode(), generation

    # -- the policy set

    def reload(self, bundle: Bundle) -> None:
        """Evaluate every later call on `bundle`: a full set of workers is built for it first (a bundle
        that fails to load in them raises and the current set keeps serving), then swapped in; workers
        of the previous set stop as they become idle."""
        generation = self._generation + 1
        fresh = self._start_set(bundle, generation)
        self._generation, self._bundle = generation, bundle
        while True:
            try:
                self._retire(self._idle.get_nowait())
            except queue.Empty:
                break
        for worker in fresh:
            self._idle.put(worker)

    def pids(self) -> list[int]:
        return [w.process.pid for w in list(self._workers.values())]

    def close(self) -> None:
        self._closed.set()
        for worker in list(self._workers.values()):
            self._retire(worker)

    # -- workers

    def _start_set(self, bundle: Bundle, generation: int) -> list[Worker]:
        started = [self._start(bundle, generation) for _ in range(self.processes)]
        try:
            for worker in started:
                self._await_ready(worker)
        except RegokiteError:
            for worker in started:
                self._retire(worker)
            raise
        return started

    def _start(self, bundle: Bundle, generation: int) -> Worker:
        with self._slots:
            while not self._free:
                self._slots.wait()
            slot = self._free.pop(0)
        ours, theirs = _CONTEXT.Pipe()
        process = _CONTEXT.Process(
            target=serve_calls,
            args=(
                theirs,
                bundle,
                self._engine,
                logging.getLevelName(logging.getLogger().getEffectiveLevel()),
                "/".join(self._store.root) if self._store is not None else None,
            ),
            name=f"regokite-hooks-{slot}",
            daemon=True,
        )
        process.start()
        theirs.close()
        self._watchdog.clear(slot)
        worker = Worker(process, ours, slot, generation, self._watchdog.tracker(slot))
        self._workers[slot] = worker
        return worker

    def _await_ready(self, worker: Worker) -> None:
        problem = "did not start"
        with contextlib.suppress(EOFError, OSError):
            if worker.conn.poll(START_SECONDS):
                answer = json.loads(worker.conn.recv_bytes())
                if answer.get("ready"):
                    return
                problem = answer.get("error", problem)
        raise RegokiteError(f"hook evaluation process: {problem}")

    def _take(self) -> Worker:
        while True:
            worker = self._idle.get()
            if worker.generation == self._generation:
                return worker
            self._retire(worker)  # of a policy set replaced since it went idle

    def _give_back(self, worker: Worker) -> None:
        if worker.generation != self._generation or worker.process.pid in self._killed:
            self._retire(worker)
            if worker.generation == self._generation:
                self._idle.put(self._ready(self._start(self._bundle, self._generation)))
            return
        self._idle.put(worker)

    def _replace(self, worker: Worker) -> Overdue | None:
        """Retire a worker that failed a call and start another in its place; why it was killed, if it was."""
        why = self._killed.get(worker.process.pid)
        self._retire(worker)
        if why is None:
            metrics.hook_worker_restarts.labels("exited").inc()
            log.error("hook evaluation process exited; starting another", extra={"pid": worker.process.pid})
        if worker.generation == self._generation and not self._closed.is_set():
            self._idle.put(self._ready(self._start(self._bundle, self._generation)))
        return why

    def _ready(self, worker: Worker) -> Worker:
        self._await_ready(worker)
        return worker

    def _retire(self, worker: Worker) -> None:
        with self._slots:
            if self._workers.get(worker.slot) is not worker:
                return  # already retired (close() and the thread waiting on it both got here)
            del self._workers[worker.slot]
        worker.conn.close()  # an idle worker reads EOF and exits
        if worker.process.is_alive() and worker.process.pid in self._killed:
            worker.process.kill()
        worker.process.join(0.5 if worker.process.pid in self._killed else 0)
        if worker.process.exitcode is None:
            threading.Thread(target=worker.process.join, daemon=True).start()  # reaped when it finishes
        self._killed.pop(worker.process.pid, None)
        self._watchdog.clear(worker.slot)
        with self._slots:
            self._free.append(worker.slot)
            self._slots.notify()

    def _supervise(self) -> None:
        """Kill every worker past its call's timeout; the thread waiting on it sees the pipe close."""
        while not self._closed.wait(SUPERVISE_SECONDS):
            pids = {slot: w.process.pid for slot, w in list(self._workers.items())}
            message = "hook evaluation past its timeout; killing and replacing its process"
            for _ in self._watchdog.kill_overdue(pids, self._killed, message, log, self._killed.__setitem__):
                metrics.hook_worker_restarts.labels("stuck").inc()


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU limit (a
    container's `resources.limits.cpu`), which `os.cpu_count()` ignores; at least 1."""
    cores = len(os.sched_getaffinity(0))
    with contextlib.suppress(OSError, ValueError):
        quota, period = cgroup.read_text().split()
        if quota != "max":
            cores = min(cores, math.ceil(int(quota) / int(period)))
    return max(1, cores)


def serve_calls(
    conn: Connection, bundle: Bundle, engine: EngineSettings, log_level: str, replica_root: str | None = None
) -> None:
    """A worker's life: build the engine, say ready (or why not), then answer calls until the pipe closes.
    With `replica_root`, the engine follows a mirror of the controller's replicated data, which every
    call brings up to date first (exactly: no lag allowed, a hook's answer is written to the cluster)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the controller stops us
    ops_logging.configure(log_level)
    mirror = ReplicaStore(replica_root) if replica_root else None
    try:
        opened = open_engine(bundle, engine)
        if mirror is not None:
            opened.follow(mirror)
    except RegokiteError as exc:
        conn.send_bytes(json.dumps({"error": str(exc)}).encode())
        return
    conn.send_bytes(b'{"ready": true}')
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        package, rules, whole_rule, request, *sync_with = jsoncodec.loads(message)  # a sync only when it brings one
        sync = sync_with[0] if sync_with else None
        if sync is not None and mirror is not None:
            if "full" in sync:
                mirror.replace(sync["full"])
            else:
                mirror.apply(decode_changes(sync["changes"]))
        hook = ResolvedHook(HookTarget(package), tuple(rules), whole_rule)
        try:
            answer: dict[str, Any] = {"ok": evaluate_hook(opened, hook, request)}
        except HookError as exc:
            answer = {"error": [exc.package, exc.rule, exc.message, exc.reason]}
        except Exception as exc:  # a bug here must not end the worker: the caller gets it as the hook's failure
            answer = {"error": [package, None, f"{type(exc).__name__}: {exc}", "PolicyError"]}
        conn.send_bytes(jsoncodec.dumps(answer))
