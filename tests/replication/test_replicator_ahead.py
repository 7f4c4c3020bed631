"""A replicator takes messages ahead of its flight window (replicator.py's _TakenAhead), in this process with
a fake remote producer that records what is sent and receipts it a moment later: the window still bounds
what is in flight, everything goes once and in order, and a marker still goes after every message before
its offset, though the messages after it were taken already."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import seglog
from seglog.broker import Broker
from seglog.clock import system_clock
from seglog.replication.replicator import Replicator
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.batches import unpack
from seglog.server.service import BrokerService, Settings
from seglog.subscriptions.subscription import Subscription

TOPIC = "public/default/orders"
RECEIPT_DELAY_S = 0.05  # (long enough for the replicator to take ahead meanwhile)
WAIT_S = 20.0


@dataclass
class FakeConnection:
    local_address: str = "127.0.0.1:1"

    async def drain(self) -> None:
        pass


@dataclass(eq=False)
class FakeProducer:
    """What a Replicator uses of a RemoteProducer; `sent` holds (sequence id, marker type or None, messages
    in flight when it was sent) of every entry."""
    name: str = "pulsar.repl.east-->west"
    topic: str = f"persistent://{TOPIC}"
    last_sequence_id: int = -1
    connection: FakeConnection = field(default_factory=FakeConnection)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    sent: list[tuple[int, int | None, int]] = field(default_factory=list)
    receipted: int = 0
    _unreceipted: deque = field(default_factory=deque)

    def send(self, entries) -> None:
        for sequence_id, metadata, _payload, count in entries:
            marker = api.MessageMetadata.FromString(metadata)
            self._unreceipted.append(count)
            in_flight = sum(self._unreceipted)
            self.sent.append((sequence_id, marker.marker_type if marker.HasField("marker_type") else None,
                              in_flight))

    async def receipts_beyond(self, seen: int) -> int:
        while self.receipted <= seen:
            await asyncio.sleep(RECEIPT_DELAY_S)
            while self._unreceipted:
                self._unreceipted.popleft()
                self.receipted += 1
        return self.receipted

    async def close(self) -> None:
        pass


def _started(broker: Broker, fake: FakeProducer, executor: ThreadPoolExecutor,
             queue_size: int) -> tuple[Subscription, Replicator]:
    """The replication cursor of TOPIC's partition 0, and a replicator on it to `fake`, started (on the
    running loop)."""
    subscription = broker.subscriptions.open(broker.topic(TOPIC), "pulsar.repl.west", "exclusive", "earliest")

    async def producer():
        return fake

    replicator = Replicator(subscription, 0, "east", "west", fake.topic, producer, executor, system_clock,
                            queue_size=queue_size)
    replicator.start()
    return subscription, replicator


def _replicate(tmp_path, batches: list[list[bytes]], fake: FakeProducer, queue_size: int,
               markers: tuple[tuple[int, int, bytes], ...] = ()) -> int:
    """Store `batches` (a stored batch, an entry, each) on east, replicate them to `fake` with a window of
    `queue_size` messages and `markers` queued at the start; the cursor's floor once everything is receipted
    (or WAIT_S passed)."""
    with seglog.open(tmp_path / "east") as log:
        with log.create_topic(TOPIC).producer() as producer:
            for values in batches:
                producer.send_batch(values)
    expected = sum(map(len, batches))

    async def run() -> int:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        with ThreadPoolExecutor(2) as executor:
            subscription, replicator = _started(broker, fake, executor, queue_size)
            for marker in markers:
                replicator.send_marker(*marker)
            deadline = time.monotonic() + WAIT_S
            while subscription.cursors[0].acks.floor < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await replicator.stop()
            floor = subscription.cursors[0].acks.floor
            broker.subscriptions.release(subscription)
        broker.close()
        return floor

    return asyncio.run(run())


def test_taken_ahead_the_window_holds_order_holds_and_a_marker_waits_for_the_messages_before_it(tmp_path):
    fake = FakeProducer()
    # the marker goes before d, which is taken ahead while c is in flight
    floor = _replicate(tmp_path, [[v] for v in (b"a", b"b", b"c", b"d", b"e", b"f")], fake, 2, ((3, 10, b"after c"),))
    assert floor == 6
    assert [(sequence_id, marker) for sequence_id, marker, _ in fake.sent] == [
        (0, None), (1, None), (2, None), (2, 10), (3, None), (4, None), (5, None)]
    assert max(in_flight for _, _, in_flight in fake.sent) <= 2  # (the window: queue_size messages)


def test_a_stored_batch_larger_than_the_window_goes_whole_as_one_entry(tmp_path):
    fake = FakeProducer()
    floor = _replicate(tmp_path, [[b"a"], [b"b%d" % i for i in range(5)], [b"c"], [b"d%d" % i for i in range(3)]],
                       fake, 2)
    assert floor == 10
    # each stored batch one entry (never cut to fit), which goes while fewer than the window's 2 messages are
    # in flight, however many it holds
    assert [sequence_id for sequence_id, _, _ in fake.sent] == [0, 5, 6, 9]  # (an entry's last offset)
    assert all(in_flight - count < 2 for (_, _, in_flight), count in zip(fake.sent, [1, 5, 1, 3]))


class _CountingPool(ThreadPoolExecutor):
    """A thread pool that counts the messages the replicator's takes it is given read."""

    read = 0

    def submit(self, fn, /, *args, **kwargs):
        if getattr(fn, "__name__", "") != "_take":
            return super().submit(fn, *args, **kwargs)

        def counted(*args):
            taken, read = fn(*args)
            self.read += read
            return taken, read
        return super().submit(counted, *args, **kwargs)


