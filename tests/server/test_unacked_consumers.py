"""A consumer that receives without acknowledging is sent at most --max-unacked-messages-per-consumer messages
(Pulsar's maxUnackedMessagesPerConsumer), its stats say it is blocked, and it is sent the rest once it
acknowledges: what the server keeps of one careless consumer is bounded, whatever its receiver queue."""

from __future__ import annotations

import time

import pytest

from helpers_server import pulsar, rest, start_server

TOPIC = "persistent://public/default/careless"
BOUND = 100
COUNT = 300


@pytest.fixture
def bounded_server(tmp_path):
    running = start_server(tmp_path / "data", "--max-unacked-messages-per-consumer", str(BOUND))
    yield running
    running.stop()


def _receive_all(consumer, timeout_ms: int) -> list:
    received = []
    while True:
        try:
            received.append(consumer.receive(timeout_ms))
        except pulsar.Timeout:
            return received


def _blocked(server) -> bool:
    status, stats = rest(server.http_url, "GET", "/admin/v2/persistent/public/default/careless/stats")
    assert status == 200, stats
    (consumer,) = stats["subscriptions"]["s"]["consumers"]
    return consumer["blockedConsumerOnUnackedMsgs"]


def test_a_consumer_that_does_not_acknowledge_is_sent_its_bound_and_the_rest_once_it_does(bounded_server):
    client = bounded_server.client()
    consumer = client.subscribe(TOPIC, "s", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1000)
    producer = client.create_producer(TOPIC, batching_enabled=False)
    for i in range(COUNT):
        producer.send(b"%d" % i)
    first = _receive_all(consumer, 1000)
    assert len(first) == BOUND
    assert _blocked(bounded_server)
    for message in first:
        consumer.acknowledge(message)
    rest_of_them = []
    deadline = time.monotonic() + 20
    while len(first) + len(rest_of_them) < COUNT and time.monotonic() < deadline:
        batch = _receive_all(consumer, 1500)  # (counted again within a second of the acks)
        for message in batch:
            consumer.acknowledge(message)
        rest_of_them += batch
    assert sorted(int(m.data()) for m in first + rest_of_them) == list(range(COUNT))
    deadline = time.monotonic() + 5  # (its acknowledgements counted within a second: no longer held)
    while _blocked(bounded_server):
        assert time.monotonic() < deadline, "still blocked 5 s after acknowledging everything"
        time.sleep(0.1)
