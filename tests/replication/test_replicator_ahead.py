"""A replicator takes messages ahead of its flight window (replicator.py's _TakenAhead), in this process with
a fake remote producer that records what is sent and receipts it a moment later: the window still bounds
what is in flight, everything goes once and in order, and a marker still goes after every message before
its offset, though the messages after it were taken already."""

from __future__ import annotations

import asyncio
import logging
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
    entries: list[tuple[bytes, bytes]] = field(default_factory=list)  # (metadata, payload) of each
    receipted: int = 0
    _unreceipted: deque = field(default_factory=deque)

    def send(self, entries) -> None:
        for sequence_id, metadata, payload, count in entries:
            self.entries.append((metadata, payload))
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
    """Store `batches` (a stored batch, an entry, each: each its own publish time) on east, replicate them to
    `fake` with a window of `queue_size` messages and `markers` queued at the start; the cursor's floor once
    everything is receipted (or WAIT_S passed)."""
    with seglog.open(tmp_path / "east") as log:
        with log.create_topic(TOPIC).producer() as producer:
            for index, values in enumerate(batches):
                producer.send_batch(values, timestamps=[1_000 + index] * len(values))
    return _run(tmp_path, fake, queue_size, markers, sum(map(len, batches)))


def _replicate_sends(tmp_path, sends: list[tuple[str, int, int, bytes | list[bytes], tuple[str, ...]]],
                     fake: FakeProducer, queue_size: int = 1000,
                     markers: tuple[tuple[int, int, bytes], ...] = ()) -> int:
    """As _replicate, of SENDs stored on east as its server stores them: each (producer name, first sequence
    id, publish time, value or a batch's values, replicate_to)."""
    with seglog.open(tmp_path / "east") as log:
        log.create_topic(TOPIC)
    broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
    service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    handles = {}
    stored = 0
    for name, sequence_id, publish_time, value, replicate_to in sends:
        if name not in handles:
            handles[name] = service.open_writer(service.resolve(TOPIC, False), name)
        stored += _append_send(service, handles[name], sequence_id, publish_time, value, replicate_to)
    for handle in handles.values():
        service.close_writer(handle)
    broker.close()
    return _run(tmp_path, fake, queue_size, markers, stored)


def _append_send(service: BrokerService, handle, sequence_id: int, publish_time: int, value: bytes | list[bytes],
                 replicate_to: tuple[str, ...] = ()) -> int:
    """Append one SEND of `handle`'s producer as the server stores it: a value, or a batch of values; how many
    messages it held."""
    metadata = api.MessageMetadata(producer_name=handle.name, sequence_id=sequence_id, publish_time=publish_time,
                                   replicate_to=replicate_to)
    if isinstance(value, list):
        metadata.num_messages_in_batch = len(value)
        singles = [api.SingleMessageMetadata(payload_size=len(item)).SerializeToString() for item in value]
        value = b"".join(len(single).to_bytes(4, "big") + single + item for single, item in zip(singles, value))
    messages = unpack(metadata, value)
    service.append(handle, messages, sequence_id)
    return len(messages.values)


def _run(tmp_path, fake: FakeProducer, queue_size: int, markers: tuple[tuple[int, int, bytes], ...],
         expected: int) -> int:
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


