"""One Replicator, in this process, from a local data directory to a real `seglog serve`: what it sends, what
it leaves, and how it resumes; the receiving server's handling of a replicator's SENDs."""

from __future__ import annotations

import asyncio
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import seglog
from helpers_server import pulsar, start_server
from seglog.broker import Broker
from seglog.clock import system_clock
from seglog.replication.client import RemoteCluster, RemoteConnection
from seglog.replication.replicator import Replicator
from seglog.server.protocol import pulsar_api_pb2 as api

TOPIC = "public/default/orders"
WAIT_S = 20.0


def _replicate(local_data, server, *, until, local="east", remote="west", start=None, queue_size=1000) -> dict:
    """Run a replicator of TOPIC's partition 0 from `local_data` to `server` until `until(replicator)` holds;
    `start(replicator)` once it runs; at most `queue_size` messages in flight."""
    async def run() -> dict:
        broker = Broker.open(local_data, clock=system_clock, background=False)
        executor = ThreadPoolExecutor(2)
        connection = await RemoteConnection.open(RemoteCluster(remote, server.pulsar_url))
        subscription = broker.subscriptions.open(broker.topic(TOPIC), f"pulsar.repl.{remote}", "exclusive",
                                                 "earliest")

        async def producer():
            return await connection.create_producer(f"persistent://{TOPIC}", f"pulsar.repl.{local}-->{remote}")

        replicator = Replicator(subscription, 0, local, remote, f"persistent://{TOPIC}", producer, executor,
                                system_clock, queue_size=queue_size)
        replicator.start()
        if start is not None:
            start(replicator)
        deadline = time.monotonic() + WAIT_S
        while not until(replicator) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        held = until(replicator)  # (while it runs: stopping acknowledges what was receipted last too)
        await replicator.stop()
        floor = subscription.cursors[0].acks.floor
        broker.subscriptions.release(subscription)
        await connection.close()
        executor.shutdown()
        broker.close()
        assert held, f"the condition did not hold within {WAIT_S} s"
        return {"sent": replicator.stats.messages_out, "floor": floor}
    return asyncio.run(run())


def _write(data, values, **options) -> None:
    with seglog.open(data) as log:
        try:
            topic = log.topic(TOPIC)
        except seglog.errors.TopicNotFoundError:
            topic = log.create_topic(TOPIC)
        with topic.producer() as producer:
            producer.send_batch(values, **options)


def test_messages_written_in_process_arrive_with_their_fields_and_publish_times(tmp_path):
    local, server = tmp_path / "east", start_server(tmp_path / "west", "--cluster", "west")
    try:
        _write(local, [b"a", None, b"c"], keys=[b"k1", None, b"k3"], timestamps=[1000, 1000, 2000],
               properties=[{"p": "1"}, {}, {"p": "3"}])
        result = _replicate(local, server,
                            until=lambda replicator: replicator.stats.messages_out >= 3 and _floor(replicator) == 3)
        assert result == {"sent": 3, "floor": 3}
        got = _read(server, 3)
        assert [(m.data(), m.partition_key(), m.properties(), m.publish_timestamp()) for m in got] == [
            (b"a", "k1", {"p": "1"}, 1000), (b"", "", {}, 1000), (b"c", "k3", {"p": "3"}, 2000)]
    finally:
        server.stop()
    with seglog.open(tmp_path / "west") as log:  # stored as replicated from east: never sent on again
        messages = list(log.topic(TOPIC).reader("earliest", 0))
        assert [m.value for m in messages] == [b"a", None, b"c"]
        assert {m.batch_attributes.get("pulsar.replicated_from") for m in messages} == {"east"}


def test_with_one_message_in_flight_at_a_time_everything_arrives_in_order(tmp_path):
    local, server = tmp_path / "east", start_server(tmp_path / "west", "--cluster", "west")
    try:
        for index, value in enumerate((b"a", b"b", b"c", b"d")):  # (each its own publish time: an entry each)
            _write(local, [value], timestamps=[1_000 + index])
        # (counted as receipted before the acknowledgement's trip: wait for both)
        result = _replicate(local, server, queue_size=1,
                            until=lambda replicator: replicator.stats.messages_out >= 4 and _floor(replicator) == 4)
        assert result == {"sent": 4, "floor": 4}
        assert [m.data() for m in _read(server, 4)] == [b"a", b"b", b"c", b"d"]
    finally:
        server.stop()


def _read(server, count):
    reader = server.client().create_reader(f"persistent://{TOPIC}", pulsar.MessageId.earliest)
    got = [reader.read_next(10_000) for _ in range(count)]
    assert not reader.has_message_available()
    return got


def test_a_replicator_whose_cursor_lost_its_acks_sends_only_what_the_remote_lacks(tmp_path):
    local, server = tmp_path / "east", start_server(tmp_path / "west", "--cluster", "west")
    values = [b"m%d" % i for i in range(3000)]
    try:
        for start in range(0, 1500, 100):  # batches of 100, each with its own publish time
            _write(local, values[start:start + 100], timestamps=[1_700_000_000_000 + start] * 100)
        first = _replicate(local, server, until=lambda replicator: _floor(replicator) == 1500)
        assert first == {"sent": 1500, "floor": 1500}
        for start in range(1500, 3000, 100):
            _write(local, values[start:start + 100], timestamps=[1_700_000_000_000 + start] * 100)
        with seglog.open(local) as log:  # as if the cursor's acks were lost: it starts over
            log.admin.topics.reset_cursor(TOPIC, "pulsar.repl.west", {0: 0})
        second = _replicate(local, server, until=lambda replicator: _floor(replicator) == 3000)
        # what the remote had (PRODUCER_SUCCESS' last sequence id) was acknowledged without sending
        assert second == {"sent": 1500, "floor": 3000}
        assert [m.data() for m in _read(server, 3000)] == values
    finally:
        server.stop()


