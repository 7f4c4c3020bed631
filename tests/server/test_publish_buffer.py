"""The publish buffer's accounts (server/publish_buffer.py): a connection stops reading while it holds more than
its share, or the server more than its whole, and reads again as soon as written SENDs bring it back under."""

from __future__ import annotations

import asyncio

from seglog.server.publish_buffer import SEND_OVERHEAD_BYTES, PublishBuffer, send_cost


def test_a_connection_over_its_share_waits_until_its_sends_are_written():
    async def run() -> list[str]:
        buffer = PublishBuffer(limit=1000, connection_limit=100)
        account = buffer.account()
        account.hold(150)
        assert account.over
        events = []

        async def reader() -> None:
            await account.room()
            events.append("reads again")

        task = asyncio.get_running_loop().create_task(reader())
        await asyncio.sleep(0)
        account.release(40)  # still 110 > 100
        await asyncio.sleep(0)
        events.append("after a first write")
        account.release(10)
        await asyncio.wait_for(task, 5)
        assert (account.held, buffer.held) == (100, 100) and not account.over
        return events

    assert asyncio.run(run()) == ["after a first write", "reads again"]


def test_every_connection_waits_while_the_server_is_over_its_whole_and_any_release_wakes_them():
    async def run() -> None:
        buffer = PublishBuffer(limit=100, connection_limit=80)
        first, second = buffer.account(), buffer.account()
        first.hold(60)
        second.hold(50)  # each under its share, the two over the whole
        assert first.over and second.over
        waiting = asyncio.gather(first.room(), second.room())
        await asyncio.sleep(0)
        assert not waiting.done()
        first.release(20)  # 90 in all: both may read
        await asyncio.wait_for(waiting, 5)
        assert not first.over and not second.over

    asyncio.run(run())


def test_a_send_costs_its_bytes_and_what_holding_it_costs_besides():
    assert send_cost(b"m" * 10, b"p" * 100) == 110 + SEND_OVERHEAD_BYTES
    assert send_cost(None, None) == SEND_OVERHEAD_BYTES