def _unpacked(fake: FakeProducer) -> list[tuple[str, str, str, int, list[bytes | None]]]:
    """Of each message entry sent: (producer name, first and highest sequence id, publish time, values), as
    the receiving server reads it; each was sent as replicated from east, to the clusters it named."""
    got = []
    for metadata, payload in fake.entries:
        parsed = api.MessageMetadata.FromString(metadata)
        if parsed.HasField("marker_type"):
            continue
        assert parsed.replicated_from == "east"
        messages = unpack(parsed, payload)
        got.append((messages.attributes["pulsar.producer"], messages.attributes["pulsar.sequence_id"],
                    messages.attributes["pulsar.highest_sequence_id"], parsed.publish_time, messages.values))
    return got


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
    """A thread pool that counts the replicator's takes it is given and the messages they read."""

    read = 0
    takes = 0

    def submit(self, fn, /, *args, **kwargs):
        if getattr(fn, "__name__", "") != "_take":
            return super().submit(fn, *args, **kwargs)

        def counted(*args):
            taken, read = fn(*args)
            self.read += read
            self.takes += 1
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
            for index, values in enumerate(backlog):  # (each its own publish time: an entry each)
                producer.send_batch(values, timestamps=[index])

    async def run() -> list[int]:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
        handle = service.open_writer(service.resolve(TOPIC, False), "producer")
        sequence_ids = iter(range(10_000))

        def append(count: int) -> None:
            first = next(sequence_ids)
            # (each its own publish time: an entry each, however many a take finds)
            _append_send(service, handle, first, 1_000 + first, b"v" if count == 1 else [b"v"] * count)
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


def test_unbatched_messages_that_agree_on_their_entry_fields_go_as_one_batch_entry(tmp_path):
    """entries.py: messages one offset apart from one producer, with one publish time and one replicate_to,
    and sequence ids one apart, go as one entry, each with its own sequence id; any difference starts
    another."""
    fake = FakeProducer()
    sends = [("p", 0, 1_000, b"a", ()), ("p", 1, 1_000, b"b", ()), ("p", 2, 1_000, b"c", ()),
             ("p", 3, 1_001, b"d", ()),  # another publish time
             ("p", 5, 1_001, b"e", ()),  # sequence ids not one apart
             ("q", 6, 1_001, b"f", ()), ("q", 7, 1_001, b"g", ()),  # another producer
             ("q", 8, 1_001, b"h", ("west",)),  # another replicate_to
             ("q", 9, 1_001, b"i", ("north",)),  # stays: the next is not one offset apart
             ("q", 10, 1_001, b"j", ("west",))]
    assert _replicate_sends(tmp_path, sends, fake) == 10
    assert [sequence_id for sequence_id, _, _ in fake.sent] == [2, 3, 4, 6, 7, 9]  # (an entry's last offset)
    assert _unpacked(fake) == [("p", "0", "2", 1_000, [b"a", b"b", b"c"]), ("p", "3", "3", 1_001, [b"d"]),
                               ("p", "5", "5", 1_001, [b"e"]), ("q", "6", "7", 1_001, [b"f", b"g"]),
                               ("q", "8", "8", 1_001, [b"h"]), ("q", "10", "10", 1_001, [b"j"])]


def test_packing_stops_at_a_thousand_messages_or_128_kib(tmp_path):
    fake = FakeProducer()
    sends = [("p", i, 1_000, b"v", ()) for i in range(1_001)]
    big = b"x" * 50_000  # (two are 100,000 bytes; three would pass 131,072)
    sends += [("p", 1_001 + i, 1_000, big, ()) for i in range(5)]
    assert _replicate_sends(tmp_path, sends, fake, queue_size=5_000) == 1_006
    # the 1,001st message starts an entry, which takes two of 50,000 bytes after it
    assert [sequence_id for sequence_id, _, _ in fake.sent] == [999, 1_002, 1_004, 1_005]
    assert [len(values) for *_, values in _unpacked(fake)] == [1_000, 3, 2, 1]


def test_a_stored_batch_joins_the_entry_before_it_only_whole(tmp_path):
    fake = FakeProducer()
    sends = [("p", i, 1_000, b"v", ()) for i in range(997)]
    sends += [("p", 997, 1_000, [b"b"] * 3, ())]  # (joins: 1,000 messages)
    sends += [("p", 1_000 + i, 1_000, b"v", ()) for i in range(998)]
    sends += [("p", 1_998, 1_000, [b"b"] * 3, ())]  # (would be 1,001: an entry of its own)
    assert _replicate_sends(tmp_path, sends, fake, queue_size=5_000) == 2_001
    assert [len(values) for *_, values in _unpacked(fake)] == [1_000, 998, 3]


