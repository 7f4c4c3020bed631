"""Readers (non-durable subscriptions) and SEEK of `seglog serve` with the real Pulsar client
(docs/SERVER.md, "Readers" and "Seeking")."""

from __future__ import annotations

import time

import pytest

from helpers_server import pulsar

TOPIC = "persistent://public/default/read"


def send_values(client, count: int) -> list:
    producer = client.create_producer(TOPIC)
    ids = [producer.send(b"%d" % i) for i in range(count)]
    producer.close()
    return ids


def read_values(reader, count: int) -> list[bytes]:
    return [reader.read_next(10_000).data() for _ in range(count)]


def assert_read_nothing_more(reader) -> None:
    with pytest.raises(pulsar.Timeout):
        reader.read_next(300)


def test_a_reader_from_earliest_reads_everything_then_waits_for_more(server):
    client = server.client()
    send_values(client, 5)
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    assert reader.has_message_available()
    assert read_values(reader, 5) == [b"%d" % i for i in range(5)]
    assert not reader.has_message_available()
    assert_read_nothing_more(reader)
    producer = client.create_producer(TOPIC)
    producer.send(b"later")
    assert reader.read_next(10_000).data() == b"later"
    assert not reader.has_message_available()


def test_a_reader_from_latest_reads_only_what_comes_after(server):
    client = server.client()
    send_values(client, 3)
    reader = client.create_reader(TOPIC, pulsar.MessageId.latest)
    assert not reader.has_message_available()
    assert_read_nothing_more(reader)
    producer = client.create_producer(TOPIC)
    producer.send(b"new")
    assert reader.read_next(10_000).data() == b"new"
    assert not reader.has_message_available()


def test_a_reader_from_a_message_id_starts_after_it_or_at_it_when_inclusive(server):
    client = server.client()
    ids = send_values(client, 5)
    reader = client.create_reader(TOPIC, ids[2])
    assert reader.has_message_available()
    assert read_values(reader, 2) == [b"3", b"4"]
    assert not reader.has_message_available()
    assert_read_nothing_more(reader)

    # the id of a message a reader received names the same message
    first = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    received = [first.read_next(10_000) for _ in range(5)]
    inclusive = client.create_reader(TOPIC, received[1].message_id(), start_message_id_inclusive=True)
    assert read_values(inclusive, 4) == [b"1", b"2", b"3", b"4"]
    assert not inclusive.has_message_available()
    exclusive = client.create_reader(TOPIC, received[1].message_id())
    assert read_values(exclusive, 3) == [b"2", b"3", b"4"]
    last = client.create_reader(TOPIC, received[4].message_id())
    assert not last.has_message_available()
    assert_read_nothing_more(last)


def test_an_empty_topic_has_no_message_available(server):
    client = server.client()
    client.create_producer(TOPIC).close()
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    assert not reader.has_message_available()


def test_a_reader_leaves_no_cursor_behind_and_holds_back_nothing(server):
    client = server.client()
    send_values(client, 3)
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    assert read_values(reader, 1) == [b"0"]
    directory = server.data / "subscriptions" / "public" / "default" / "read"
    assert not list(directory.glob("*")) if directory.exists() else True
    reader.close()
    assert not list(directory.glob("*")) if directory.exists() else True
    assert not any(path.name.startswith("reader-") for path in server.data.rglob("*"))


def test_seek_by_message_id_rewinds_the_subscription_and_ignores_acks_from_before(server):
    client = server.client()
    ids = send_values(client, 5)
    consumer = client.subscribe(TOPIC, "seeking", initial_position=pulsar.InitialPosition.Earliest)
    received = [consumer.receive(10_000) for _ in range(5)]
    for message in received:
        consumer.acknowledge(message)  # grouped: flushed by the client after the seek's reply
    consumer.seek(ids[1])
    # the cursor is at message 1, as Pulsar's broker resets it; the client itself drops the message the
    # seek named, so the next receive is the message after it
    assert [consumer.receive(10_000).data() for _ in range(3)] == [b"2", b"3", b"4"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(300)
    consumer.close()
    # the acks from before the seek were not applied: 1.. are unacknowledged again (and a new consumer
    # has no seek position to drop anything at)
    again = client.subscribe(TOPIC, "seeking")
    assert again.receive(10_000).data() == b"1"
    again.seek(pulsar.MessageId.earliest)
    assert again.receive(10_000).data() == b"0"


def test_seek_by_publish_time_goes_to_the_first_message_at_or_after_it(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    for i in range(4):
        producer.send(b"%d" % i)
        time.sleep(0.02)
    consumer = client.subscribe(TOPIC, "by-time", initial_position=pulsar.InitialPosition.Earliest)
    received = [consumer.receive(10_000) for _ in range(4)]
    consumer.acknowledge_cumulative(received[-1])
    consumer.seek(received[2].publish_timestamp())
    assert [consumer.receive(10_000).data() for _ in range(2)] == [b"2", b"3"]
    consumer.seek(received[0].publish_timestamp() - 1)
    assert consumer.receive(10_000).data() == b"0"


def test_a_seek_by_time_after_a_seek_by_id_starts_at_the_time(server):
    """The client drops messages up to an earlier seek's message id until a seek completes through
    re-subscribing, so the server closes the consumer before it answers the seek (as Pulsar's broker)."""
    client = server.client()
    producer = client.create_producer(TOPIC)
    for i in range(8):
        producer.send(b"%d" % i)
        time.sleep(0.02)
    consumer = client.subscribe(TOPIC, "twice", initial_position=pulsar.InitialPosition.Earliest)
    received = [consumer.receive(10_000) for _ in range(8)]
    consumer.seek(received[5].message_id())
    assert consumer.receive(10_000).data() == b"6"
    consumer.seek(received[2].publish_timestamp())
    assert [consumer.receive(10_000).data() for _ in range(2)] == [b"2", b"3"]


@pytest.mark.parametrize("inclusive", [False, True])
def test_a_reader_seeks_by_message_id(server, inclusive):
    client = server.client()
    ids = send_values(client, 6)
    reader = client.create_reader(TOPIC, pulsar.MessageId.latest, start_message_id_inclusive=inclusive)
    reader.seek(ids[2])
    assert reader.read_next(10_000).data() == (b"2" if inclusive else b"3")
    reader.seek(pulsar.MessageId.earliest)
    assert [reader.read_next(10_000).data() for _ in range(2)] == [b"0", b"1"]


def test_a_reader_seeks_by_publish_time(server):
    client = server.client()
    producer = client.create_producer(TOPIC)
    for i in range(5):
        producer.send(b"%d" % i)
        time.sleep(0.02)
    reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
    received = [reader.read_next(10_000) for _ in range(5)]
    reader.seek(received[3].publish_timestamp())
    assert [reader.read_next(10_000).data() for _ in range(2)] == [b"3", b"4"]
    with pytest.raises(pulsar.Timeout):
        reader.read_next(300)
    reader.close()
    # the reader's subscription is in memory only, whatever it went through
    assert not any(path.name.startswith("reader-") for path in server.data.rglob("*"))
