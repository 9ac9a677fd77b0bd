"""HTTPS load against `regokite admission` /validate, beside raw evaluation in the same run.

    python -m bench.admission_load [--rate 500] [--seconds 10] [--workers 1 2]

For each worker count it starts a real server on loopback with the
policies/ directory, then runs
  * an open-loop phase: requests sent on a fixed schedule at --rate req/s,
    latency measured from each request's scheduled start (so a stalled
    server cannot hide queueing), and
  * a closed-loop phase: --connections clients sending back to back, for
    the maximum throughput,
and prints req/s, p50 and p99 beside the in-process cost of the same
decision (raw engine evaluation of every policy), and their ratio.
The load generator shares the machine's two cores with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import tempfile
import time
from pathlib import Path

from bench.common import fmt, percentiles, sample_body, standalone_policies
from regokite.admission.decide import decide
from regokite.admission.policies import load_policy_set
from regokite.admission.review import parse_review
from tests.admission.server import admission_server

# The test helper polls the policy dir every 0.2 s; measure what users run.
PRODUCTION_RELOAD = ("--reload-interval", "1")


def raw_evaluation(iterations: int, only: str | None) -> dict[str, float]:
    policy_set = load_policy_set([str(p) for p in standalone_policies()])
    review = parse_review(sample_body())
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        decide(policy_set, review, mode="validate", only=only)
        samples.append(time.perf_counter() - started)
    policy_set.close()
    return percentiles(samples)


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


async def open_loop(
    url: str, ctx: ssl.SSLContext, rate: float, seconds: float, connections: int, body: bytes | None = None
) -> tuple:
    pool = await _pool(url, ctx, connections, body)
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for conn in pool:
        idle.put_nowait(conn)
    latencies: list[float] = []
    errors = 0
    start = time.perf_counter() + 0.2
    total = int(rate * seconds)

    async def one(i: int) -> None:
        nonlocal errors
        scheduled = start + i / rate
        await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        conn = await idle.get()
        try:
            if await conn.post() != 200:
                errors += 1
        finally:
            idle.put_nowait(conn)
        latencies.append(time.perf_counter() - scheduled)

    await asyncio.gather(*(one(i) for i in range(total)))
    elapsed = time.perf_counter() - start
    for conn in pool:
        conn.close()
    return total / elapsed, percentiles(latencies), errors


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=500)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--endpoint", default="validate", help="e.g. validate/admission.required_labels")
    args = parser.parse_args()

    only = args.endpoint.partition("/")[2].replace("/", ".").replace("-", "_") or None  # as the server reads it
    raw = raw_evaluation(2000, only)
    print(f"raw evaluation, in process, same decision as /{args.endpoint}: {fmt(raw)}")
    for workers in args.workers:
        with (
            tempfile.TemporaryDirectory() as tmp,
            admission_server(standalone_policies(), Path(tmp), "--workers", str(workers), *PRODUCTION_RELOAD) as server,
        ):
            ctx = ssl.create_default_context(cafile=str(server.ca))
            url = f"{server.url}/{args.endpoint}"
            asyncio.run(closed_loop(url, ctx, 1.0, 4))  # warm every worker
            achieved, lat, errors = asyncio.run(open_loop(url, ctx, args.rate, args.seconds, 64))
            print(f"\nworkers={workers}  open loop at {args.rate:.0f} req/s for {args.seconds:.0f}s:")
            print(f"  achieved {achieved:7.1f} req/s, errors {errors}")
            print(f"  latency  {fmt(lat)}")
            print(f"  ratio to raw evaluation: p50 {lat['p50'] / raw['p50']:.2f}x, p99 {lat['p99'] / raw['p99']:.2f}x")
            throughput, lat = asyncio.run(closed_loop(url, ctx, args.seconds, args.connections))
            print(f"workers={workers}  closed loop, {args.connections} connections:")
            print(f"  throughput {throughput:7.1f} req/s")
            print(f"  latency  {fmt(lat)}")


if __name__ == "__main__":
    main()
