"""Batched delivery with the real Pulsar client (docs/SERVER.md, "Consuming"): a stored batch goes to a
consumer as batch entries, each a run of it at consecutive offsets, with Pulsar's semantics of batch entries
as pulsar-client keeps them: a batch acknowledged whole unless the client acknowledges batch indexes,
cumulative acks mid-batch, negative acks and ack timeouts of an entry, consumers leaving with entries
partly acknowledged, shared and Key_Shared subscriptions, readers, seeks, and dead letters."""

from __future__ import annotations

import pytest
from test_consume import assert_nothing_more, receive_all
from test_produce import send_async_all
from test_read_compacted_served import compact

from helpers_server import pulsar, receive_until, start_server

TOPIC = "persistent://public/default/batched"
EARLIEST = pulsar.InitialPosition.Earliest


def produce(client, values: list[bytes], batch: int = 10, topic: str = TOPIC, **options) -> list:
    """Send `values` in batches of `batch` messages each (the last one the rest), as stored batches of that
    many; the ids the producer was given."""
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=batch,
                                      batching_max_publish_delay_ms=60_000)
    ids = send_async_all(producer, values, **options)
    producer.close()
    return ids


def offset(message) -> int:
    """The seglog offset a received message's id names (docs/SERVER.md, "Message ids")."""
    mid = message.message_id()
    return mid.entry_id() + max(mid.batch_index(), 0)


def read_all(reader, count: int) -> list:
    return [reader.read_next(10_000) for _ in range(count)]


def values(count: int, start: int = 0) -> list[bytes]:
    return [b"m%d" % i for i in range(start, start + count)]


