"""The consume path of `seglog serve` with the real Pulsar client: durable subscriptions of each type, FLOW
permits, MESSAGE fields and ids (docs/SERVER.md, Consuming), acks individual and cumulative that persist
across a restart, redelivery of negative acks, unsubscribing, and messages written in-process."""

from __future__ import annotations

import time

import pytest
from test_produce import read_all, send_async_all

import seglog
from helpers_server import pulsar, receive_until, start_server
from seglog.server.protocol import pulsar_api_pb2 as api
from seglog.server.protocol.frames import Type, command, encode_command

TOPIC = "persistent://public/default/consumed"
EARLIEST = pulsar.InitialPosition.Earliest


def receive_all(consumer, count: int, timeout_ms: int = 10_000) -> list:
    return [consumer.receive(timeout_ms) for _ in range(count)]


def assert_nothing_more(consumer, timeout_ms: int = 300) -> None:
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_ms)


def test_a_consumer_receives_what_was_produced_with_its_fields(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    ids = [producer.send(f"value-{i}".encode(), properties={"n": str(i)}, partition_key=f"key-{i}",
                         event_timestamp=1_000 + i) for i in range(3)]
    ids.append(producer.send(b"no key, no event time"))
    consumer = client.subscribe(TOPIC, "fields", initial_position=EARLIEST)

    received = receive_all(consumer, 4)
    stored = read_all(server.data, "consumed")
    assert [m.data() for m in received] == [m.value for m in stored]
    assert [m.properties() for m in received] == [{"n": "0"}, {"n": "1"}, {"n": "2"}, {}]
    assert [m.partition_key() for m in received] == ["key-0", "key-1", "key-2", ""]
    assert [m.event_timestamp() for m in received] == [1_000, 1_001, 1_002, 0]
    assert [m.publish_timestamp() for m in received] == [m.timestamp for m in stored]
    assert [m.redelivery_count() for m in received] == [0] * 4
    # an unbatched message's id is the id its producer was given: (0, offset, -1)
    assert [str(m.message_id()) for m in received] == [str(i) for i in ids]
    assert [(m.message_id().entry_id(), m.message_id().batch_index()) for m in received] == \
        [(m.offset, -1) for m in stored]
    assert_nothing_more(consumer)


def test_batches_from_a_batching_producer_arrive_as_the_batches_sent(server):
    client = server.client()
    producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_messages=20,
                                      batching_max_publish_delay_ms=20,
                                      compression_type=pulsar.CompressionType.LZ4)
    values = [b"%d" % i for i in range(100)]
    sent = send_async_all(producer, values, partition_key="k")
    consumer = client.subscribe(TOPIC, "batched", initial_position=EARLIEST)

    received = receive_all(consumer, 100)
    assert [m.data() for m in received] == values
    assert all(m.partition_key() == "k" for m in received)
    # each stored batch arrives as the batch entry it was sent as: the ids its producer was given
    assert [str(m.message_id()) for m in received] == [str(i) for i in sent]
    assert any(m.message_id().batch_index() > 0 for m in received)
    assert_nothing_more(consumer)


