"""Delayed delivery through seglog serve with pulsar-client's deliver_after and deliver_at: Shared and Key_Shared
subscriptions get a delayed message no earlier than its time and promptly after it; Exclusive and Failover get
it at once, as in Pulsar. The delay survives a SIGKILL of the server, and REST stats count the delayed messages
(msgDelayed).

The delivery times are the real clock's (the server's and the client's, on one machine): the assertions are
"not before the time the client asked for" and "within a bounded wait after it", never a sleep."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest

from helpers_server import pulsar, rest, start_server

TOPIC = "persistent://public/default/reminders"
DELAY_MS = 1500
PROMPTLY_MS = 5000  # a due message arrives within this of its time (the server's poll is far shorter)


@pytest.fixture
def server(tmp_path):
    running = start_server(tmp_path / "data")
    yield running
    running.stop()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def receive_at(consumer) -> tuple[bytes, int]:
    message = consumer.receive(DELAY_MS + PROMPTLY_MS)
    consumer.acknowledge(message)
    return message.data(), now_ms()


@pytest.mark.parametrize("consumer_type", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
def test_shared_subscriptions_deliver_a_delayed_message_at_its_time(server, consumer_type):
    client = server.client()
    consumer = client.subscribe(TOPIC, "later", consumer_type=consumer_type)
    producer = client.create_producer(TOPIC)
    sent_at = now_ms()
    producer.send(b"in a while", partition_key="k", deliver_after=timedelta(milliseconds=DELAY_MS))
    producer.send(b"now", partition_key="k")
    assert receive_at(consumer)[0] == b"now"  # the delayed one does not hold back what follows it
    value, received_at = receive_at(consumer)
    assert value == b"in a while"
    assert sent_at + DELAY_MS <= received_at <= sent_at + DELAY_MS + PROMPTLY_MS


@pytest.mark.parametrize("consumer_type", [pulsar.ConsumerType.Exclusive, pulsar.ConsumerType.Failover])
def test_exclusive_and_failover_deliver_at_once(server, consumer_type):
    client = server.client()
    consumer = client.subscribe(TOPIC, "now", consumer_type=consumer_type)
    client.create_producer(TOPIC).send(b"due in an hour", deliver_after=timedelta(hours=1))
    assert consumer.receive(5_000).data() == b"due in an hour"


def test_deliver_at_a_moment_and_stats_count_the_delayed(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "later", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(TOPIC)
    due = now_ms() + DELAY_MS
    for i in range(3):
        producer.send(b"at %d" % i, deliver_at=due)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(200)
    _, stats = rest(server.http_url, "GET", "/admin/v2/persistent/public/default/reminders/stats")
    subscription = stats["subscriptions"]["later"]
    assert (subscription["msgDelayed"], subscription["msgBacklog"], subscription["msgBacklogNoDelayed"]) == (3, 3, 0)
    received = [receive_at(consumer) for _ in range(3)]
    assert sorted(value for value, _ in received) == [b"at 0", b"at 1", b"at 2"]
    assert all(due <= at <= due + PROMPTLY_MS for _, at in received)


def test_a_delayed_message_survives_a_sigkill_and_comes_at_its_time(tmp_path):
    first = start_server(tmp_path / "data")
    try:
        client = first.client()
        client.subscribe(TOPIC, "later", consumer_type=pulsar.ConsumerType.Shared).close()
        due = now_ms() + 3 * DELAY_MS
        client.create_producer(TOPIC).send(b"after the crash", deliver_at=due)
    finally:
        first.stop(signal.SIGKILL)
    second = start_server(tmp_path / "data")
    try:
        consumer = second.client().subscribe(TOPIC, "later", consumer_type=pulsar.ConsumerType.Shared)
        message = consumer.receive(3 * DELAY_MS + PROMPTLY_MS)
        assert (message.data(), now_ms() >= due) == (b"after the crash", True)
        consumer.acknowledge(message)
        with pytest.raises(pulsar.Timeout):  # delivered once
            consumer.receive(500)
    finally:
        second.stop()
