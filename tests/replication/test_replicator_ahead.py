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


def test_taken_ahead_the_window_holds_order_holds_and_a_marker_waits_for_the_messages_before_it(tmp_path):
    with seglog.open(tmp_path / "east") as log:
        with log.create_topic(TOPIC).producer() as producer:
            for value in (b"a", b"b", b"c", b"d", b"e", b"f"):  # (a stored batch each: an entry each)
                producer.send_batch([value])
    fake = FakeProducer()

    async def run() -> int:
        broker = Broker.open(tmp_path / "east", clock=system_clock, background=False)
        with ThreadPoolExecutor(2) as executor:
            subscription = broker.subscriptions.open(broker.topic(TOPIC), "pulsar.repl.west", "exclusive",
                                                     "earliest")

            async def producer():
                return fake

            replicator = Replicator(subscription, 0, "east", "west", fake.topic, producer, executor, system_clock,
                                    queue_size=2)
            replicator.start()
            replicator.send_marker(3, 10, b"after c")  # (before d, taken ahead while c is in flight)
            deadline = time.monotonic() + WAIT_S
            while subscription.cursors[0].acks.floor < 6 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await replicator.stop()
            floor = subscription.cursors[0].acks.floor
            broker.subscriptions.release(subscription)
        broker.close()
        return floor

    assert asyncio.run(run()) == 6
    assert [(sequence_id, marker) for sequence_id, marker, _ in fake.sent] == [
        (0, None), (1, None), (2, None), (2, 10), (3, None), (4, None), (5, None)]
    assert max(in_flight for _, _, in_flight in fake.sent) <= 2  # (the window: queue_size messages)