def test_messages_written_in_process_are_received_with_the_same_fields(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log:
        topic = log.create_topic("public/default/inproc")
        producer = topic.producer()
        producer.send_batch([b"a", b"b", b"\xff"], keys=[b"k1", None, b"\x80\x81"], timestamps=[10, 11, 12],
                            properties=[{"p": "1"}, {}, {"p": "3"}])
        producer.flush()
    server = start_server(data)
    try:
        consumer = server.client().subscribe("persistent://public/default/inproc", "s", initial_position=EARLIEST)
        received = receive_all(consumer, 3)
        assert [m.data() for m in received] == [b"a", b"b", b"\xff"]
        assert [m.publish_timestamp() for m in received] == [10, 11, 12]
        assert [m.properties() for m in received] == [{"p": "1"}, {}, {"p": "3"}]
        assert [m.partition_key() for m in received][:2] == ["k1", ""]
        # a key that is not UTF-8 goes base64-encoded, as Pulsar's partition_key_b64_encoded says
        # one stored batch of three publish times: three batch entries of one message each, for a batch
        # entry has one publish time (docs/SERVER.md, Consuming)
        assert [m.message_id().entry_id() for m in received] == [0, 1, 2]
        assert [m.message_id().batch_index() for m in received] == [0, 0, 0]
    finally:
        server.stop()


def test_latest_starts_after_what_was_written(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    producer.send(b"before")
    consumer = client.subscribe(TOPIC, "latest")  # the client's default: Latest
    producer.send(b"after")
    assert consumer.receive(10_000).data() == b"after"
    assert_nothing_more(consumer)


def test_messages_sent_while_subscribed_arrive(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "live", initial_position=EARLIEST)
    producer = client.create_producer(TOPIC)
    for i in range(20):
        producer.send(b"%d" % i)
        assert consumer.receive(10_000).data() == b"%d" % i


def test_a_second_exclusive_consumer_is_consumer_busy(server):
    client = server.client()
    client.subscribe(TOPIC, "only-one")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(TOPIC, "only-one")
    with pytest.raises(pulsar.ConsumerBusy):  # another type while it has consumers
        client.subscribe(TOPIC, "only-one", consumer_type=pulsar.ConsumerType.Shared)


def test_a_subscription_name_seglog_refuses_fails_the_subscribe_at_once_with_the_reason(server):
    with pytest.raises(pulsar.NotAllowedError):  # not a Timeout after the client's retries
        server.client().subscribe(TOPIC, "s" * 300)


def test_a_missing_namespace_is_topic_not_found(server):
    with pytest.raises(pulsar.TopicNotFound):
        server.client().subscribe("persistent://public/missing/t", "s")


def test_shared_consumers_split_the_messages(server):
    client = server.client()
    shared = pulsar.ConsumerType.Shared
    first = client.subscribe(TOPIC, "shared", consumer_type=shared, initial_position=EARLIEST, receiver_queue_size=5)
    second = client.subscribe(TOPIC, "shared", consumer_type=shared, receiver_queue_size=5)
    producer = client.create_producer(TOPIC)
    values = [b"%d" % i for i in range(40)]
    send_async_all(producer, values)

    got_first, got_second = receive_until([first, second], len(values))
    assert sorted((m.data() for m in got_first + got_second), key=int) == values
    assert got_first and got_second


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Failover, pulsar.ConsumerType.KeyShared])
def test_failover_and_key_shared_deliver_everything_to_one_consumer(server, kind):
    client = server.client()
    producer = client.create_producer(TOPIC)
    values = [b"%d" % i for i in range(30)]
    for i, value in enumerate(values):
        producer.send(value, partition_key=f"k{i % 3}")
    consumer = client.subscribe(TOPIC, "typed", consumer_type=kind, initial_position=EARLIEST)
    assert sorted((m.data() for m in receive_all(consumer, 30)), key=int) == values


def test_acks_persist_across_a_restart(tmp_path):
    data = tmp_path / "data"
    server = start_server(data)
    try:
        client = server.client()
        producer = client.create_producer(TOPIC)
        for i in range(10):
            producer.send(b"%d" % i)
        consumer = client.subscribe(TOPIC, "durable", initial_position=EARLIEST)
        received = receive_all(consumer, 10)
        for message in received[:4]:  # 0..3, and 6 alone
            consumer.acknowledge(message)
        consumer.acknowledge(received[6])
        consumer.close()  # flushes the grouped acks
    finally:
        server.stop()
    server = start_server(data)
    try:
        consumer = server.client().subscribe(TOPIC, "durable", initial_position=EARLIEST)
        assert [m.data() for m in receive_all(consumer, 5)] == [b"4", b"5", b"7", b"8", b"9"]
        assert_nothing_more(consumer)
    finally:
        server.stop()


def test_a_cumulative_ack_acknowledges_everything_before(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    for i in range(6):
        producer.send(b"%d" % i)
    consumer = client.subscribe(TOPIC, "cumulative", initial_position=EARLIEST)
    received = receive_all(consumer, 6)
    consumer.acknowledge_cumulative(received[3])
    consumer.close()
    consumer = client.subscribe(TOPIC, "cumulative", initial_position=EARLIEST)
    assert [m.data() for m in receive_all(consumer, 2)] == [b"4", b"5"]
    assert_nothing_more(consumer)


def test_negative_acks_are_redelivered_with_their_count(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    producer.send(b"again")
    producer.send(b"once")
    consumer = client.subscribe(TOPIC, "nack", consumer_type=pulsar.ConsumerType.Shared,
                                initial_position=EARLIEST, negative_ack_redelivery_delay_ms=100)
    first, second = receive_all(consumer, 2)
    consumer.acknowledge(second)
    assert first.data() == b"again"
    for count in (1, 2, 3):
        consumer.negative_acknowledge(first)
        message = consumer.receive(10_000)
        assert (message.data(), message.redelivery_count()) == (b"again", count)
        first = message
    consumer.acknowledge(first)
    assert_nothing_more(consumer)


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Shared])
def test_redeliver_unacknowledged_messages(server, kind):
    """What an ack timeout does (the client's timeout is 10 s at least): the client asks the server to
    deliver again what it has not acknowledged."""
    client = server.client()
    producer = client.create_producer(TOPIC)
    for value in (b"acked", b"late-1", b"late-2"):
        producer.send(value)
    consumer = client.subscribe(TOPIC, "redeliver", consumer_type=kind, initial_position=EARLIEST)
    received = receive_all(consumer, 3)
    consumer.acknowledge(received[0])
    time.sleep(0.3)  # the grouped ack reaches the server first
    consumer.redeliver_unacknowledged_messages()
    again = receive_all(consumer, 2)
    assert [(m.data(), m.redelivery_count()) for m in again] == [(b"late-1", 1), (b"late-2", 1)]
    assert_nothing_more(consumer)


