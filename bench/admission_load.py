"""HTTPS load against `regokite admission` /validate, beside raw evaluation in the same run.

    python -m bench.admission_load [--seconds 10] [--workers 1 2] [--profile-seconds 10]

Reports, all as ratios within the run:

1. the raw decision: `decide` in process on the sample review (parse and
   guard of the input included, as the server pays them);
2. one worker's saturation: closed-loop throughput with --connections
   clients sending back to back;
3. latency at half that rate: an open loop (requests sent on a fixed
   schedule, latency measured from each request's scheduled start, so a
   stalled server cannot hide queueing), p50 as a ratio to the raw p50;
   beside it what explains a tail: the load generator's own lateness, the
   server's time per review (its access log), and the CPU the worker got
   and how long it waited on a run queue for one (/proc/<pid>/schedstat),
   with the latencies of the seconds it had its CPU apart from the others;
4. the closed loop again for each --workers count, as a ratio to one
   worker's, beside the CPU each side spent: the load generator (this
   process, `getrusage`) shares the machine's two cores with the workers, so
   throughput per worker-CPU-second says how well the workers scale apart
   from the cores the load generator and other processes took; beside it
   the machine's own ceiling: the raw decision back to back in as many
   processes at once (no HTTP, no load generator) over one process, and
   the share of that scaling the server keeps;
5. where one worker's CPU goes per request (`--profile-seconds`, 0 for
   none): py-spy samples the worker (native frames included, for TLS) during
   a closed loop, each sample is put in one step (TLS, HTTP parsing, JSON
   decode/encode, guard, evaluation, logging, metrics, ASGI routing, event
   loop), and a step's share of the samples times the worker's CPU per
   request is its cost.

`--rate R` fixes the open loop's rate instead of half the measured saturation.

`--decision-logs`: instead, one worker's open loop at half its saturation
with OPA's decision logs off, then on (a `--config-file` whose
`decision_logs` upload to a local HTTP sink here), the same rate in the same
run: p50/p99 on over off, and the events the sink received. `--mask`: the
"on" server also serves a `system.log` package (a drop and a mask decision),
which the logger's thread evaluates for every event.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing
import os
import resource
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import fmt, percentiles, sample_body, standalone_policies
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from tests.admission.server import admission_server
from tests.decisionlogs.sink import Sink

# The test helper polls the policy dir every 0.2 s; measure what users run.
PRODUCTION_RELOAD = ("--reload-interval", "1")


def raw_evaluation(iterations: int, only: str | None) -> dict[str, float]:
    policy_set = load_policy_set([str(p) for p in standalone_policies()])
    review = parse_review(sample_body())
    samples = []
    cpu = time.process_time()
    for _ in range(iterations):
        started = time.perf_counter()
        decide(policy_set, review, mode="validate", only=only)
        samples.append(time.perf_counter() - started)
    cpu = time.process_time() - cpu
    policy_set.close()
    return {**percentiles(samples), "cpu_ms": cpu / iterations * 1000}


def _decide_for(seconds: float, only: str | None, barrier, results) -> None:
    """One process of `raw_throughput`: the decision back to back for `seconds`, started with the others."""
    policy_set = load_policy_set([str(p) for p in standalone_policies()])
    review = parse_review(sample_body())
    for _ in range(50):  # warm
        decide(policy_set, review, mode="validate", only=only)
    barrier.wait()
    count, cpu, stop = 0, time.process_time(), time.perf_counter() + seconds
    while time.perf_counter() < stop:
        decide(policy_set, review, mode="validate", only=only)
        count += 1
    results.put((count, time.process_time() - cpu))
    policy_set.close()


def raw_throughput(processes: int, seconds: float, only: str | None) -> tuple[float, float]:
    """The raw decision's closed-loop rate (decisions/s, all processes) and cores busy in `processes`
    processes at once: no HTTP, no load generator, so `raw_throughput(2) / raw_throughput(1)` is the
    scaling this machine (its cores, its other load) allows two admission workers."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_decide_for, args=(seconds, only, barrier, results)) for _ in range(processes)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join()
    return sum(count for count, _ in outcomes) / seconds, sum(cpu for _, cpu in outcomes) / seconds


