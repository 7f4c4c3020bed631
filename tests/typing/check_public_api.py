"""The public API called as the README's "Using it" and "Subscriptions and the message lifecycle" sections call
it, for mypy only: never run (pytest does not collect it). tests/test_typing.py type-checks it with the kernels'
stubs (src/seglog/_core/*.pyi), so a stub or a public signature that drifts fails the suite.

assert_type pins what each call returns. A `# type: ignore[code]` marks a call the types must refuse: with
warn_unused_ignores, a stub loosened to accept it (say, to Any) makes the ignore unused, and so an error."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from typing_extensions import assert_type  # typing.assert_type is Python 3.11+; seglog supports 3.10

import seglog
from seglog._core._acks import AckSet, AckSetBusyError
from seglog.consumer import Consumer


def using_it(path: str, ms_array: npt.NDArray[np.int64]) -> None:
    with seglog.open(path) as log:
        assert_type(log, seglog.Log)
        topic = log.create_topic("acme/billing/invoices", partitions=4, segment_size="256 MiB")
        assert_type(topic, seglog.Topic)
        with topic.producer(linger_ms=5) as producer:
            assert_type(producer, seglog.Producer)
            send(producer)
            assert_type(producer.send_batch([b"a", b"b", b"c"], partition=0), seglog.MessageId)
            values = pa.array([b"a", b"b", b"c"], type=pa.binary())
            keys = pa.array([b"k", None, b"k"], type=pa.binary())
            assert_type(producer.send_batch(values, keys=keys, timestamps=ms_array), seglog.MessageId)
        reader = topic.reader("earliest", partition=0)
        assert_type(reader, seglog.Reader)
        assert_type(reader.read_batch(max_messages=10_000), pa.RecordBatch | None)
        assert_type(reader.read_messages(100, timeout=0.5), list[seglog.Message])
        for info in reader.batch_infos():
            assert_type(info.base_offset + info.record_count, int)
            assert_type(info.attributes, Mapping[str, str])
        for message in topic.reader(0, partition=1):
            read(message)


def send(producer: seglog.Producer) -> None:
    """Producer.send is the kernels' SendPath.send (_accumulator.pyi)."""
    mid = producer.send(b"hello", key=b"customer-42")
    assert_type(mid, seglog.MessageId)
    assert_type(mid.partition, int)
    assert_type(mid.offset, int)
    partition, offset = mid  # a MessageId unpacks like the tuple it compares to
    assert_type(partition, int)
    assert_type(mid < (partition, offset + 1), bool)
    assert_type(mid == seglog.MessageId(partition, offset), bool)
    assert_type({mid: "hashable"}, dict[seglog.MessageId, str])
    producer.send("text", key="user-1", timestamp=1_700_000_000_000, properties={"trace": "abc"}, partition=0)
    producer.send(bytearray(b"value"), key=memoryview(b"key"))
    producer.send(None, key=b"tombstone")  # a null value
    producer.send(42)  # type: ignore[arg-type]
    producer.send(b"value", properties={"retries": 3})  # type: ignore[dict-item]
    producer.send(b"value", timestamp="now")  # type: ignore[arg-type]
    seglog.MessageId("0", 1)  # type: ignore[arg-type]


def read(message: seglog.Message) -> None:
    assert_type(message.partition, int)
    assert_type(message.offset, int)
    assert_type(message.key, bytes | None)
    assert_type(message.value, bytes | None)
    assert_type(message.timestamp, int)
    assert_type(message.event_time, int | None)
    assert_type(message.properties, dict[str, str])
    assert_type(message.ordering_key, bytes | None)
    assert_type(message.batch_attributes, Mapping[str, str])
    message.batch_attributes["k"] = "v"  # type: ignore[index]
    assert_type(message.message_id, seglog.MessageId)
    message.value = b"other"  # type: ignore[misc]


def subscriptions(topic: seglog.Topic) -> None:
    consumer = topic.subscribe("billing", subscription_type="shared", initial_position="earliest",
                               ack_timeout=30, negative_ack_redelivery_delay=60)
    assert_type(consumer, Consumer)
    message = consumer.receive(timeout=5)
    assert_type(message, seglog.Message)
    consumer.ack(message)
    consumer.ack(message.message_id)
    batch = consumer.receive_batch(1000)
    assert_type(batch, pa.RecordBatch | None)
    if batch is not None:
        consumer.ack(batch)
    consumer.negative_ack(message)
    consumer.seek(1000)
    consumer.close()


def ack_set() -> None:
    """AckSet, the cursor's state (_acks.pyi), used directly."""
    acks = AckSet(10)
    assert_type(acks.floor, int)
    assert_type(acks.high, int)
    assert_type(acks.individual_count, int)
    assert_type(acks.ack(10), bool)
    assert_type(acks.ack(np.int64(12)), bool)
    assert_type(acks.ack_many(np.array([11, 13])), int)
    assert_type(acks.ack_many(pa.array([14, 15])), int)
    assert_type(acks.ack_range(20, 30), int)
    assert_type(acks.ack_cumulative(5), int)
    assert_type(acks.is_acked(3), bool)
    assert_type(acks.acked_count(0, 100), int)
    assert_type(acks.next_unacked(0), int)
    assert_type(acks.unacked_in(0, 100), npt.NDArray[np.int64])
    assert_type(acks.unacked_mask(0, 100), npt.NDArray[np.bool_])
    assert_type(acks.ranges(), npt.NDArray[np.int64])
    assert_type(acks.weighted_acked(np.array([0, 50, 100]), np.array([1.5, 2.0])), float)
    assert_type(AckSet.from_bytes(acks.to_bytes()), AckSet)
    assert_type(acks.copy(), AckSet)
    assert_type(acks == acks.copy(), bool)
    acks.ack("10")  # type: ignore[arg-type]
    acks.ack_many([11, 12])  # type: ignore[arg-type]
    acks.floor = 3  # type: ignore[misc]
    try:
        acks.ack(40)
    except AckSetBusyError as error:
        assert_type(error, AckSetBusyError)