def test_a_closed_shared_consumers_messages_go_to_the_others(server):
    client = server.client()
    shared = pulsar.ConsumerType.Shared
    leaving = client.subscribe(TOPIC, "handover", consumer_type=shared, initial_position=EARLIEST)
    staying = client.subscribe(TOPIC, "handover", consumer_type=shared, receiver_queue_size=1)
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(b"%d" % i)
    time.sleep(0.5)  # the leaving consumer took what its permits allowed
    leaving.close()
    (got,) = receive_until([staying], 5)
    assert {m.data() for m in got} == {b"%d" % i for i in range(5)}


def test_unsubscribe_deletes_the_subscription(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    producer.send(b"old")
    consumer = client.subscribe(TOPIC, "gone", initial_position=EARLIEST)
    assert consumer.receive(10_000).data() == b"old"
    consumer.unsubscribe()
    consumer = client.subscribe(TOPIC, "gone")  # created again, at the latest position
    producer.send(b"new")
    assert consumer.receive(10_000).data() == b"new"
    assert_nothing_more(consumer)


def test_the_last_message_id_is_the_last_offset(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "last")
    assert consumer.get_last_message_id().entry_id() in (-1, (1 << 64) - 1)  # empty: before the first entry
    producer = client.create_producer(TOPIC)
    ids = [producer.send(b"%d" % i) for i in range(3)]
    last = consumer.get_last_message_id()
    assert (last.ledger_id(), last.entry_id(), last.batch_index()) == (0, ids[-1].entry_id(), -1)


def subscribed_from_the_earliest(raw, subscription: str):
    """A raw connection with consumer 1 subscribed (exclusive) to TOPIC from the earliest message."""
    connection = raw()
    connection.connect()
    connection.send(encode_command(command(Type.SUBSCRIBE, topic=TOPIC, subscription=subscription, sub_type=0,
                                           consumer_id=1, request_id=1, initial_position=1)))
    assert connection.receive().type == Type.SUCCESS
    return connection


def entries_for_flow(connection, permits: int) -> list[int]:
    """The entry ids of the MESSAGEs consumer 1 is sent for a FLOW of `permits`, until 0.5 s pass without one."""
    connection.send(encode_command(command(Type.FLOW, consumer_id=1, message_permits=permits)))
    entries = []
    while True:
        try:
            message = connection.receive(0.5)
        except TimeoutError:
            return entries
        assert message.type == Type.MESSAGE
        entries.append(message.message.message_id.entry_id)


def test_never_more_messages_than_the_flow_permits(server, raw):
    producer = server.client().create_producer(TOPIC)
    for i in range(10):
        producer.send(b"%d" % i)
    connection = subscribed_from_the_earliest(raw, "permits")
    with pytest.raises(TimeoutError):  # nothing before the first FLOW
        connection.receive(0.5)
    assert entries_for_flow(connection, 3) == [0, 1, 2]
    assert entries_for_flow(connection, 4) == [3, 4, 5, 6]
    ack = api.CommandAck(consumer_id=1, ack_type=api.CommandAck.Cumulative, request_id=9)
    ack.message_id.add(ledger_id=0, entry_id=6)
    connection.send(encode_command(api.BaseCommand(type=Type.ACK, ack=ack)))
    response = connection.receive()
    assert response.type == Type.ACK_RESPONSE and response.ack_response.request_id == 9
    assert not response.ack_response.HasField("error")


def test_a_flow_takes_whole_entries_and_permits_below_zero_hold_the_next(server, raw):
    """Pulsar's default flow control: a read sends as many stored batches as the consumer has permits, each
    whole, and counts their messages; the permits below zero send nothing until FLOWs make up for them."""
    producer = server.client().create_producer(TOPIC, batching_enabled=True, batching_max_messages=10,
                                               batching_max_publish_delay_ms=60_000)
    send_async_all(producer, [b"%d" % i for i in range(30)])  # three stored batches of 10
    connection = subscribed_from_the_earliest(raw, "entries")
    assert entries_for_flow(connection, 1) == [0]  # one permit: the first batch whole (permits 1 - 10 = -9)
    assert entries_for_flow(connection, 9) == []  # 0: nothing
    assert entries_for_flow(connection, 11) == [10, 20]  # 11: the next two whole