class Connection:
    """A lean keep-alive HTTPS/1.1 client: the load generator shares the two
    cores with the server, so it must cost far less per request than aiohttp."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> None:
        self.reader, self.writer, self.request = reader, writer, request

    @classmethod
    async def open(cls, url: str, ctx: ssl.SSLContext, body: bytes) -> Connection:
        host_port, _, path = url.removeprefix("https://").partition("/")
        host, _, port = host_port.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx, server_hostname=host)
        head = (
            f"POST /{path} HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return cls(reader, writer, head.encode() + body)

    async def post(self) -> int:
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        await self.reader.readexactly(length)
        return status

    def close(self) -> None:
        self.writer.close()


async def _pool(url: str, ctx: ssl.SSLContext, size: int, body: bytes | None = None) -> list[Connection]:
    body = body or sample_body()
    return [await Connection.open(url, ctx, body) for _ in range(size)]


@dataclass
class OpenLoop:
    """An open loop's outcome: `latency` runs from each request's scheduled start (or from when the
    load generator actually started it, if that was earlier); `lateness` is how late the load generator
    started requests (its own timers and CPU: the server cannot cause it; waiting for a free
    connection comes after, in the latency)."""

    achieved: float
    latency: dict[str, float]
    errors: int
    lateness: dict[str, float]
    requests: list[tuple[float, float]]  # (start, latency) of each, perf_counter seconds


async def open_loop(
    url: str, ctx: ssl.SSLContext, rate: float, seconds: float, connections: int, body: bytes | None = None
) -> OpenLoop:
    """Requests on a fixed schedule, each on an idle connection of a pool of at most `connections`
    (waiting for one counts).

    One dispatcher starts each request's task at its time, so only requests in flight exist (not
    `rate * seconds` sleeping tasks, whose own garbage collection paused this loop for up to 0.1 s).
    asyncio's timers fire up to a millisecond late (epoll's timeout is in whole milliseconds), so the
    dispatcher wakes a millisecond early and a request's latency runs from the earlier of its
    scheduled and its actual start: never shorter than what the client waited. The collector is off
    during the loop: its pauses are the load generator's, not the server's.
    """
    # each connection back in use within 2 s, well inside the server's 5 s keep-alive timeout
    pool = await _pool(url, ctx, max(4, min(connections, int(2 * rate))), body)
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for conn in pool:
        idle.put_nowait(conn)
    requests: list[tuple[float, float]] = []
    late: list[float] = []
    errors = 0
    total = int(rate * seconds)
    in_flight: set[asyncio.Task[None]] = set()

    async def one(scheduled: float) -> None:
        nonlocal errors
        woke = time.perf_counter()
        late.append(max(0.0, woke - scheduled))
        conn = await idle.get()  # all busy: the server is behind, and this wait is part of the latency
        try:
            if await conn.post() != 200:
                errors += 1
        finally:
            idle.put_nowait(conn)
        began = min(scheduled, woke)
        requests.append((began, time.perf_counter() - began))

    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter() + 0.2
        for i in range(total):
            scheduled = start + i / rate
            wait = scheduled - time.perf_counter() - 0.001
            if wait > 0:
                await asyncio.sleep(wait)
            task = asyncio.create_task(one(scheduled))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        await asyncio.gather(*in_flight)
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    for conn in pool:
        conn.close()
    latency = percentiles([seconds for _, seconds in requests])
    return OpenLoop(total / elapsed, latency, errors, percentiles(late), requests)


async def closed_loop(
    url: str, ctx: ssl.SSLContext, seconds: float, connections: int, body: bytes | None = None
) -> tuple:
    pool = await _pool(url, ctx, connections, body)
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client(conn: Connection) -> None:
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await conn.post()
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(client(c) for c in pool))
    elapsed = time.perf_counter() - began
    for conn in pool:
        conn.close()
    return len(latencies) / elapsed, percentiles(latencies)


def cpu_seconds(pids: set[int]) -> float:
    """User + system CPU seconds the processes have used so far (from /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def schedstat(pid: int) -> tuple[float, float]:
    """Seconds the process's main thread has run on a CPU and waited on a run queue for one (Linux schedstat)."""
    ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    return int(ran) / 1e9, int(waited) / 1e9


class CpuWatch:
    """Samples, every `every` seconds on a thread, how much each process ran and how long it waited for a
    CPU: an open loop's stalls are the server's only if the worker had the CPU it needed."""

    def __init__(self, pids: dict[str, int], every: float = 0.1) -> None:
        self.pids, self.every = pids, every
        self.samples: list[tuple[float, dict[str, tuple[float, float]]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.perf_counter(), {name: schedstat(pid) for name, pid in self.pids.items()}))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def __enter__(self) -> CpuWatch:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def waited(self, name: str, began: float, ended: float) -> float:
        """Seconds the process waited for a CPU between two instants (to the nearest samples)."""

        def at(instant: float) -> float:
            return min(self.samples, key=lambda sample: abs(sample[0] - instant))[1][name][1]

        return at(ended) - at(began)

    def describe(self, name: str) -> str:
        """Cores the process got, its run-queue wait per second overall and in its worst second."""
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        ran, waited = (last[name][i] - first[name][i] for i in (0, 1))
        per_second = max(1, round(1 / self.every))
        worst = (
            max(
                (b[1][name][1] - a[1][name][1]) / (b[0] - a[0])
                for a, b in zip(self.samples, self.samples[per_second:], strict=False)
            )
            if len(self.samples) > per_second
            else waited / (t1 - t0)
        )
        return (
            f"{name}: {ran / (t1 - t0):.2f} cores, waited for a CPU {1000 * waited / (t1 - t0):.0f} ms/s "
            f"(worst second {1000 * worst:.0f} ms)"
        )


def server_durations(log: str) -> list[float]:
    """The access log's duration_ms of each review (body read to response ready), in seconds."""
    found = []
    for line in log.splitlines():
        if '"duration_ms"' in line:
            found.append(json.loads(line)["duration_ms"] / 1000)
    return found


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Throughput:
    """A closed loop's rate and the CPU each side spent on it."""

    rate: float
    latency: dict[str, float]
    requests: int
    worker_cpu: float  # seconds, all workers
    loadgen_cpu: float  # seconds, this process
    elapsed: float
    waited: float  # seconds the workers' main threads waited on a run queue for a CPU, all workers

    def per_request(self, seconds: float) -> float:
        return seconds / self.requests * 1000  # ms

    def describe(self) -> str:
        return (
            f"  throughput {self.rate:7.1f} req/s   latency {fmt(self.latency)}\n"
            f"  CPU per request: workers {self.per_request(self.worker_cpu):.3f} ms, "
            f"load generator {self.per_request(self.loadgen_cpu):.3f} ms; cores busy: workers "
            f"{self.worker_cpu / self.elapsed:.2f}, load generator {self.loadgen_cpu / self.elapsed:.2f}; "
            f"the workers waited for a CPU {1000 * self.waited / self.elapsed:.0f} ms/s"
        )


def measured_closed_loop(server, url: str, ctx: ssl.SSLContext, seconds: float, connections: int) -> Throughput:
    workers = server.workers()
    waited_before = sum(schedstat(pid)[1] for pid in workers)
    worker_before, own_before, began = cpu_seconds(workers), own_cpu(), time.perf_counter()
    rate, latency = asyncio.run(closed_loop(url, ctx, seconds, connections))
    elapsed = time.perf_counter() - began
    return Throughput(
        rate,
        latency,
        latency["n"],
        cpu_seconds(workers) - worker_before,
        own_cpu() - own_before,
        elapsed,
        sum(schedstat(pid)[1] for pid in workers) - waited_before,
    )


# Where a py-spy sample of a worker goes. The request's own steps first, in this
# order (any frame in the sample decides): evaluation is `decide` and the engine
# below it, less the input guard it calls; JSON inside logging is logging.
def _in(*needles: str) -> Callable[[list[str]], bool]:
    return lambda frames: any(n in f for f in frames for n in needles)


_EVALUATION = _in("regokite/admission/decide.py", "regokite/engine/", "regorus")
_JSON_DECODE = _in("json/decoder.py", "loads (")
STEPS = [
    ("logging", _in("/logging/", "regokite/ops/logging", "_log_access")),
    ("metrics", _in("prometheus_client", "_record (")),
    ("JSON decode", lambda frames: _JSON_DECODE(frames) and not _EVALUATION(frames)),  # the body, in the guard's door
    ("guard", _in("regokite/input_guard.py")),
    ("evaluation", _EVALUATION),
    ("JSON encode", _in("json/encoder.py", "dumps (")),
    ("review parse + response", _in("regokite/admission/review.py")),
]
# The rest by the innermost frame that names its layer (the HTTP parser runs inside the TLS
# protocol's read callback, the ASGI app inside the event loop's task step).
LAYERS = [
    ("TLS", ("ssl", "bio_", "crypto", "evp_", "ec_point", "aes", "sha256", "gcm")),
    (
        "HTTP parsing, connection deadlines",
        ("llhttp", "httpparser", "parser_cb", "parse_url", "protocol.on_", "guardedprotocol"),
    ),
    ("ASGI/routing (starlette, app)", ("starlette/", "fastapi/", "requestresponsecycle", "admission/app.py")),
    ("event loop, sockets", ("uvloop", "loop_", "loop__", "handle_", "uvstream", "uv__", "uv_", "task_step", "sock")),
]
OTHER = "other"
SPY = ["py-spy", "record", "--native", "--rate", "200", "--format", "raw", "--full-filenames"]
# A thread waiting (idle executor threads, the loop in epoll): py-spy's idle filter misses native waits.
WAITING = _in("PyThread_acquire_lock", "epoll_wait", "epoll_pwait", "SimpleQueue_get", "select (")


def step_of(stack: str) -> str | None:
    """The step one py-spy sample belongs to; None for a thread that is waiting."""
    frames = stack.split(";")
    if WAITING(frames):
        return None
    for step, matches in STEPS:
        if matches(frames):
            return step
    for frame in reversed(frames):
        lower = frame.lower()
        for layer, needles in LAYERS:
            if any(n in lower for n in needles):
                return layer
    return OTHER


def profile_worker(server, url: str, ctx: ssl.SSLContext, seconds: float, connections: int) -> None:
    """py-spy on the one worker during a closed loop: each step's share of the samples, times CPU per request."""
    (worker,) = server.workers()
    with tempfile.NamedTemporaryFile(suffix=".txt") as out:
        spy = subprocess.Popen(
            [*SPY, "--pid", str(worker), "--duration", str(int(seconds)), "--output", out.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(0.5)  # attached
        measured = measured_closed_loop(server, url, ctx, seconds, connections)
        _, err = spy.communicate(timeout=seconds + 30)
        lines = Path(out.name).read_text().splitlines()
    counts: dict[str, int] = {}
    for line in lines:
        stack, _, count = line.rpartition(" ")
        step = step_of(stack)
        if step is not None:
            counts[step] = counts.get(step, 0) + int(count)
    total = sum(counts.values())
    if not total:
        print(f"  py-spy recorded nothing: {err.decode(errors='replace').strip()}")
        return
    cost = measured.per_request(measured.worker_cpu)
    print(
        f"\nworker CPU per request under py-spy (--native, 200 Hz): {cost:.3f} ms; "
        f"{total} samples on a CPU, {sum(int(line.rpartition(' ')[2]) for line in lines) - total} waiting"
    )
    for step in [*(s for s, _ in STEPS), *(layer for layer, _ in LAYERS), OTHER]:
        share = counts.get(step, 0) / total
        print(f"  {step:32s} {100 * share:5.1f} %   {share * cost * 1000:7.1f} us/request")
    beyond = 1 - counts.get("evaluation", 0) / total
    print(f"  beyond evaluation              {100 * beyond:5.1f} %   {beyond * cost * 1000:7.1f} us/request")


def add_load_args(parser: argparse.ArgumentParser, rate: float | None, rate_help: str | None = None) -> None:
    """The options of a run of this client against `regokite admission`, shared with bench.gatekeeper_load:
    the open loop's --rate and --seconds, and the --workers counts to serve with, one server each."""
    parser.add_argument("--rate", type=float, default=rate, help=rate_help)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])


def measure_open_loop(
    server, url: str, ctx: ssl.SSLContext, rate: float, seconds: float, raw: dict[str, float], cpu_ms: float
) -> None:
    """The open loop at `rate`, with what explains its tail: the load generator's own lateness, the
    server's time per review (its access log) and the CPU the worker got and waited for meanwhile."""
    (worker,) = server.workers()
    log_before = len(server.logs())
    with CpuWatch({"worker": worker, "load generator": os.getpid()}) as watch:
        run = asyncio.run(open_loop(url, ctx, rate, seconds, 64))
    lat = run.latency
    print(f"workers=1  open loop at {rate:.0f} req/s (half of saturation) for {seconds:.0f}s:")
    print(f"  achieved {run.achieved:7.1f} req/s, errors {run.errors}")
    print(f"  latency  {fmt(lat)}")
    print(f"  ratio to the raw decision: p50 {lat['p50'] / raw['p50']:.2f}x, p99 {lat['p99'] / raw['p99']:.2f}x")
    print(f"  load generator's lateness {fmt(run.lateness)}")
    served = server_durations(server.logs()[log_before:])
    if served:
        print(f"  server's time (access log duration_ms) {fmt(percentiles(served))}")
    print(f"  the worker needed {rate * cpu_ms / 1000:.2f} cores at the closed loop's CPU per request")
    print(f"  {watch.describe('worker')}")
    print(f"  {watch.describe('load generator')}")
    by_wait = split_by_wait(run.requests, watch)
    for label, latencies in by_wait.items():
        if latencies:
            print(f"  {label}: {fmt(percentiles(latencies))}")


QUIET_WAIT = 0.05  # a second in which the worker waited for a CPU less than this had the CPU it needed


def split_by_wait(requests: list[tuple[float, float]], watch: CpuWatch) -> dict[str, list[float]]:
    """The latencies of requests started in seconds when the worker had its CPU, and in the others."""
    quiet: list[float] = []
    starved: list[float] = []
    first = requests[0][0] if requests else 0.0
    waits: dict[int, float] = {}
    for began, seconds in requests:
        second = int(began - first)
        if second not in waits:
            waits[second] = watch.waited("worker", first + second, first + second + 1)
        (quiet if waits[second] < QUIET_WAIT else starved).append(seconds)
    quiet_seconds = sum(1 for w in waits.values() if w < QUIET_WAIT)
    return {
        f"latency in the {quiet_seconds} s the worker waited < {1000 * QUIET_WAIT:.0f} ms for a CPU": quiet,
        f"latency in the {len(waits) - quiet_seconds} s it waited longer": starved,
    }


SYSTEM_LOG = """package system.log

drop if input.input.request.namespace == "kube-system"

mask contains "/input/request/object/spec/template/spec/containers"
"""


def compare_decision_logs(args: argparse.Namespace, raw: dict[str, float]) -> None:
    """One worker's open loop at half its saturation (measured with logging off), logging off then on."""
    sink = Sink()
    rate = args.rate
    latencies: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "opa-config.json"
        reporting = {"min_delay_seconds": 1, "max_delay_seconds": 2}
        config.write_text(json.dumps({"services": {"logs": {"url": sink.url}},
                                      "decision_logs": {"service": "logs", "reporting": reporting}}))  # fmt: skip
        system = Path(tmp) / "system"
        system.mkdir()
        (system / "log.rego").write_text(SYSTEM_LOG)
        for label, extra in (("off", ()), ("on", ("--config-file", str(config)))):
            workdir = Path(tmp) / label
            workdir.mkdir()
            argv = ("--workers", "1", *PRODUCTION_RELOAD, *extra)
            served = [*standalone_policies(), *([system] if args.mask and extra else [])]
            with admission_server(served, workdir, *argv) as server:
                ctx = ssl.create_default_context(cafile=str(server.ca))
                url = f"{server.url}/{args.endpoint}"
                asyncio.run(closed_loop(url, ctx, 1.0, 4))  # warm the worker
                if rate is None:
                    closed = measured_closed_loop(server, url, ctx, args.seconds, args.connections)
                    print(f"closed loop, logging off, {args.connections} connections:\n{closed.describe()}")
                    rate = closed.rate / 2
                run = asyncio.run(open_loop(url, ctx, rate, args.seconds, 64))
                latencies[label] = run.latency
                print(f"decision logs {label}: open loop at {rate:.0f} req/s for {args.seconds:.0f} s: achieved "
                      f"{run.achieved:.1f} req/s, errors {run.errors}, latency {fmt(run.latency)}")  # fmt: skip
            time.sleep(2.5)  # the worker's last upload (max_delay) reaches the sink before counting
    on, off = latencies["on"], latencies["off"]
    print(f"on / off: p50 {on['p50'] / off['p50']:.2f}x, p99 {on['p99'] / off['p99']:.2f}x; "
          f"raw decision p50 {raw['p50']:.3f} ms; events the sink received: {len(sink.events())}")  # fmt: skip
    sink.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_load_args(parser, None, "open-loop rate (default: half of one worker's)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--profile-seconds", type=float, default=10)
    parser.add_argument("--endpoint", default="validate", help="e.g. validate/admission.required_labels")
    parser.add_argument("--decision-logs", action="store_true", help="logging off vs on at one rate (see above)")
    parser.add_argument("--mask", action="store_true", help="with --decision-logs: a drop and a mask policy too")
    args = parser.parse_args()

    print(f"load average at start: {os.getloadavg()}")
    only = args.endpoint.partition("/")[2].replace("/", ".").replace("-", "_") or None  # as the server reads it
    raw = raw_evaluation(2000, only)
    print(f"raw decision, in process, same decision as /{args.endpoint}: {fmt(raw)}, CPU {raw['cpu_ms']:.3f} ms")
    if args.decision_logs:
        compare_decision_logs(args, raw)
        return
    closed: dict[int, Throughput] = {}
    machine: dict[int, tuple[float, float]] = {}
    for workers in sorted(set(args.workers) | {1}):
        machine[workers] = raw_throughput(workers, args.seconds, only)
        print(
            f"\nraw decision, no HTTP, in {workers} process(es) at once for {args.seconds:.0f} s: "
            f"{machine[workers][0]:7.1f} decisions/s, {machine[workers][1]:.2f} cores"
        )
        with (
            tempfile.TemporaryDirectory() as tmp,
            admission_server(standalone_policies(), Path(tmp), "--workers", str(workers), *PRODUCTION_RELOAD) as server,
        ):
            ctx = ssl.create_default_context(cafile=str(server.ca))
            url = f"{server.url}/{args.endpoint}"
            asyncio.run(closed_loop(url, ctx, 1.0, 4))  # warm every worker
            closed[workers] = measured_closed_loop(server, url, ctx, args.seconds, args.connections)
            print(f"\nworkers={workers}  closed loop, {args.connections} connections, {args.seconds:.0f} s:")
            print(closed[workers].describe())
            per_request = closed[workers].per_request(closed[workers].worker_cpu)
            print(f"  worker CPU per request / raw decision's CPU: {per_request / raw['cpu_ms']:.2f}x")
            if workers != 1:
                continue
            rate = args.rate or closed[1].rate / 2
            measure_open_loop(server, url, ctx, rate, args.seconds, raw, per_request)
            if args.profile_seconds:
                profile_worker(server, url, ctx, args.profile_seconds, args.connections)
    one = closed[1]
    for workers, run in sorted(closed.items()):
        if workers == 1:
            continue
        per_core = (run.rate / (run.worker_cpu / run.elapsed)) / (one.rate / (one.worker_cpu / one.elapsed))
        served, allowed = run.rate / one.rate, machine[workers][0] / machine[1][0]
        print(
            f"\n{workers} workers / 1 worker: throughput {served:.2f}x; "
            f"throughput per worker-core {per_core:.2f}x; cores the workers got "
            f"{run.worker_cpu / run.elapsed:.2f} vs {one.worker_cpu / one.elapsed:.2f}, "
            f"the load generator took {run.loadgen_cpu / run.elapsed:.2f}"
        )
        print(
            f"  the machine's ceiling: the raw decision in {workers} processes / 1 process {allowed:.2f}x "
            f"({machine[workers][1]:.2f} vs {machine[1][1]:.2f} cores); the server keeps {served / allowed:.2f} "
            "of the scaling the machine allows"
        )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
