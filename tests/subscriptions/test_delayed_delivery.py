"""Delayed delivery in-process (Pulsar's deliver_at / deliver_after): shared and key_shared subscriptions hold a
delayed message until its time by the log's clock, then deliver it before new messages; exclusive and failover
deliver at once. The index of delayed messages spills full buckets to unlinked files, so its memory is bounded,
and it is rebuilt from the log when the log is opened again."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import seglog
from seglog.errors import InvalidArgumentError, ReceiveTimeoutError
from seglog.subscriptions import delayed, dispatch
from seglog.subscriptions.delayed import PartitionDelays


def drain(consumer) -> list[bytes]:
    """What the consumer has now, acknowledged."""
    values = []
    for _ in range(10_000):
        try:
            message = consumer.receive(timeout=0)
        except ReceiveTimeoutError:
            return values
        values.append(message.value)
        consumer.ack(message)
    raise AssertionError("more than 10,000 messages")


@pytest.mark.parametrize("subscription_type", ["shared", "key_shared"])
def test_shared_types_hold_a_delayed_message_until_its_time(log, clock, subscription_type):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type=subscription_type, initial_position="earliest")
    producer = topic.producer()
    producer.send(b"first", key="k")
    producer.send(b"in ten seconds", key="k", deliver_after="10s")
    producer.send_batch([b"batch 1", b"batch 2"], deliver_after=timedelta(seconds=5))
    producer.send(b"last", key="k")
    producer.flush()
    assert drain(consumer) == [b"first", b"last"]
    clock.advance(seconds=4, ms=999)
    assert drain(consumer) == []
    clock.advance(ms=1)
    assert drain(consumer) == [b"batch 1", b"batch 2"]
    clock.advance(seconds=5)
    assert drain(consumer) == [b"in ten seconds"]
    assert topic.stats()["subscriptions"]["s"]["msgBacklog"] == 0


@pytest.mark.parametrize("subscription_type", ["exclusive", "failover"])
def test_exclusive_and_failover_deliver_at_once(log, subscription_type):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type=subscription_type, initial_position="earliest")
    topic.producer().send_batch([b"due in a day"], deliver_after="1d")
    assert drain(consumer) == [b"due in a day"]


def test_deliver_at_takes_a_moment_as_ms_or_datetime(log, clock):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    producer = topic.producer()
    now = clock()
    producer.send(b"by ms", deliver_at=now + 2000)
    producer.send(b"by datetime", deliver_at=datetime.fromtimestamp((now + 1000) / 1000, timezone.utc))
    producer.send(b"past", deliver_at=now - 1)
    assert drain(consumer) == [b"past"]
    clock.advance(seconds=1)
    assert drain(consumer) == [b"by datetime"]
    clock.advance(seconds=1)
    assert drain(consumer) == [b"by ms"]


def test_stats_count_the_delayed_messages_in_the_backlog(log, clock):
    topic = log.create_topic("t", partitions=2)
    consumer = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    producer = topic.producer()
    producer.send_batch([b"a", b"b", b"c"], partition=0, deliver_after="1m")
    producer.send_batch([b"d"], partition=1, deliver_after="1m")
    assert drain(consumer) == []
    stats = topic.stats()["subscriptions"]["s"]
    assert (stats["msgDelayed"], stats["msgBacklog"]) == (4, 4)
    clock.advance(minutes=1)
    assert sorted(drain(consumer)) == [b"a", b"b", b"c", b"d"]
    assert topic.stats()["subscriptions"]["s"]["msgDelayed"] == 0


def test_a_delayed_message_is_not_counted_as_redelivered(log, clock):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    topic.producer().send_batch([b"later"], deliver_after="1s")
    drain(consumer)
    clock.advance(seconds=1)
    message = consumer.receive(timeout=0)
    assert consumer.subscription.redelivery_count(message.partition, message.offset) == 0


def test_reopening_the_log_indexes_the_delayed_messages_again(tmp_path, clock):
    with seglog.open(tmp_path / "log", clock=clock, background=False) as log:
        topic = log.create_topic("t")
        topic.subscribe("s", subscription_type="shared", initial_position="earliest").close()
        producer = topic.producer()
        producer.send_batch([b"early"], deliver_after="1s")
        producer.send_batch([b"late"], deliver_after="1h")
    clock.advance(seconds=1)
    with seglog.open(tmp_path / "log", clock=clock, background=False) as log:
        consumer = log.topic("t").subscribe("s", subscription_type="shared")
        assert drain(consumer) == [b"early"]
        clock.advance(hours=1)
        assert drain(consumer) == [b"late"]


def test_a_consumer_of_another_type_takes_the_delayed_messages_at_once(log):
    topic = log.create_topic("t")
    shared = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    topic.producer().send_batch([b"later"], deliver_after="1h")
    assert drain(shared) == []
    shared.close()
    exclusive = topic.subscribe("s", subscription_type="exclusive")
    assert drain(exclusive) == [b"later"]


def test_a_seek_back_reads_the_delayed_messages_again(log, clock):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    producer = topic.producer()
    producer.send_batch([b"later"], deliver_after="1s")
    producer.send_batch([b"now"])
    assert drain(consumer) == [b"now"]
    consumer.seek(0)
    assert drain(consumer) == [b"now"]
    clock.advance(seconds=1)
    assert drain(consumer) == [b"later"]


@pytest.mark.parametrize("arguments, named", [
    ({"deliver_at": 1, "deliver_after": "1s"}, "deliver_after"),
    ({"deliver_after": "-1s"}, "deliver_after"),
    ({"deliver_after": timedelta(seconds=-1)}, "deliver_after"),
    ({"deliver_after": "soon"}, "deliver_after"),
    ({"deliver_at": "tomorrow"}, "deliver_at"),
    ({"deliver_at": -5}, "deliver_at"),
    ({"deliver_at": True}, "deliver_at"),
])
def test_a_bad_delivery_time_is_refused_and_nothing_is_written(log, arguments, named):
    topic = log.create_topic("t")
    producer = topic.producer()
    with pytest.raises(InvalidArgumentError, match=named):
        producer.send_batch([b"x"], **arguments)
    with pytest.raises(InvalidArgumentError, match=named):
        producer.send(b"x", **arguments)
    producer.flush()
    assert topic.end_offset() == 0


def test_the_index_spills_full_buckets_and_releases_in_time_order(tmp_path, monkeypatch):
    monkeypatch.setattr(delayed, "BUCKET_ENTRIES", 8)
    delays = PartitionDelays(tmp_path)
    times = np.random.default_rng(7).integers(1_000, 2_000, size=50)
    for offset, at in enumerate(times):
        delays.add(np.array([offset]), int(at))
    assert delays.count == 50
    assert list(tmp_path.iterdir()) == []  # the sealed buckets' files are unlinked at once
    released: list[int] = []
    for now in range(1_000, 2_001, 100):
        for _ in range(50):
            due = delays.take_due(now, limit=3)
            if not len(due):
                break
            assert len(due) <= 3 and all(times[due] <= now)  # never before its time
            released += due.tolist()
        assert sorted(released) == np.flatnonzero(times <= now).tolist()  # everything due, once
    assert delays.count == 0


def test_a_ready_message_behind_more_delayed_ones_than_one_read_passes_is_given_at_once(log, monkeypatch):
    monkeypatch.setattr(dispatch, "MAX_DELAYED_PASSED", 5)
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    producer = topic.producer()
    for i in range(12):
        producer.send(b"later %d" % i, deliver_after="1h")
    producer.send_batch([b"ready"])
    assert consumer.receive(timeout=0).value == b"ready"
    assert consumer.subscription.delayed_messages() == 12


def test_released_delayed_batches_come_back_whole_and_once(log, clock):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    producer = topic.producer()
    for start in range(0, 3000, 1000):
        producer.send_batch([b"%d" % i for i in range(start, start + 1000)], deliver_after="1s")
    assert drain(consumer) == []
    clock.advance(seconds=1)
    values = []
    for _ in range(100):
        batch = consumer.receive_batch(2000)
        if batch is None:
            break
        values += batch.column("value").to_pylist()
        consumer.ack(batch)
    assert sorted(values, key=int) == [b"%d" % i for i in range(3000)]  # every message, once
