"""CoalescedWrites: what one event-loop step writes goes out in one write, closing sends it, aborting drops it."""

from __future__ import annotations

import asyncio

from regokite.admission.connections import CoalescedWrites


class Recording:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_one_steps_writes_go_out_as_one_at_its_end() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], int]:
        real = Recording()
        transport = CoalescedWrites(real, asyncio.get_running_loop())  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"")
        transport.write(bytearray(b'{"a": 1}'))
        before = list(real.writes)
        pending = transport.get_write_buffer_size()
        await asyncio.sleep(0)
        return before, real.writes, pending

    before, after, pending = asyncio.run(scenario())
    assert before == []
    assert pending == len(b'HTTP/1.1 200 OK\r\n\r\n{"a": 1}')
    assert after == [b'HTTP/1.1 200 OK\r\n\r\n{"a": 1}']


def test_close_sends_what_is_pending_first_and_abort_drops_it() -> None:
    async def scenario() -> tuple[Recording, Recording]:
        loop = asyncio.get_running_loop()
        closing, aborting = Recording(), Recording()
        first = CoalescedWrites(closing, loop)  # type: ignore[arg-type]
        first.write(b"bye")
        first.close()
        second = CoalescedWrites(aborting, loop)  # type: ignore[arg-type]
        second.write(b"lost")
        second.abort()
        await asyncio.sleep(0)  # the scheduled flushes find nothing left
        return closing, aborting

    closing, aborting = asyncio.run(scenario())
    assert closing.writes == [b"bye"] and closing.closed
    assert aborting.writes == [] and aborting.aborted


def test_the_rest_is_the_transports() -> None:
    loop = asyncio.new_event_loop()
    try:
        transport = CoalescedWrites(Recording(), loop)  # type: ignore[arg-type]
        assert transport.get_extra_info("peername") == "info:peername"
    finally:
        loop.close()
