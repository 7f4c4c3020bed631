"""In-process dead letters (subscribe(dead_letter_policy=...), as pulsar-client's policy): a message delivered
max_redeliver_count + 1 times goes to the dead-letter topic the next time instead, with its key, value and
properties and REAL_TOPIC and ORIGIN_MESSAGE_ID, is acknowledged where it was, and waits in the policy's initial
subscription, made at the earliest message when the dead-letter topic is."""

from __future__ import annotations

import pytest

import seglog
from seglog import DeadLetterPolicy
from seglog.errors import InvalidArgumentError, InvalidNameError, ReceiveTimeoutError


def test_a_message_past_its_redeliveries_goes_to_the_dead_letter_topic(log, clock):
    topic = log.create_topic("orders")
    policy = DeadLetterPolicy(max_redeliver_count=2, initial_subscription_name="dead-letters")
    consumer = topic.subscribe("billing", subscription_type="shared", initial_position="earliest",
                               negative_ack_redelivery_delay=1, dead_letter_policy=policy)
    with topic.producer() as producer:
        producer.send(b"poison", key=b"42", properties={"order": "42"})
        producer.send(b"fine")
    assert [consumer.receive(timeout=0).value for _ in range(2)] == [b"poison", b"fine"]
    consumer.negative_ack(seglog.MessageId(0, 0))
    for _ in range(2):  # redelivered twice
        clock.advance(seconds=1)
        message = consumer.receive(timeout=0)
        assert message.value == b"poison"
        consumer.negative_ack(message)
    clock.advance(seconds=1)
    with pytest.raises(ReceiveTimeoutError):  # the fourth time it goes to the dead-letter topic instead
        consumer.receive(timeout=0)
    dead_topic = log.topic("orders-billing-DLQ")
    assert dead_topic.subscriptions() == ["dead-letters"]
    dead = dead_topic.subscribe("dead-letters").receive(timeout=0)
    assert (dead.value, dead.key) == (b"poison", b"42")
    assert dead.properties == {"order": "42", "REAL_TOPIC": "persistent://public/default/orders",
                               "ORIGIN_MESSAGE_ID": "0:0"}
    assert topic.stats()["subscriptions"]["billing"]["msgBacklog"] == 1  # "fine", not acknowledged


def test_receive_batch_leaves_the_dead_letters_out_and_a_named_topic_gets_them(log, clock):
    topic = log.create_topic("orders")
    policy = DeadLetterPolicy(max_redeliver_count=1, dead_letter_topic="acme/errors/orders")
    consumer = topic.subscribe("billing", subscription_type="shared", initial_position="earliest",
                               negative_ack_redelivery_delay=1, dead_letter_policy=policy)
    topic.producer().send_batch([b"a", b"b", b"c"])
    for values in ([b"a", b"b", b"c"], [b"a", b"c"]):  # delivered, then redelivered once
        assert consumer.receive_batch().column("value").to_pylist() == values
        consumer.ack(1)  # b
        for offset in (0, 2):
            consumer.negative_ack(seglog.MessageId(0, offset))
        clock.advance(seconds=1)
    assert consumer.receive_batch() is None
    dead = log.topic("acme/errors/orders").reader("earliest")
    assert [m.value for m in dead] == [b"a", b"c"]
    assert topic.stats()["subscriptions"]["billing"]["msgBacklog"] == 0


@pytest.mark.parametrize("arguments, named", [
    ({"max_redeliver_count": 0}, "max_redeliver_count"),
    ({"max_redeliver_count": True}, "max_redeliver_count"),
    ({"max_redeliver_count": 3, "dead_letter_topic": "a/b/c/d"}, "topic name"),
    ({"max_redeliver_count": 3, "initial_subscription_name": "bad name"}, "subscription"),
])
def test_a_bad_policy_is_refused_naming_the_field(arguments, named):
    with pytest.raises((InvalidArgumentError, InvalidNameError), match=named):
        DeadLetterPolicy(**arguments)


def test_subscribe_takes_a_policy_or_none(log):
    topic = log.create_topic("orders")
    with pytest.raises(InvalidArgumentError, match="dead_letter_policy"):
        topic.subscribe("billing", dead_letter_policy={"max_redeliver_count": 1})
    assert topic.subscriptions() == []
