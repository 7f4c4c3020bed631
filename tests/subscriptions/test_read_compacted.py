"""Consumers with read_compacted (Pulsar's readCompacted): below the compaction horizon each key's latest
message, then the log; what compaction removed is acknowledged as dispatch passes it, so the backlog drains."""

import pytest
from helpers_compaction import drain

from seglog.errors import InvalidArgumentError


def produce(topic, pairs):
    with topic.producer() as producer:
        for key, value in pairs:
            producer.send(value, key=key, partition=0)


def triples(messages):
    return [(m.offset, m.key, m.value) for m in messages]


@pytest.mark.parametrize("subscription_type", ["exclusive", "failover"])
def test_a_compacted_consumer_gets_the_view_then_the_log(log, subscription_type):
    topic = log.create_topic("t")
    topic.subscribe("s", subscription_type=subscription_type, initial_position="earliest").close()
    produce(topic, [(b"a", b"a0"), (b"a", b"a1"), (b"b", b"b0"), (b"b", None), (None, b"keyless"), (b"c", b"")])
    log.admin.topics.compact("t")
    produce(topic, [(b"a", b"a2")])
    with topic.subscribe("s", subscription_type=subscription_type, read_compacted=True) as consumer:
        assert triples(drain(consumer)) == [(1, b"a", b"a1"), (5, b"c", b""), (6, b"a", b"a2")]
    assert log.admin.topics.stats("t")["subscriptions"]["s"]["msgBacklog"] == 0


def test_a_plain_consumer_of_the_same_topic_gets_every_message(log):
    topic = log.create_topic("t")
    topic.subscribe("plain", initial_position="earliest").close()
    produce(topic, [(b"a", b"a0"), (b"a", b"a1")])
    log.admin.topics.compact("t")
    with topic.subscribe("plain") as consumer:
        assert [offset for offset, _, _ in triples(drain(consumer))] == [0, 1]


def test_what_was_not_acknowledged_comes_again_from_the_view(log):
    topic = log.create_topic("t")
    topic.subscribe("s", initial_position="earliest").close()
    produce(topic, [(f"k{i % 3}".encode(), f"v{i}".encode()) for i in range(9)])
    log.admin.topics.compact("t")
    with topic.subscribe("s", read_compacted=True) as consumer:
        assert [offset for offset, _, _ in triples(drain(consumer, ack=False))] == [6, 7, 8]
    with topic.subscribe("s", read_compacted=True) as consumer:
        assert [offset for offset, _, _ in triples(drain(consumer))] == [6, 7, 8]
    assert log.admin.topics.stats("t")["subscriptions"]["s"]["msgBacklog"] == 0


@pytest.mark.parametrize("subscription_type", ["shared", "key_shared"])
def test_read_compacted_is_refused_on_shared_subscriptions_as_pulsar_refuses_it(log, subscription_type):
    topic = log.create_topic("t")
    with pytest.raises(InvalidArgumentError, match="Read compacted can only be used with exclusive or failover"):
        topic.subscribe("s", subscription_type=subscription_type, read_compacted=True)
    assert topic.subscriptions() == []
