"""The produce path of `seglog serve` with the real Pulsar client: what it sends lands as ordinary seglog
messages, receipts name their offsets (docs/SERVER.md, Message ids), errors reach the client as it expects
them, and every receipted message survives SIGTERM and SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest

import seglog
from helpers_server import pulsar, start_server

COMPRESSIONS = ["NONE", "LZ4", "ZLib", "ZSTD", "SNAPPY"]


def read_all(data, topic: str, partition: int = 0) -> list:
    with seglog.open(data, background=False) as log:
        return list(log.topic(topic).reader("earliest", partition=partition))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def send_async_all(producer, values: list[bytes], **options) -> list:
    """send_async every value, flush, and return the message ids in order (bounded wait)."""
    results: list = [None] * len(values)
    done = threading.Semaphore(0)

    def callback(index: int):
        def on_receipt(result, message_id) -> None:
            results[index] = (result, message_id)
            done.release()
        return on_receipt

    for index, value in enumerate(values):
        producer.send_async(value, callback(index), **options)
    producer.flush()
    for _ in values:
        assert done.acquire(timeout=30)
    assert all(result == pulsar.Result.Ok for result, _ in results), results
    return [message_id for _, message_id in results]


def test_sent_messages_are_ordinary_seglog_messages(server):
    producer = server.client().create_producer("persistent://public/default/single")
    before = now_ms()
    ids = [producer.send(f"value-{i}".encode(), properties={"n": str(i)}, partition_key=f"key-{i}",
                         event_timestamp=1_000 + i) for i in range(3)]
    ids.append(producer.send(b"no key, no event time"))
    after = now_ms()

    messages = read_all(server.data, "single")
    assert [m.value for m in messages] == [b"value-0", b"value-1", b"value-2", b"no key, no event time"]
    assert [m.key for m in messages] == [b"key-0", b"key-1", b"key-2", None]
    assert [m.properties for m in messages] == [{"n": "0"}, {"n": "1"}, {"n": "2"}, {}]
    assert [m.event_time for m in messages] == [1_000, 1_001, 1_002, None]
    assert all(before <= m.timestamp <= after for m in messages)  # the client's publish time
    # entryId = the offset; one ledger; unbatched: batch index -1
    assert [(i.ledger_id(), i.entry_id(), i.batch_index()) for i in ids] == [(0, m.offset, -1) for m in messages]
    assert ids == sorted(ids)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_batches_of_each_compression_land_message_by_message(server, compression):
    producer = server.client().create_producer(
        f"batched-{compression}", batching_enabled=True, batching_max_messages=50, batching_max_publish_delay_ms=20,
        compression_type=getattr(pulsar.CompressionType, compression))
    values = [f"message {i} ".encode() * 10 for i in range(120)]
    ids = send_async_all(producer, values, properties={"c": compression}, partition_key="k", event_timestamp=7)

    messages = read_all(server.data, f"batched-{compression}")
    assert [m.value for m in messages] == values
    assert all(m.key == b"k" and m.properties == {"c": compression} and m.event_time == 7 for m in messages)
    assert any(i.batch_index() > 0 for i in ids)  # batched indeed
    # offset = entryId + batchIndex, in order
    assert [i.entry_id() + max(i.batch_index(), 0) for i in ids] == [m.offset for m in messages]
    assert ids == sorted(ids)


def test_send_async_without_batching(server):
    producer = server.client().create_producer("unbatched", batching_enabled=False)
    ids = send_async_all(producer, [b"%d" % i for i in range(200)])
    assert [(i.entry_id(), i.batch_index()) for i in ids] == [(offset, -1) for offset in range(200)]
    assert [m.value for m in read_all(server.data, "unbatched")] == [b"%d" % i for i in range(200)]


def test_a_producer_name_in_use_on_the_topic_is_producer_busy(server):
    client = server.client()
    first = client.create_producer("named", producer_name="the-one")
    with pytest.raises(pulsar.ProducerBusy):
        client.create_producer("named", producer_name="the-one")
    client.create_producer("other-topic", producer_name="the-one")  # unique per topic only
    first.close()
    client.create_producer("named", producer_name="the-one").send(b"after the first closed")


def test_generated_producer_names_are_unique(server):
    client = server.client()
    names = {client.create_producer("generated").producer_name() for _ in range(3)}
    assert len(names) == 3


def test_a_topic_in_a_missing_namespace_is_topic_not_found(server):
    with pytest.raises(pulsar.TopicNotFound):
        server.client().create_producer("persistent://no-such-tenant/no-such-namespace/t")


def test_a_partitioned_seglog_topic_is_a_partitioned_pulsar_topic(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic("spread", partitions=3)
    server = start_server(data)
    try:
        producer = server.client().create_producer(
            "spread", message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution, batching_enabled=False)
        ids = [producer.send(b"%d" % i) for i in range(9)]
    finally:
        assert server.stop() == 0
    assert sorted({i.partition() for i in ids}) == [0, 1, 2]
    for partition in range(3):
        stored = read_all(data, "spread", partition)
        sent = [i for i in ids if i.partition() == partition]
        assert [m.offset for m in stored] == [i.entry_id() for i in sent]
        assert len(stored) == 3


def test_sigterm_exits_0_with_every_receipted_message_on_disk(server):
    producer = server.client().create_producer("graceful", batching_enabled=True, batching_max_publish_delay_ms=5,
                                                     block_if_queue_full=True)
    ids = send_async_all(producer, [b"%d" % i for i in range(2_000)])
    assert server.stop(signal.SIGTERM) == 0
    assert len(read_all(server.data, "graceful")) == len(ids) == 2_000


def test_sigkill_after_receipts_loses_none_of_them(tmp_path):
    data = tmp_path / "data"
    server = start_server(data)
    producer = server.client().create_producer("crash", batching_enabled=True, batching_max_publish_delay_ms=5,
                                                       block_if_queue_full=True)
    ids = send_async_all(producer, [b"%d" % i for i in range(1_000)])
    server.stop(signal.SIGKILL)

    restarted = start_server(data)  # the kernel let the locks go with the process
    try:
        more = restarted.client().create_producer("crash").send(b"after the restart")
    finally:
        assert restarted.stop() == 0
    values = [m.value for m in read_all(data, "crash")]
    assert values[:1_000] == [b"%d" % i for i in range(1_000)]
    assert values[1_000:] == [b"after the restart"]
    assert more.entry_id() == 1_000 and len(ids) == 1_000


def test_a_second_server_on_the_data_directory_is_refused(server):
    second = subprocess.run([sys.executable, "-m", "seglog", "--data", str(server.data), "serve", "--cluster", "x",
                             "--port", "0", "--http-port", "0", "--flight-port", "0"], capture_output=True, text=True,
                            timeout=60)
    assert second.returncode != 0
    assert "serves the data directory" in second.stderr and second.stdout == ""
