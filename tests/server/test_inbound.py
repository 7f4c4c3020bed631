"""The Inbox a connection reads from (server/inbound.py): the chunks the transport delivered, handed over whole
and uncopied, the transport's reading stopped while too much waits, the end of the stream and its errors."""

from __future__ import annotations

import asyncio

import pytest

from seglog.server.inbound import Inbox


class Transport(asyncio.ReadTransport):
    """What the Inbox does with its transport: pause and resume reading."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")


def inbox(limit: int = 10) -> tuple[Inbox, Transport]:
    transport = Transport()
    made = Inbox(limit)
    made.connection_made(transport)
    return made, transport


def test_a_read_hands_over_the_chunk_received_itself_or_joins_those_waiting_up_to_what_it_asks():
    async def run() -> None:
        box, _ = inbox()
        first = b"abcdef"
        box.feed(first)
        assert await box.read(100) is first  # all that waits: no copy
        box.feed(b"gh")
        box.feed(b"ijk")
        box.feed(b"lmnop")
        assert await box.read(6) == b"ghijk"  # joined, up to 6 bytes
        box.feed(b"0123456789")
        assert await box.read(5) == b"lmnop"
        assert await box.read(4) == b"0123"  # cut
        assert await box.read(100) == b"456789"

    asyncio.run(run())


def test_a_read_waits_for_a_chunk_and_gives_nothing_at_the_end():
    async def run() -> None:
        box, _ = inbox()
        waiting = asyncio.ensure_future(box.read(100))
        await asyncio.sleep(0)
        assert not waiting.done()
        box.feed(b"late")
        assert await waiting == b"late"
        box.feed(b"last")
        box.feed_eof()
        assert await box.read(100) == b"last"  # what came before the end is read first
        assert await box.read(100) == b""

    asyncio.run(run())


def test_a_lost_connection_raises_its_error_on_the_next_read():
    async def run() -> None:
        box, _ = inbox()
        waiting = asyncio.ensure_future(box.read(100))
        await asyncio.sleep(0)
        box.connection_lost(ConnectionResetError("reset by peer"))
        with pytest.raises(ConnectionResetError, match="reset by peer"):
            await waiting
        closed, _ = inbox()
        closed.connection_lost(None)  # (a clean close: the end)
        assert await closed.read(100) == b""

    asyncio.run(run())


def test_reading_stops_past_twice_the_limit_and_goes_on_once_it_is_down_to_it():
    async def run() -> None:
        box, transport = inbox(limit=10)
        box.feed(b"x" * 15)
        box.feed(b"y" * 5)
        assert transport.calls == []  # 20 bytes: not past twice the limit
        box.feed(b"z")
        assert transport.calls == ["pause"]
        box.feed(b"w" * 100)
        assert transport.calls == ["pause"]  # (once)
        assert len(await box.read(100)) == 21  # (the three first chunks joined) 100 waiting
        assert transport.calls == ["pause"]
        await box.read(100)  # 0
        assert transport.calls == ["pause", "resume"]

    asyncio.run(run())
