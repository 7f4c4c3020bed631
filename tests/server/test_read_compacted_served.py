"""pulsar-client's is_read_compacted against `seglog serve`: consumers and readers get each key's latest message
below the compaction horizon, then the log; shared subscriptions are refused as Pulsar's broker refuses them.
The compaction is made beside the server, at the storage level (it takes only the partition's compaction lock)."""

from __future__ import annotations

import pytest

from helpers_server import pulsar
from seglog.lifecycle.compaction import compact_partition
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command, encode_command
from seglog.storage.partition_view import PartitionView

TOPIC = "persistent://public/default/compacted"


def compact(server) -> None:
    view = PartitionView(server.data / "topics" / "public" / "default" / "compacted" / "0")
    compact_partition(view, horizon=view.end_offset(), now_ms=0, delete_retention_ms=None)


def received(consumer, count: int) -> list[tuple[str, bytes | None]]:
    """`count` messages, acknowledged, then none more for a moment."""
    got = []
    while True:
        try:
            message = consumer.receive(10_000 if len(got) < count else 300)
        except pulsar.Timeout:
            return got
        got.append((message.partition_key(), message.data()))
        consumer.acknowledge(message)


def test_compacted_consumers_and_readers_get_each_keys_latest_message(server):
    client = server.client()
    client.subscribe(TOPIC, "compacted", is_read_compacted=True).close()
    client.subscribe(TOPIC, "plain").close()
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for key, value in [("k0", b"a"), ("k0", b"b"), ("k1", b"c"), ("k1", None), ("k2", b"d")]:
        producer.send(value, partition_key=key)
    compact(server)
    producer.send(b"e", partition_key="k0")
    consumer = client.subscribe(TOPIC, "compacted", is_read_compacted=True)
    assert received(consumer, 3) == [("k0", b"b"), ("k2", b"d"), ("k0", b"e")]
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest, is_read_compacted=True)
    assert [reader.read_next(5_000).data() for _ in range(3)] == [b"b", b"d", b"e"]
    plain = client.subscribe(TOPIC, "plain")
    assert len(received(plain, 6)) == 6


@pytest.mark.parametrize("sub_type", [api.CommandSubscribe.Shared, api.CommandSubscribe.Key_Shared])
def test_read_compacted_on_a_shared_subscription_is_refused(raw, sub_type):
    # pulsar-client refuses it itself; a raw SUBSCRIBE shows the broker refuses it too
    connection = raw()
    connection.connect()
    connection.send(encode_command(command(Type.SUBSCRIBE, topic=TOPIC, subscription="shared", sub_type=sub_type,
                                           consumer_id=1, request_id=7, read_compacted=True)))
    answer = connection.receive()
    assert answer.type == Type.ERROR and answer.error.request_id == 7
    assert answer.error.error == api.NotAllowedError
    assert answer.error.message == "Read compacted can only be used with exclusive or failover persistent subscriptions"
