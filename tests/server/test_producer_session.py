"""A producer's SENDs on their way to the thread pool (server/producers.py's ProducerSession), with a fake
connection that records each trip: at most WRITE_TRIP_SENDS a trip, in the order received, each trip's
receipts written when it ends (so receipts of a long run of SENDs flow back while the rest are written)."""

from __future__ import annotations

import asyncio

from seglog._core._pulsar_send import SendFrame
from seglog.server.producers import INLINE_WRITE_BYTES, WRITE_TRIP_SENDS, ProducerSession, QueuedSend
from seglog.server.protocol.frames import FrameDecoder, Type
from seglog.server.publish_buffer import PublishBuffer

SEND_COST = 1000  # what each SEND of these tests holds of the publish buffer


def send(sequence_id: int) -> SendFrame:
    return SendFrame(7, sequence_id, sequence_id, 1, True, b"", b"")


class FakeService:
    cheap = False  # BrokerService.cheap_append's answer

    def release_producer(self, target, name) -> None:
        pass

    def cheap_append(self, handle, nbytes: int, batches: int) -> bool:
        return self.cheap

    def close_writer(self, handle) -> None:
        pass


class FakeHandle:
    target = name = None


class FakeConnection:
    """What ProducerSession uses of its connection: trips to the thread pool (SENDs answered with offsets,
    not written), writes and drains."""

    def __init__(self) -> None:
        self.service = FakeService()
        self.trips: list[list[int]] = []  # the sequence ids of each trip's SENDs
        self.written: list[bytes] = []
        self.publish = PublishBuffer(10**9, 10**9).account()

    async def blocking(self, function, *args):
        if function == self.service.close_writer:
            return function(*args)
        (sends,) = args
        self.trips.append([send.frame.sequence_id for send in sends])
        await asyncio.sleep(0)  # (a trip takes time: SENDs arriving meanwhile wait for the next one)
        return [send.frame.sequence_id for send in sends]  # (offset = sequence id)

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
            session.queue.put_nowait(QueuedSend(send(sequence_id), SEND_COST))
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


def written_on(cheap: bool, cost: int, monkeypatch) -> tuple[FakeConnection, list[int]]:
    """Run 10 SENDs of `cost` bytes each through a session whose service calls an append `cheap` or not: the
    connection (its trips to the thread pool) and the sequence ids written on the event loop."""
    on_loop: list[int] = []

    def write(session, sends):
        on_loop.extend(send.frame.sequence_id for send in sends)
        return [send.frame.sequence_id for send in sends]

    monkeypatch.setattr(ProducerSession, "_write", write)

    async def run() -> FakeConnection:
        connection = FakeConnection()
        connection.service.cheap = cheap
        session = ProducerSession(connection, 7, FakeHandle(), close_by_server=None)
        for sequence_id in range(10):
            connection.publish.hold(cost)
            session.queue.put_nowait(QueuedSend(send(sequence_id), cost))
        await asyncio.wait_for(session.close(), 10)
        return connection

    return asyncio.run(run()), on_loop


def test_small_sends_are_written_on_the_event_loop_when_that_is_cheap(monkeypatch):
    connection, on_loop = written_on(True, 100, monkeypatch)
    assert on_loop == list(range(10)) and connection.trips == []
    receipts = FrameDecoder().feed(b"".join(connection.written))
    assert [r.command.send_receipt.sequence_id for r in receipts] == list(range(10))


def test_sends_go_to_the_thread_pool_when_large_or_when_the_service_says_the_append_is_not_cheap(monkeypatch):
    connection, on_loop = written_on(False, 100, monkeypatch)
    assert on_loop == [] and [s for trip in connection.trips for s in trip] == list(range(10))
    connection, on_loop = written_on(True, INLINE_WRITE_BYTES // 5, monkeypatch)  # (10 of them: too much at once)
    assert on_loop == [] and [s for trip in connection.trips for s in trip] == list(range(10))


def test_sends_are_staged_only_while_nothing_of_their_producer_waits_or_is_being_written(monkeypatch):
    """stage takes a SEND to be written with the rest of the connection's read (write_staged) when the
    producer is idle, and leaves it to the queue otherwise, so receipts keep the order of the SENDs."""
    monkeypatch.setattr(ProducerSession, "_write", lambda session, sends: [s.frame.sequence_id for s in sends])

    async def run() -> tuple[list[bool], FakeConnection]:
        connection = FakeConnection()
        connection.service.cheap = True
        session = ProducerSession(connection, 7, FakeHandle(), close_by_server=None)
        staged = [session.stage(send(0), 100), session.stage(send(1), 100)]  # idle: staged, in order
        session.write_staged()
        assert len(connection.written) == 1  # (both receipts in one write)
        connection.publish.hold(100)
        session.queue.put_nowait(QueuedSend(send(2), 100))
        staged.append(session.stage(send(3), 100))  # one waits in the queue: queued after it
        connection.publish.hold(100)
        session.queue.put_nowait(QueuedSend(send(3), 100))
        await asyncio.wait_for(session.close(), 10)
        return staged, connection

    staged, connection = asyncio.run(run())
    assert staged == [True, True, False]
    receipts = FrameDecoder().feed(b"".join(connection.written))
    assert [r.command.send_receipt.sequence_id for r in receipts] == [0, 1, 2, 3]
    assert connection.publish.held == 0


def test_staged_sends_the_service_will_not_take_on_the_loop_go_to_the_task_in_order(monkeypatch):
    """Staged SENDs that are not cheap to write (a segment to roll, blocks to allocate) are queued, holding
    their cost of the publish buffer until the task has written them in the thread pool."""
    async def run() -> FakeConnection:
        connection = FakeConnection()
        session = ProducerSession(connection, 7, FakeHandle(), close_by_server=None)
        assert session.stage(send(0), SEND_COST) and session.stage(send(1), SEND_COST)
        session.write_staged()
        assert connection.publish.held == 2 * SEND_COST and connection.written == []
        assert not session.stage(send(2), SEND_COST)  # (queued now: the next goes after them)
        connection.publish.hold(SEND_COST)
        session.queue.put_nowait(QueuedSend(send(2), SEND_COST))
        await asyncio.wait_for(session.close(), 10)
        return connection

    connection = asyncio.run(run())
    assert [s for trip in connection.trips for s in trip] == [0, 1, 2]
    receipts = FrameDecoder().feed(b"".join(connection.written))
    assert [r.command.send_receipt.sequence_id for r in receipts] == [0, 1, 2]
    assert connection.publish.held == connection.publish.buffer.held == 0
