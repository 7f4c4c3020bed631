"""pulsar-client's dead-letter policy against seglog serve: after max_redeliver_count the client publishes the
message to the dead-letter topic itself; the broker's part is the initial subscription the policy names, made at
the earliest message when the client's dead-letter producer is created, as Pulsar's broker makes it (PRODUCER's
initial_subscription_name), so no dead letter is lost before anyone subscribes."""

from __future__ import annotations

import pytest

import seglog
from helpers_server import pulsar, start_server

TOPIC = "persistent://public/default/orders"
DEAD = TOPIC + "-DLQ"


@pytest.fixture
def server(tmp_path):
    running = start_server(tmp_path / "data")
    yield running
    running.stop()


def dead_letter(client, payload: bytes) -> None:
    """Send `payload` to TOPIC and negatively acknowledge it until the client moves it to DEAD."""
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=DEAD,
                                             initial_subscription_name="dead-letters")
    consumer = client.subscribe(TOPIC, "billing", consumer_type=pulsar.ConsumerType.Shared,
                                dead_letter_policy=policy, negative_ack_redelivery_delay_ms=100)
    client.create_producer(TOPIC).send(payload, properties={"order": "42"})
    for redelivery in (0, 1):  # delivered, then redelivered once; the next redelivery goes to DEAD instead
        message = consumer.receive(10_000)
        assert (message.data(), message.redelivery_count()) == (payload, redelivery)
        consumer.negative_acknowledge(message)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(2_000)


def backlog(server, subscription: str) -> int:
    with seglog.open(server.data, background=False) as log:
        return log.topic(DEAD).stats()["subscriptions"][subscription]["msgBacklog"]


def test_a_dead_letter_waits_in_the_initial_subscription_with_its_origin(server):
    client = server.client()
    dead_letter(client, b"poison")
    with seglog.open(server.data, background=False) as log:
        assert log.admin.topics.subscriptions(DEAD) == ["dead-letters"]
    assert backlog(server, "dead-letters") == 1
    dead = client.subscribe(DEAD, "dead-letters").receive(10_000)  # the initial subscription, from the earliest
    assert dead.data() == b"poison"
    assert dead.properties() == {"order": "42", "REAL_TOPIC": TOPIC, "ORIGIN_MESSAGE_ID": "(0,0,-1,-1)"}


def test_an_initial_subscription_that_exists_keeps_its_position(server):
    client = server.client()
    client.create_producer(DEAD).send(b"before")
    client.subscribe(DEAD, "dead-letters", initial_position=pulsar.InitialPosition.Latest).close()
    dead_letter(client, b"poison")
    assert backlog(server, "dead-letters") == 1  # the poison alone: not moved back to the earliest