def test_at_the_tail_small_batches_are_taken_on_the_loop_and_a_backlog_and_large_batches_in_the_pool(tmp_path):
    """replicator.py's LOOP_TAKE_MAX and LOOP_BATCH_MAX: a backlog is taken in the thread pool; once at the
    tail, unbatched messages appended are taken on the loop; a large stored batch after them is taken once on
    the loop, and the batches after it in the pool. Everything goes once, in order."""
    fake = FakeProducer()
    backlog = [[b"old%d" % i] for i in range(300)]
    with seglog.open(tmp_path / "east") as log:
        with log.create_topic(TOPIC).producer() as producer:
            for values in backlog:
                producer.send_batch(values)

    async def run() -> list[int]:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
        handle = service.open_writer(service.resolve(TOPIC, False), "producer")
        sequence_ids = iter(range(10_000))

        def append(count: int) -> None:
            first = next(sequence_ids)
            metadata = api.MessageMetadata(producer_name="producer", sequence_id=first, publish_time=1_000)
            if count > 1:
                metadata.num_messages_in_batch = count
            single = api.SingleMessageMetadata(payload_size=1).SerializeToString()
            payload = b"v" if count == 1 else b"".join(len(single).to_bytes(4, "big") + single + b"v"
                                                        for _ in range(count))
            service.append(handle, unpack(metadata, payload, first + count - 1), first)
            for _ in range(count - 1):
                next(sequence_ids)
            replicator.appended()

        async def floor_reaches(expected: int) -> None:
            deadline = time.monotonic() + WAIT_S
            while subscription.cursors[0].acks.floor < expected and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert subscription.cursors[0].acks.floor == expected

        with _CountingPool(2) as pool:
            subscription, replicator = _started(broker, fake, pool, 1000)
            read_in_pool = []  # messages the pool's takes read in each phase
            await floor_reaches(300)
            read_in_pool.append(pool.read)
            for _ in range(30):
                append(1)
                await asyncio.sleep(0.005)
            await floor_reaches(330)
            read_in_pool.append(pool.read - sum(read_in_pool))
            append(100)  # (taken on the loop: it follows unbatched messages at the tail)
            await floor_reaches(430)
            read_in_pool.append(pool.read - sum(read_in_pool))
            append(100)
            await floor_reaches(530)
            read_in_pool.append(pool.read - sum(read_in_pool))
            await replicator.stop()
            broker.subscriptions.release(subscription)
        service.close_writer(handle)
        broker.close()
        return read_in_pool

    assert asyncio.run(run()) == [300, 0, 0, 100]
    assert [sequence_id for sequence_id, _, _ in fake.sent] == [*range(330), 429, 529]  # (an entry's last offset)
