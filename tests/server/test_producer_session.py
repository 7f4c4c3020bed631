"""A producer's SENDs on their way to the thread pool (server/producers.py's ProducerSession), with a fake
connection that records each trip: at most WRITE_TRIP_SENDS a trip, in the order received, each trip's
receipts written when it ends (so receipts of a long run of SENDs flow back while the rest are written)."""

from __future__ import annotations

import asyncio

from seglog.server.producers import WRITE_TRIP_SENDS, ProducerSession, QueuedSend
from seglog.server.protocol.frames import Frame, FrameDecoder, Type, command
from seglog.server.publish_buffer import PublishBuffer

SEND_COST = 1000  # what each SEND of these tests holds of the publish buffer


class FakeService:
    def release_producer(self, target, name) -> None:
        pass

    def close_writer(self, handle) -> None:
        pass


class FakeHandle:
    target = name = None


class FakeConnection:
    """What ProducerSession uses of its connection: trips to the thread pool (SENDs answered with offsets,
    not written), writes and drains."""

    service = FakeService()

    def __init__(self) -> None:
        self.trips: list[list[int]] = []  # the sequence ids of each trip's SENDs
        self.written: list[bytes] = []
        self.publish = PublishBuffer(10**9, 10**9).account()

    async def blocking(self, function, *args):
        if function == self.service.close_writer:
            return function(*args)
        (sends,) = args
        self.trips.append([send.sequence_id for send in sends])
        await asyncio.sleep(0)  # (a trip takes time: SENDs arriving meanwhile wait for the next one)
        return [send.sequence_id for send in sends]  # (offset = sequence id)

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        pass


def test_a_long_run_of_sends_goes_in_trips_of_at_most_the_limit_each_answered_when_it_ends():
    count = 3 * WRITE_TRIP_SENDS + 5

    async def run() -> FakeConnection:
        connection = FakeConnection()
        session = ProducerSession(connection, 7, FakeHandle(), close_by_server=None)  # (no quota here)
        for sequence_id in range(count):  # (all waiting before the session's task first runs)
            connection.publish.hold(SEND_COST)
            session.queue.put_nowait(QueuedSend(sequence_id, sequence_id, Frame(command(Type.SEND)), SEND_COST))
        await asyncio.wait_for(session.close(), 10)  # (writes and answers every SEND first)
        return connection

    connection = asyncio.run(run())
    assert connection.publish.held == connection.publish.buffer.held == 0  # each SEND released once written
    assert [len(trip) for trip in connection.trips] == [WRITE_TRIP_SENDS] * 3 + [5]
    assert [s for trip in connection.trips for s in trip] == list(range(count))
    assert len(connection.written) == len(connection.trips)  # one write of receipts a trip
    for trip, data in zip(connection.trips, connection.written):
        receipts = FrameDecoder().feed(data)
        assert [(r.command.type, r.command.send_receipt.producer_id, r.command.send_receipt.sequence_id,
                 r.command.send_receipt.message_id.entry_id) for r in receipts] == \
            [(Type.SEND_RECEIPT, 7, s, s) for s in trip]