def test_a_marker_that_falls_inside_a_packed_entry_cuts_it_in_two(tmp_path):
    fake = FakeProducer()
    sends = [("p", 10 + i, 1_000, b"v%d" % i, ()) for i in range(5)]
    assert _replicate_sends(tmp_path, sends, fake, markers=((2, 10, b"after v1"),)) == 5
    assert [(sequence_id, marker) for sequence_id, marker, _ in fake.sent] == [(1, None), (1, 10), (4, None)]
    assert _unpacked(fake) == [("p", "10", "11", 1_000, [b"v0", b"v1"]),
                               ("p", "12", "14", 1_000, [b"v2", b"v3", b"v4"])]


def test_a_replicator_with_nothing_to_do_looks_less_often_and_an_append_still_goes_at_once(tmp_path):
    """replicator.py's POLL_IDLE_MAX_S: on a topic where nothing happens, the takes that find nothing come
    ever further apart (0.2, 0.4, 0.8 s, then each second), not ten a second; an append wakes it all the
    same, and is sent at once."""
    fake = FakeProducer()
    with seglog.open(tmp_path / "east") as log:
        log.create_topic(TOPIC)

    async def run() -> tuple[int, float]:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        with _CountingPool(2) as pool:
            subscription, replicator = _started(broker, fake, pool, 1000)
            await asyncio.sleep(3.0)
            idle_takes = pool.takes
            with seglog.open(tmp_path / "east") as log, log.topic(TOPIC).producer() as producer:
                producer.send_batch([b"new"])
            appended = time.monotonic()
            replicator.appended()
            while not fake.sent and time.monotonic() - appended < WAIT_S:
                await asyncio.sleep(0.005)
            waited = time.monotonic() - appended
            await replicator.stop()
            broker.subscriptions.release(subscription)
        broker.close()
        return idle_takes, waited

    idle_takes, waited = asyncio.run(run())
    assert idle_takes <= 8, f"{idle_takes} takes in 3 s with nothing to do (ten a second: 30)"
    assert fake.sent and waited < 0.5, f"the append went {waited:.2f} s after it was told of"


def test_an_encrypted_entry_goes_whole_and_a_marker_inside_it_goes_before_it(tmp_path, caplog):
    """An encrypted entry cannot be cut (server/protocol/encryption.py): a marker whose offset falls inside it
    goes before it, early rather than late, and the replicator goes on without a failure."""
    caplog.set_level(logging.INFO)
    fake = FakeProducer()
    with seglog.open(tmp_path / "east") as log:
        log.create_topic(TOPIC)
    broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
    service = BrokerService(broker, Settings("east", "pulsar://127.0.0.1:6650", 5 * 1024 * 1024))
    handle = service.open_writer(service.resolve(TOPIC, False), "p")
    metadata = api.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1_000, num_messages_in_batch=3,
                                   compression=api.LZ4, uncompressed_size=99, encryption_param=b"iv",
                                   encryption_keys=[api.EncryptionKeys(key="k", value=b"data key")])
    service.append(handle, unpack(metadata, b"ciphertext"), 0)
    service.close_writer(handle)
    broker.close()
    assert _run(tmp_path, fake, 1000, ((1, 10, b"inside"),), 3) == 3
    assert [(sequence_id, marker) for sequence_id, marker, _ in fake.sent] == [(0, 10), (2, None)]
    sent, payload = api.MessageMetadata.FromString(fake.entries[1][0]), fake.entries[1][1]
    assert payload == b"ciphertext" and sent.replicated_from == "east"
    assert (sent.num_messages_in_batch, sent.compression, sent.uncompressed_size) == (3, api.LZ4, 99)
    assert [(key.key, key.value) for key in sent.encryption_keys] == [("k", b"data key")]
    assert sent.encryption_param == b"iv"
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []
