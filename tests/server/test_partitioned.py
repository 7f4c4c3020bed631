"""Consumers and readers of partitioned topics with the real Pulsar client: the client subscribes to each
partition on its own (`NAME-partition-N`), and each such consumer consumes that partition of the one seglog
subscription (docs/SERVER.md, Partitioned topics), with each subscription type's rule applied per partition."""

from __future__ import annotations

import time

import pytest
from test_consume import EARLIEST, assert_nothing_more

import seglog
from helpers_server import pulsar, receive_until, start_server

TOPIC = "persistent://public/default/parts"
PARTITIONS = 3


@pytest.fixture
def server(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log:
        log.create_topic("public/default/parts", partitions=PARTITIONS)
    running = start_server(data)
    yield running
    running.stop()


def produce(client, count: int) -> list:
    """`count` messages spread round robin over the partitions, unbatched; their ids."""
    producer = client.create_producer(TOPIC, batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    return [producer.send(b"%d" % i, partition_key=f"k{i % 7}") for i in range(count)]


def partition_of(message) -> int:
    return int(message.topic_name().rsplit("-partition-", 1)[1])


def test_a_subscription_receives_every_partition_and_its_acks_persist(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "all", initial_position=EARLIEST)
    ids = produce(client, 30)
    (received,) = receive_until([consumer], 30)
    assert sorted(m.data() for m in received) == sorted(b"%d" % i for i in range(30))
    assert {partition_of(m) for m in received} == set(range(PARTITIONS))
    for message in received:  # each message's id names its partition and its offset there
        assert message.message_id().partition() == partition_of(message)
    assert sorted((i.partition(), i.entry_id()) for i in ids) == \
        sorted((m.message_id().partition(), m.message_id().entry_id()) for m in received)
    consumer.close()  # flushes the grouped acks

    consumer = client.subscribe(TOPIC, "all", initial_position=EARLIEST)
    assert_nothing_more(consumer)
    consumer.close()
    server.stop()
    with seglog.open(server.data, background=False) as log:
        subscription = log.topic("public/default/parts").stats()["subscriptions"]["all"]
    assert subscription["msgBacklog"] == 0


def test_an_exclusive_subscription_takes_one_client_per_partition(server):
    client = server.client()
    client.subscribe(TOPIC, "mine", initial_position=EARLIEST)  # a consumer per partition, all accepted
    with pytest.raises(pulsar.ConsumerBusy):
        server.client().subscribe(TOPIC, "mine")


def test_failover_gives_each_partition_to_one_of_its_consumers(server):
    """Partition p goes to the (p mod n)-th of its n consumers sorted by name, as Pulsar's failover does for
    the consumers of a partitioned topic."""
    client = server.client()
    failover = pulsar.ConsumerType.Failover
    a = client.subscribe(TOPIC, "fo", consumer_type=failover, consumer_name="a", initial_position=EARLIEST)
    b = client.subscribe(TOPIC, "fo", consumer_type=failover, consumer_name="b", initial_position=EARLIEST)
    produce(client, 30)
    got_a, got_b = receive_until([a, b], 30)
    assert {partition_of(m) for m in got_a} == {0, 2}
    assert {partition_of(m) for m in got_b} == {1}
    assert len(got_a) + len(got_b) == 30


def test_shared_consumers_split_every_partition(server):
    client = server.client()
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(TOPIC, "sh", consumer_type=shared, initial_position=EARLIEST, receiver_queue_size=2)
    second = client.subscribe(TOPIC, "sh", consumer_type=shared, receiver_queue_size=2)
    produce(client, 60)
    got_first, got_second = receive_until([first, second], 60)
    assert sorted(int(m.data()) for m in got_first + got_second) == list(range(60))
    assert got_first and got_second


def test_key_shared_keeps_each_key_on_one_consumer(server):
    client = server.client()
    key_shared = pulsar.ConsumerType.KeyShared
    first = client.subscribe(TOPIC, "ks", consumer_type=key_shared, consumer_name="one", initial_position=EARLIEST)
    second = client.subscribe(TOPIC, "ks", consumer_type=key_shared, consumer_name="two", initial_position=EARLIEST)
    produce(client, 70)
    got_first, got_second = receive_until([first, second], 70)
    assert sorted(int(m.data()) for m in got_first + got_second) == list(range(70))
    keys_first = {(partition_of(m), m.partition_key()) for m in got_first}
    keys_second = {(partition_of(m), m.partition_key()) for m in got_second}
    assert not keys_first & keys_second


def test_unsubscribing_a_partitioned_consumer_deletes_the_subscription(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "leaving", initial_position=EARLIEST)
    produce(client, 6)
    receive_until([consumer], 6, ack=False)
    consumer.unsubscribe()
    server.stop()
    with seglog.open(server.data, background=False) as log:
        assert "leaving" not in log.topic("public/default/parts").subscriptions()


def test_a_reader_of_a_partitioned_topic_reads_every_partition(server):
    client = server.client()
    produce(client, 12)
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 12 and time.monotonic() < deadline:
        try:
            values.append(reader.read_next(200).data())
        except pulsar.Timeout:
            continue
    assert sorted(values, key=int) == [b"%d" % i for i in range(12)]
    with pytest.raises(pulsar.Timeout):
        reader.read_next(300)
