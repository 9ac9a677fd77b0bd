"""Latency of /healthz and /validate while slow clients hold connections, and when those are dropped.

    python -m bench.admission_slow_clients [--slow 200] [--seconds 12] [--workers 1] [--rounds 1]

Starts `regokite admission` on loopback with its default connection limits,
measures a probe loop alone (each request on a fresh TLS connection, as a
kubelet probe or a new API server connection would come), then again while
--slow clients (a quarter each: stalled TLS handshake, silent after the
handshake, headers a byte at a time, body a byte at a time) hold
connections, and reports p50/p99, how long each kind was held, and the
worker's resident memory and open file descriptors before, during and after.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import ssl
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx

from bench.common import fmt, percentiles, sample_body
from tests.admission.server import RunningServer, admission_server
from tests.admission.slow_clients import KINDS, Held, hold


def worker(running: RunningServer) -> int:
    pid = running.process.pid
    return int(Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0])


def usage(pid: int) -> str:
    resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return f"RSS {resident / 2**20:6.1f} MiB, {len(os.listdir(f'/proc/{pid}/fd'))} fds"


async def probe(running: RunningServer, seconds: float) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = defaultdict(list)
    verify = ssl.create_default_context(cafile=running.ca)
    body = sample_body()
    until = time.monotonic() + seconds
    async with httpx.AsyncClient(base_url=running.url, verify=verify, timeout=10) as client:
        while time.monotonic() < until:
            for path in ("/healthz", "/validate"):
                started = time.perf_counter()
                if path == "/healthz":
                    answer = await client.get(path, headers={"connection": "close"})
                else:
                    answer = await client.post(path, content=body, headers={"connection": "close"})
                samples[path if answer.status_code == 200 else f"{path} {answer.status_code}"].append(
                    time.perf_counter() - started
                )
            await asyncio.sleep(0.02)
    return samples


def hold_in_process(url: str, ca: str, counts: dict[str, int], limit: float) -> list[Held]:
    return asyncio.run(hold(url, ca, counts, pace=1.0, limit=limit))


async def run(running: RunningServer, slow: int, seconds: float, rounds: int) -> None:
    pid = worker(running)
    print(f"worker at start: {usage(pid)}")
    for path, times in (await probe(running, 3)).items():
        print(f"  alone        {path:10} {fmt(percentiles(times))}")
    counts = {kind: slow // len(KINDS) for kind in KINDS}
    # in a process of their own, so their client-side work does not delay the probes
    pool = concurrent.futures.ProcessPoolExecutor(1)
    for round in range(1, rounds + 1):
        held = asyncio.get_running_loop().run_in_executor(
            pool, hold_in_process, running.url, str(running.ca), counts, seconds + 10
        )
        await asyncio.sleep(1)
        print(f"round {round}, worker with {slow} slow clients: {usage(pid)}")
        for path, times in (await probe(running, seconds)).items():
            print(f"  {slow} slow     {path:10} {fmt(percentiles(times))}")
        by_kind: dict[str, list[float | None]] = defaultdict(list)
        for h in await held:
            by_kind[h.kind].append(h.seconds if h.opened else -1)
        for kind, times in by_kind.items():
            dropped = sorted(t for t in times if t is not None and t >= 0)
            span = f"{dropped[0]:.2f}-{dropped[-1]:.2f} s" if dropped else "-"
            print(f"  {kind:9} {len(dropped)}/{len(times)} dropped after {span}")
        await asyncio.sleep(1)
        print(f"worker after round {round}: {usage(pid)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=12.0, help="probe while the slow clients hold on")
    parser.add_argument("--workers", default="1")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        admission_server(Path("policies"), Path(tmp), "--workers", args.workers) as running,
    ):
        asyncio.run(run(running, args.slow, args.seconds, args.rounds))


if __name__ == "__main__":
    main()
