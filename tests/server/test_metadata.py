"""Pulsar's message metadata through seglog serve with the real client (docs/SERVER.md, "One data model"):
producer names, sequence ids, ordering keys, null values, replicate_to and chunks are stored with the
messages and come back to consumers; in-process readers see the same messages; deduplication by producer
name and sequence id survives a restart and a SIGKILL."""

from __future__ import annotations

import os
import signal

import pytest
from test_consume import EARLIEST, assert_nothing_more, receive_all
from test_produce import read_all

import seglog
from helpers_server import pulsar, start_server
from seglog.server.protocol.metadata import sequence_ids

TOPIC = "persistent://public/default/meta"


def test_producer_name_sequence_ids_ordering_keys_and_null_values_round_trip(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "s", initial_position=EARLIEST)
    producer = client.create_producer(TOPIC, producer_name="the-producer", batching_enabled=False)
    producer.send(b"ordered", ordering_key="order-1", partition_key="k1")
    producer.send(None, partition_key="k2", properties={"action": "delete"})
    producer.send(b"", partition_key="k3")
    producer.send(b"elsewhere", replication_clusters=["east", "west"])

    received = receive_all(consumer, 4)
    assert [m.producer_name() for m in received] == ["the-producer"] * 4
    assert [m.data() for m in received] == [b"ordered", b"", b"", b"elsewhere"]
    assert [m.has_null_value() for m in received] == [False, True, False, False]
    assert received[0].ordering_key() == "order-1"
    assert received[1].properties() == {"action": "delete"} and received[1].partition_key() == "k2"
    stored = read_all(server.data, "meta")
    assert [m.value for m in stored] == [b"ordered", None, b"", b"elsewhere"]  # a null value stays null
    assert stored[0].ordering_key == b"order-1" and stored[1].ordering_key is None
    assert [sequence_ids(m.batch_attributes) for m in stored] == [("the-producer", i, i) for i in range(4)]
    assert stored[3].batch_attributes["pulsar.replicate_to"] == "east,west"


def test_a_batch_keeps_each_messages_ordering_key_and_sequence_id(server):
    client = server.client()
    consumer = client.subscribe(TOPIC, "batched", initial_position=EARLIEST)
    producer = client.create_producer(TOPIC, producer_name="batcher", batching_enabled=True,
                                      batching_max_messages=10, batching_max_publish_delay_ms=50)
    for i in range(10):
        producer.send_async(b"%d" % i, None, ordering_key=f"o{i % 3}" if i % 2 else None)
    producer.flush()
    received = receive_all(consumer, 10)
    assert [m.data() for m in received] == [b"%d" % i for i in range(10)]
    assert [m.ordering_key() for m in received] == [f"o{i % 3}" if i % 2 else "" for i in range(10)]
    stored = read_all(server.data, "meta")
    assert {sequence_ids(m.batch_attributes) for m in stored} == {("batcher", 0, 9)}


def test_a_message_larger_than_the_largest_frame_is_chunked_and_reassembled(tmp_path):
    data = tmp_path / "data"
    server = start_server(data, "--max-message-size", "100000")
    try:
        client = server.client()
        consumer = client.subscribe(TOPIC, "chunks", initial_position=EARLIEST)
        producer = client.create_producer(TOPIC, chunking_enabled=True, batching_enabled=False,
                                          compression_type=pulsar.CompressionType.LZ4)
        big = os.urandom(350_000)
        producer.send(big)
        producer.send(b"small")
        assert consumer.receive(10_000).data() == big
        assert consumer.receive(10_000).data() == b"small"
    finally:
        server.stop()
    stored = read_all(data, "meta")
    chunks = [m for m in stored if "pulsar.chunk" in m.batch_attributes]
    assert len(chunks) >= 4 and len(stored) == len(chunks) + 1  # each chunk a message of its own


@pytest.fixture
def dedup_data(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log:
        log.admin.namespaces.set_deduplication("public/default", True)
    return data


def test_deduplication_drops_a_resent_sequence_id_and_the_producer_resumes_after_a_restart(dedup_data):
    server = start_server(dedup_data)
    try:
        client = server.client()
        producer = client.create_producer(TOPIC, producer_name="dedup")
        assert producer.last_sequence_id() == -1
        for i in range(3):
            producer.send(b"hello-%d" % i, sequence_id=i)
        producer.send(b"hello-1", sequence_id=1)  # duplicates: acknowledged, not stored
        producer.send(b"hello-2", sequence_id=2)
        assert producer.last_sequence_id() == 2
        producer.close()
        assert client.create_producer(TOPIC, producer_name="dedup").last_sequence_id() == 2
    finally:
        server.stop()
    assert [m.value for m in read_all(dedup_data, "meta")] == [b"hello-0", b"hello-1", b"hello-2"]

    server = start_server(dedup_data)  # the table is made again from the snapshot and the log
    try:
        producer = server.client().create_producer(TOPIC, producer_name="dedup")
        assert producer.last_sequence_id() == 2
        producer.send(b"hello-2", sequence_id=2)
        producer.send(b"hello-3", sequence_id=3)
    finally:
        server.stop()
    assert [m.value for m in read_all(dedup_data, "meta")] == [b"hello-0", b"hello-1", b"hello-2", b"hello-3"]


def test_deduplication_after_a_sigkill_comes_from_the_log(dedup_data):
    server = start_server(dedup_data)
    producer = server.client().create_producer(TOPIC, producer_name="crashing", batching_enabled=True,
                                               batching_max_publish_delay_ms=5)
    for i in range(50):
        producer.send_async(b"%d" % i, None)
    producer.flush()
    server.stop(signal.SIGKILL)  # no snapshot written: the table comes from the log
    server = start_server(dedup_data)
    try:
        producer = server.client().create_producer(TOPIC, producer_name="crashing")
        assert producer.last_sequence_id() == 49
        producer.send(b"49 again", sequence_id=49)
        producer.send(b"50", sequence_id=50)
    finally:
        server.stop()
    assert [m.value for m in read_all(dedup_data, "meta")][-2:] == [b"49", b"50"]


def test_without_deduplication_a_resent_sequence_id_is_stored_again(server):
    producer = server.client().create_producer(TOPIC, producer_name="plain")
    producer.send(b"a", sequence_id=5)
    producer.send(b"a", sequence_id=5)
    assert producer.last_sequence_id() == 5
    assert len(read_all(server.data, "meta")) == 2


def test_messages_written_in_process_reach_consumers_with_no_producer_name(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data, background=False) as log, log.create_topic("public/default/meta").producer() as p:
        p.send_batch([b"a", None])
    server = start_server(data)
    try:
        consumer = server.client().subscribe(TOPIC, "s", initial_position=EARLIEST)
        received = receive_all(consumer, 2)
        assert [(m.producer_name(), m.has_null_value()) for m in received] == [("", False), ("", True)]
        assert_nothing_more(consumer)
    finally:
        server.stop()