def test_messages_for_other_clusters_are_acknowledged_and_not_sent(tmp_path):
    origin = start_server(tmp_path / "east", "--cluster", "east")
    try:
        producer = origin.client().create_producer(f"persistent://{TOPIC}")
        producer.send(b"local only", disable_replication=True)
        producer.send(b"for north", replication_clusters=["east", "north"])
        producer.send(b"for west", replication_clusters=["west"])
        producer.send(b"for all")
        name = producer.producer_name()
    finally:
        origin.stop()
    server = start_server(tmp_path / "west", "--cluster", "west")
    try:
        result = _replicate(tmp_path / "east", server, until=lambda replicator: _floor(replicator) == 4)
        assert result == {"sent": 2, "floor": 4}
        got = _read(server, 2)
        assert [m.data() for m in got] == [b"for west", b"for all"]
        assert {m.producer_name() for m in got} == {name}  # the original producer's, not the replicator's
    finally:
        server.stop()


def test_messages_it_is_told_were_replicated_here_are_acknowledged_and_passed_over(tmp_path):
    local, server = tmp_path / "east", start_server(tmp_path / "west", "--cluster", "west")
    try:
        for i in range(7):  # (a stored batch each, as unbatched SENDs)
            _write(local, [b"m%d" % i])

        def told(replicator: Replicator) -> None:  # (runs that follow each other, and one apart from them)
            for first, count in ((1, 1), (2, 2), (5, 1)):
                replicator.replicated_here(first, count)

        result = _replicate(local, server, start=told,
                            until=lambda replicator: _floor(replicator) == 7 and replicator.delay_ms() == 0)
        assert result == {"sent": 3, "floor": 7}
        assert [m.data() for m in _read(server, 3)] == [b"m0", b"m4", b"m6"]
    finally:
        server.stop()


def _floor(replicator: Replicator) -> int:
    return replicator.subscription.cursors[0].acks.floor


def test_a_marker_goes_after_the_messages_before_it_and_is_receipted_not_stored(tmp_path):
    local, server = tmp_path / "east", start_server(tmp_path / "west", "--cluster", "west")
    try:
        _write(local, [b"a", b"b"])
        sent = []

        def queue(replicator: Replicator) -> None:
            replicator.send_marker(2, 10, b"a snapshot request")  # after offsets 0 and 1
            sent.append(True)

        result = _replicate(local, server, start=queue,
                            until=lambda replicator: _floor(replicator) == 2 and replicator.delay_ms() == 0
                            and not replicator.markers_waiting)
        assert sent and result == {"sent": 2, "floor": 2}
        assert [m.data() for m in _read(server, 2)] == [b"a", b"b"]  # the marker is not a message there
    finally:
        server.stop()


def _batch_entry(first_offset: int, first_sequence_id: int, values: list[bytes]) -> tuple[int, bytes, bytes, int]:
    """A replicator's SEND of `values` (origin offsets first_offset ..., sequence ids first_sequence_id ...) as
    one batch entry: (sequence id = the last origin offset, metadata, payload, how many messages)."""
    metadata = api.MessageMetadata(producer_name="p", sequence_id=first_sequence_id, publish_time=1_000,
                                   num_messages_in_batch=len(values), replicated_from="east")
    items = []
    for index, value in enumerate(values):
        single = api.SingleMessageMetadata(payload_size=len(value), sequence_id=first_sequence_id + index)
        items.append(struct.pack(">I", single.ByteSize()) + single.SerializeToString() + value)
    return first_offset + len(values) - 1, metadata.SerializeToString(), b"".join(items), len(values)


def test_a_replicated_entry_that_reaches_past_what_was_stored_adds_only_the_messages_after_it(tmp_path):
    """A replicator that sends again may pack a run otherwise (entries.py): the receiving server stores the
    messages of an entry after the last origin offset it has, not the entry's whole or none of it."""
    server = start_server(tmp_path / "west", "--cluster", "west")
    values = [b"v%d" % i for i in range(8)]

    async def send() -> int:
        connection = await RemoteConnection.open(RemoteCluster("west", server.pulsar_url))
        producer = await connection.create_producer(f"persistent://{TOPIC}", "pulsar.repl.east-->west")
        producer.send([_batch_entry(0, 100, values[:5]), _batch_entry(2, 102, values[2:]),
                       _batch_entry(3, 103, values[3:6])])  # (the last: all stored already)
        await producer.receipts_beyond(2)
        await producer.close()
        again = await connection.create_producer(f"persistent://{TOPIC}", "pulsar.repl.east-->west")
        await connection.close()
        return again.last_sequence_id

    try:
        assert asyncio.run(send()) == 7  # (the last origin offset stored)
    finally:
        server.stop()
    with seglog.open(tmp_path / "west") as log:
        messages = list(log.topic(TOPIC).reader("earliest", 0))
    assert [m.value for m in messages] == values
    assert [(m.offset, m.batch_attributes["pulsar.sequence_id"], m.batch_attributes["pulsar.highest_sequence_id"],
             m.batch_attributes["pulsar.replicated_offset"]) for m in messages if m.offset in (0, 5)] == [
        (0, "100", "104", "4"), (5, "105", "107", "7")]