def test_stored_batches_arrive_as_batch_entries_with_their_producers_ids(server):
    client = server.client()
    ids = produce(client, values(25))
    consumer = client.subscribe(TOPIC, "s", initial_position=EARLIEST)
    received = receive_all(consumer, 25)
    assert [m.data() for m in received] == values(25)
    assert [str(m.message_id()) for m in received] == [str(i) for i in ids]
    assert [(m.message_id().entry_id(), m.message_id().batch_index()) for m in received] == \
        [(10 * (i // 10), i % 10) for i in range(25)]
    for message in received:
        consumer.acknowledge(message)
    consumer.close()
    assert_nothing_more(client.subscribe(TOPIC, "s"))


@pytest.mark.parametrize("precise", [False, True], ids=["entry_permits", "precise"])
def test_a_batch_goes_whole_or_cut_to_the_permits_and_every_id_names_its_offset(tmp_path, precise):
    """By default (Pulsar's), a stored batch larger than the consumer's permits still goes as one entry; with
    --precise-dispatcher-flow-control it is cut into entries of at most the permits."""
    server = start_server(tmp_path / "data", *(["--precise-dispatcher-flow-control"] if precise else []))
    try:
        client = server.client()
        produce(client, values(30), batch=30)
        consumer = client.subscribe(TOPIC, "s", initial_position=EARLIEST, receiver_queue_size=4)
        received = receive_all(consumer, 30)
        assert [m.data() for m in received] == values(30)
        assert [offset(m) for m in received] == list(range(30))
        entries = {m.message_id().entry_id() for m in received}
        assert len(entries) > 1 if precise else entries == {0}
        for message in received:
            consumer.acknowledge(message)
        consumer.close()
        assert_nothing_more(client.subscribe(TOPIC, "s"))
    finally:
        server.stop()


def test_a_batch_is_acknowledged_once_all_of_its_messages_are(server):
    """pulsar-client without batch index acks acknowledges an entry when all of its messages are: a
    consumer that leaves with some acknowledged gets all of them again, as from Pulsar."""
    client = server.client()
    produce(client, values(20))
    consumer = client.subscribe(TOPIC, "s", initial_position=EARLIEST)
    received = receive_all(consumer, 20)
    for message in received[:15]:  # the first batch whole, the second's first half
        consumer.acknowledge(message)
    consumer.close()
    again = client.subscribe(TOPIC, "s")
    assert [m.data() for m in receive_all(again, 10)] == values(10, 10)
    assert_nothing_more(again)


@pytest.mark.parametrize("consumer_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Shared])
def test_batch_index_acks_leave_only_the_unacknowledged_messages_of_a_batch(server, consumer_type):
    client = server.client()
    produce(client, values(20))
    consumer = client.subscribe(TOPIC, "s", consumer_type=consumer_type, initial_position=EARLIEST,
                                batch_index_ack_enabled=True)
    received = receive_all(consumer, 20)
    for message in received[:3] + received[5:9] + received[10:]:
        consumer.acknowledge(message)
    consumer.close()
    again = client.subscribe(TOPIC, "s", consumer_type=consumer_type, batch_index_ack_enabled=True)
    rest = receive_all(again, 3)
    assert [m.data() for m in rest] == [b"m3", b"m4", b"m9"]
    assert [offset(m) for m in rest] == [3, 4, 9]
    for message in rest:
        again.acknowledge(message)
    assert_nothing_more(again)
    again.close()
    assert_nothing_more(client.subscribe(TOPIC, "s", consumer_type=consumer_type))


def test_a_cumulative_ack_mid_batch(server):
    """Without batch index acks, pulsar-client acknowledges cumulatively up to the entry before a batch
    not acknowledged whole; with them, up to the message."""
    client = server.client()
    produce(client, values(20))
    consumer = client.subscribe(TOPIC, "plain", initial_position=EARLIEST)
    consumer.acknowledge_cumulative(receive_all(consumer, 20)[14])
    consumer.close()
    assert [m.data() for m in receive_all(client.subscribe(TOPIC, "plain"), 10)] == values(10, 10)

    indexed = client.subscribe(TOPIC, "indexed", initial_position=EARLIEST, batch_index_ack_enabled=True)
    indexed.acknowledge_cumulative(receive_all(indexed, 20)[14])
    indexed.close()
    again = client.subscribe(TOPIC, "indexed", batch_index_ack_enabled=True)
    assert [m.data() for m in receive_all(again, 5)] == values(5, 15)
    assert_nothing_more(again)


def test_a_negative_ack_of_one_message_redelivers_its_entry(server):
    """pulsar-client negatively acknowledges the entry of a batched message (its NegativeAcksTracker drops
    the batch index): the entry's unacknowledged messages come again, with their redelivery count."""
    client = server.client()
    produce(client, values(10))
    consumer = client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST,
                                negative_ack_redelivery_delay_ms=100, batch_index_ack_enabled=True)
    received = receive_all(consumer, 10)
    for message in received[:4] + received[5:8]:
        consumer.acknowledge(message)
    consumer.negative_acknowledge(received[4])
    again = receive_all(consumer, 3)
    assert [m.data() for m in again] == [b"m4", b"m8", b"m9"]
    assert [m.redelivery_count() for m in again] == [1, 1, 1]
    for message in again:
        consumer.acknowledge(message)
    assert_nothing_more(consumer)
    consumer.close()
    assert_nothing_more(client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared))


def test_an_ack_timeout_redelivers_the_entries_not_acknowledged(server):
    client = server.client()
    produce(client, values(20))
    consumer = client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST,
                                unacked_messages_timeout_ms=10_000)
    received = receive_all(consumer, 20)
    for message in received[:10]:
        consumer.acknowledge(message)
    again = receive_all(consumer, 10, timeout_ms=30_000)
    assert [m.data() for m in again] == values(10, 10)
    assert {m.redelivery_count() for m in again} == {1}
    for message in again:
        consumer.acknowledge(message)
    assert_nothing_more(consumer)


def test_shared_consumers_share_batches_and_one_leaving_hands_on_its_unacknowledged_messages(server):
    client = server.client()
    produce(client, values(40))
    options = dict(consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST, receiver_queue_size=10,
                   batch_index_ack_enabled=True)
    first, second = client.subscribe(TOPIC, "s", **options), client.subscribe(TOPIC, "s", **options)
    a, b = receive_until([first, second], 40, ack=False)
    assert sorted(offset(m) for m in a + b) == list(range(40))
    for message in a:  # half of what the first received, then it leaves
        if offset(message) % 2:
            first.acknowledge(message)
    for message in b:
        second.acknowledge(message)
    first.close()
    (rest,) = receive_until([second], len(a) - sum(offset(m) % 2 for m in a))
    assert sorted(offset(m) for m in rest) == sorted(offset(m) for m in a if not offset(m) % 2)
    for message in rest:
        second.acknowledge(message)
    assert_nothing_more(second)


def test_key_shared_consumers_get_their_keys_of_a_batch(server):
    client = server.client()
    keys = [f"k{i % 7}" for i in range(70)]
    producer = client.create_producer(TOPIC, batching_enabled=True, batching_max_messages=35,
                                      batching_max_publish_delay_ms=60_000)
    for i, key in enumerate(keys):
        producer.send_async(b"m%d" % i, None, partition_key=key)
    producer.flush()
    options = dict(consumer_type=pulsar.ConsumerType.KeyShared, initial_position=EARLIEST)
    first, second = client.subscribe(TOPIC, "s", **options), client.subscribe(TOPIC, "s", **options)
    a, b = receive_until([first, second], 70)
    assert sorted(offset(m) for m in a + b) == list(range(70))
    assert not {m.partition_key() for m in a} & {m.partition_key() for m in b}
    for got in (a, b):
        assert all(m.data() == b"m%d" % offset(m) and m.partition_key() == keys[offset(m)] for m in got)
    first.close()
    second.close()
    assert_nothing_more(client.subscribe(TOPIC, "s", **options))


def test_readers_start_inside_a_batch_and_see_its_end(server):
    client = server.client()
    ids = produce(client, values(20))
    after = client.create_reader(TOPIC, ids[13])
    assert [m.data() for m in read_all(after, 6)] == values(6, 14)
    assert not after.has_message_available()

    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest, receiver_queue_size=3)
    got = []
    for _ in range(40):  # (bounded: has_message_available must turn false after the last message)
        if not reader.has_message_available():
            break
        got.append(reader.read_next(10_000))
    assert [m.data() for m in got] == values(20)
    latest = client.create_reader(TOPIC, pulsar.MessageId.latest, start_message_id_inclusive=True)
    assert latest.has_message_available()
    assert latest.read_next(10_000).data() == b"m19"


