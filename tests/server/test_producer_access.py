"""Producer access modes (Shared, Exclusive, WaitForExclusive, ExclusiveWithFencing) and backlog quotas on the
server's produce path, with the real Pulsar client (docs/SERVER.md, "Producer access modes", "Backlog
quotas")."""

from __future__ import annotations

import threading
import time

import pytest
from test_produce import read_all

import seglog
from helpers_server import pulsar, start_server
from seglog.server.protocol.frames import Type, command, encode_command

Mode = pulsar.ProducerAccessMode
TOPIC = "persistent://public/default/access"


def test_an_exclusive_producer_is_the_only_one(server):
    client = server.client()
    client.create_producer(TOPIC, producer_name="p1", access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(TOPIC, producer_name="p2", access_mode=Mode.Exclusive)
    with pytest.raises(pulsar.ProducerBusy):  # a Shared one while it is there
        client.create_producer(TOPIC, producer_name="p3")


def test_an_exclusive_producer_is_refused_beside_a_shared_one(server):
    client = server.client()
    shared = client.create_producer(TOPIC, producer_name="shared")
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(TOPIC, producer_name="p2", access_mode=Mode.Exclusive)
    shared.close()
    client.create_producer(TOPIC, producer_name="p2", access_mode=Mode.Exclusive).send(b"alone")


def test_wait_for_exclusive_waits_until_the_others_left(server):
    client = server.client()
    first = client.create_producer(TOPIC, producer_name="first", access_mode=Mode.Exclusive)
    created = []

    def create() -> None:
        created.append(client.create_producer(TOPIC, producer_name="second", access_mode=Mode.WaitForExclusive))

    waiting = threading.Thread(target=create, daemon=True)
    waiting.start()
    waiting.join(1.0)
    assert not created  # in line while the first is connected
    first.send(b"from the first")
    first.close()
    waiting.join(20)
    assert created and created[0].producer_name() == "second"
    created[0].send(b"from the second")
    assert [m.value for m in read_all(server.data, "access")] == [b"from the first", b"from the second"]


def test_a_producer_that_gives_up_waiting_leaves_the_line(server, raw):
    client = server.client()
    first = client.create_producer(TOPIC, producer_name="first", access_mode=Mode.Exclusive)
    connection = raw()
    connection.connect()
    connection.send(encode_command(command(Type.PRODUCER, topic=TOPIC, producer_id=1, request_id=1,
                                           producer_name="waiter", producer_access_mode=2)))
    answer = connection.receive()
    assert answer.type == Type.PRODUCER_SUCCESS and not answer.producer_success.producer_ready
    connection.send(encode_command(command(Type.CLOSE_PRODUCER, producer_id=1, request_id=2)))
    assert connection.receive().type == Type.SUCCESS
    first.close()
    # the waiter left: a new Exclusive producer gets the topic, and the name "waiter" is free again
    client.create_producer(TOPIC, producer_name="waiter", access_mode=Mode.Exclusive).send(b"x")


def test_exclusive_with_fencing_takes_the_topic_from_the_others(server):
    client = server.client()
    first = client.create_producer(TOPIC, producer_name="p-1", access_mode=Mode.Exclusive)
    first.send(b"before")
    second = client.create_producer(TOPIC, producer_name="p-2", access_mode=Mode.ExclusiveWithFencing)
    with pytest.raises((pulsar.ProducerFenced, pulsar.AlreadyClosed)):
        first.send(b"fenced")
    second.send(b"after")
    assert [m.value for m in read_all(server.data, "access")] == [b"before", b"after"]


# backlog quotas

@pytest.fixture
def quota_data(tmp_path):
    """A namespace whose topics hold a backlog quota of 4 KiB, with a subscription that acknowledges nothing."""
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log:
        log.admin.namespaces.create("public/quota")
        topic = log.create_topic("public/quota/t")
        topic.subscribe("slow", initial_position="earliest").close()
    return data


def set_quota(data, policy: str) -> None:
    with seglog.open(data, background=False) as log:
        log.admin.namespaces.set_backlog_quota("public/quota", limit="4 KiB", policy=policy)


def fill_backlog(data) -> None:
    with seglog.open(data, background=False) as log, log.topic("public/quota/t").producer() as producer:
        producer.send_batch([b"x" * 1024] * 3)


@pytest.mark.parametrize(("policy", "error"), [
    ("producer_exception", pulsar.ProducerBlockedQuotaExceededException),
    ("producer_request_hold", pulsar.ProducerBlockedQuotaExceededError),
])
def test_a_new_producer_is_refused_while_the_quota_is_reached(quota_data, policy, error):
    fill_backlog(quota_data)
    with seglog.open(quota_data, background=False) as log, log.topic("public/quota/t").producer() as producer:
        producer.send_batch([b"x" * 1024])  # 4 KiB and headers: at the limit now
    set_quota(quota_data, policy)
    server = start_server(quota_data)
    try:
        with pytest.raises(error):
            server.client().create_producer("persistent://public/quota/t")
    finally:
        server.stop()


def test_a_producer_reaching_the_quota_is_closed_and_its_sends_fail_with_the_quota_error(quota_data):
    set_quota(quota_data, "producer_exception")
    server = start_server(quota_data)
    try:
        client = server.client()
        producer = client.create_producer("persistent://public/quota/t", batching_enabled=False,
                                          send_timeout_millis=10_000)
        sent, refused = 0, None
        for _ in range(20):
            try:
                producer.send(b"y" * 1024)
                sent += 1
            except pulsar.ProducerBlockedQuotaExceededException as error:
                refused = error
                break
        assert refused is not None and 1 <= sent <= 5
        stored = read_all(quota_data, "public/quota/t")
        assert len(stored) == sent  # nothing written once the quota was reached, every receipted message kept
        # the subscription catches up: the producer may send again (the client re-creates it, with back-off)
        consumer = client.subscribe("persistent://public/quota/t", "slow")
        for _ in range(sent):
            consumer.acknowledge(consumer.receive(10_000))
        consumer.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                producer.send(b"again")
                break
            except pulsar.ProducerBlockedQuotaExceededException:
                time.sleep(0.2)
        assert read_all(quota_data, "public/quota/t")[-1].value == b"again"
    finally:
        server.stop()
