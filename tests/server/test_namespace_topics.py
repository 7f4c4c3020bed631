"""Pattern subscriptions (GET_TOPICS_OF_NAMESPACE) and named listeners, with the real Pulsar client."""

from __future__ import annotations

import re
import time

import pytest

import seglog
from helpers_server import pulsar, receive_until, start_server


@pytest.fixture
def server(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log:
        log.create_topic("public/default/orders-eu", partitions=2)
        log.create_topic("public/default/orders-us")
        log.create_topic("public/default/invoices")
        log.admin.namespaces.create("public/other")
        log.create_topic("public/other/orders-asia")
    running = start_server(data)
    yield running
    running.stop()


def test_a_pattern_consumer_receives_from_every_matching_topic_of_the_namespace(server):
    client = server.client()
    consumer = client.subscribe(re.compile("persistent://public/default/orders-.*"), "all-orders",
                                initial_position=pulsar.InitialPosition.Earliest)
    for topic in ("orders-eu", "orders-us", "invoices"):
        client.create_producer(f"persistent://public/default/{topic}").send(topic.encode())
    client.create_producer("persistent://public/other/orders-asia").send(b"orders-asia")
    (got,) = receive_until([consumer], 2)
    assert {m.data() for m in got} == {b"orders-eu", b"orders-us"}
    with pytest.raises(pulsar.Timeout):  # neither another namespace's topic nor one the pattern excludes
        consumer.receive(500)


def test_a_pattern_in_a_missing_namespace_is_refused(server):
    with pytest.raises(pulsar.PulsarException):
        server.client().subscribe(re.compile("persistent://public/missing/.*"), "s")


def test_a_listener_name_seglog_does_not_have_fails_at_once(server):
    client = pulsar.Client(server.pulsar_url, listener_name="test", operation_timeout_seconds=30)
    try:
        started = time.monotonic()
        with pytest.raises(pulsar.PulsarException):
            client.create_producer("persistent://public/default/invoices")
        assert time.monotonic() - started < 10  # not retried until the operation timeout
    finally:
        client.close()