def test_seeking_to_a_message_of_a_batch(server):
    client = server.client()
    ids = produce(client, values(20))
    consumer = client.subscribe(TOPIC, "s", initial_position=EARLIEST)
    for message in receive_all(consumer, 20):
        consumer.acknowledge(message)
    consumer.seek(ids[12])
    assert [m.data() for m in receive_all(consumer, 7)] == values(7, 13)  # (the client skips the id itself)
    assert_nothing_more(consumer)


def test_dead_letters_of_a_batch(server):
    client = server.client()
    produce(client, values(10))
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=TOPIC + "-dlq")
    dead = client.subscribe(TOPIC + "-dlq", "d", initial_position=EARLIEST)
    consumer = client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST,
                                negative_ack_redelivery_delay_ms=100, dead_letter_policy=policy)
    for _ in range(2):  # delivered, then redelivered once: then the client sends them to the dead letters
        for message in receive_all(consumer, 10):
            consumer.negative_acknowledge(message)
    assert sorted(m.data() for m in receive_all(dead, 10)) == sorted(values(10))
    assert_nothing_more(consumer, 1000)
    consumer.close()
    assert_nothing_more(client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared))


def test_a_compacted_batch_arrives_as_runs_of_its_kept_messages(server):
    """A compacted batch keeps some of its offsets (gaps between them): each run of consecutive ones is an
    entry, so every id names its offset and the acks of whole entries name what was kept."""
    topic = "persistent://public/default/compacted"
    client = server.client()
    client.subscribe(topic, "compacted", is_read_compacted=True).close()
    keys = ["a", "a", "b", "c", "c", "d", "e", "e", "f", "g"]
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=10,
                                      batching_max_publish_delay_ms=60_000)
    for i, key in enumerate(keys):
        producer.send_async(b"m%d" % i, None, partition_key=key)
    producer.flush()
    compact(server)
    consumer = client.subscribe(topic, "compacted", is_read_compacted=True)
    received = receive_all(consumer, 7)
    assert [offset(m) for m in received] == [1, 2, 4, 5, 7, 8, 9]
    assert all(m.data() == b"m%d" % offset(m) for m in received)
    assert {m.message_id().entry_id() for m in received} == {1, 4, 7}  # runs 1-2, 4-5, 7-9
    for message in received:
        consumer.acknowledge(message)
    assert_nothing_more(consumer)
    consumer.close()
    assert_nothing_more(client.subscribe(topic, "compacted", is_read_compacted=True))


def test_acks_of_messages_not_written_yet_are_left_alone(server):
    """An ACK naming a message not written yet acknowledges nothing, and leaves what the consumer was sent as
    it was: the acks of its entries that follow still name all of their messages."""
    client = server.client()
    produce(client, values(10))
    consumer = client.subscribe(TOPIC, "s", initial_position=EARLIEST)
    for message in receive_all(consumer, 10):
        consumer.acknowledge(message)
    # (the client would drop what it receives below an id it acknowledged cumulatively: it leaves first)
    consumer.acknowledge_cumulative(pulsar.MessageId(ledger_id=0, entry_id=15))  # (offset 15: not written)
    consumer.close()
    produce(client, values(10, 10))
    again = client.subscribe(TOPIC, "s")
    assert [m.data() for m in receive_all(again, 10)] == values(10, 10)
    assert_nothing_more(again)
