"""Subscriptions, consumers and acks."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

import seglog
from helpers_storage import consumed_in_another_process
from seglog.broker import Broker
from seglog.errors import (
    AlreadyExistsError,
    ConsumerBusyError,
    InvalidArgumentError,
    NotFoundError,
    ReceiveTimeoutError,
)
from seglog.storage.batch import SCHEMA
from seglog.subscriptions.delivery import ConsumerState


def produce(topic, n, *, start=0, **kw):
    with topic.producer() as producer:
        producer.send_batch([f"m{i}".encode() for i in range(start, start + n)], **kw)


def drain_batches(consumer, *, ack=True):
    """Every batch the consumer gets now, as one RecordBatch (acknowledged unless `ack` is False)."""
    batches = []
    while (batch := consumer.receive_batch()) is not None:
        batches.append(batch)
        if ack:
            consumer.ack(batch)
    return pa.Table.from_batches(batches, schema=SCHEMA).combine_chunks().to_batches()[0] if batches else (
        SCHEMA.empty_table().to_batches()[0] if SCHEMA.empty_table().to_batches() else
        pa.RecordBatch.from_pylist([], schema=SCHEMA))


def drain(consumer, limit=10_000):
    got = []
    while len(got) < limit:
        batch = consumer.receive_batch()
        if batch is None:
            return got
        got.extend(batch.column("offset").to_pylist())
        consumer.ack(batch)
    return got


def test_initial_position_latest_and_earliest(log):
    topic = log.create_topic("t")
    produce(topic, 5)
    latest = topic.subscribe("late")
    earliest = topic.subscribe("early", initial_position="earliest")
    produce(topic, 3, start=5)
    assert latest.receive(timeout=1).offset == 5
    assert earliest.receive(timeout=1).offset == 0


def test_receive_timeout_and_receive_batch_returns_at_once(log):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s")
    with pytest.raises(ReceiveTimeoutError, match="within 0.05 s"):
        consumer.receive(timeout=0.05)
    started = time.monotonic()
    assert consumer.receive_batch(10) is None
    assert time.monotonic() - started < 0.05


def test_receive_waits_for_a_message_from_another_thread(log):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s")
    producing = threading.Timer(0.05, lambda: produce(topic, 1))
    producing.start()
    assert consumer.receive(timeout=5).value == b"m0"
    producing.join()  # its producer closes before the log does (closing it after the log fails: KeyError)


def test_receive_batch_is_zero_copy_and_carries_its_partition(log):
    topic = log.create_topic("t", partitions=2)
    consumer = topic.subscribe("s", initial_position="earliest")
    with topic.producer() as producer:
        producer.send_batch([b"x" * 100] * 10, partition=1)
    batch = consumer.receive_batch()
    assert batch.schema.metadata[b"partition"] == b"1"
    whole = pa.py_buffer(topic.partition_view(1).view(0).data)  # the segment's map as one Arrow buffer
    for buffer in (batch.column("value").buffers()[2], batch.column("value").buffers()[1]):
        assert whole.address <= buffer.address < whole.address + whole.size
    consumer.ack(batch)
    assert topic.stats()["subscriptions"]["s"]["msgBacklog"] == 0


def test_receive_then_receive_batch_hands_over_the_rest_zero_copy(log):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", initial_position="earliest")
    with topic.producer() as producer:
        producer.send_batch([b"x%d" % i for i in range(10)])
    assert [consumer.receive(timeout=1).offset for _ in range(3)] == [0, 1, 2]
    batch = consumer.receive_batch(max_messages=4)
    assert batch.column("offset").to_pylist() == [3, 4, 5, 6] and batch.schema.metadata[b"partition"] == b"0"
    whole = pa.py_buffer(topic.partition_view(0).view(0).data)
    assert whole.address <= batch.column("value").buffers()[2].address < whole.address + whole.size
    assert consumer.receive(timeout=1).offset == 7
    assert consumer.receive_batch().column("value").to_pylist() == [b"x8", b"x9"]
    assert consumer.receive_batch() is None


def test_individual_acks_survive_a_clean_close(tmp_path, clock):
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("t")
        produce(topic, 10)
        consumer = topic.subscribe("s", initial_position="earliest")
        for message in [consumer.receive(timeout=1) for _ in range(10)]:
            if message.offset in (0, 1, 4, 7):
                consumer.ack(message)
        consumer.close()
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.topic("t")
        assert topic.internal_stats()["partitions"]["0"]["cursors"]["s"]["markDeletePosition"] == 1
        assert topic.internal_stats()["partitions"]["0"]["cursors"]["s"]["ackedRanges"] == [[4, 5], [7, 8]]
        consumer = topic.subscribe("s")
        assert drain(consumer) == [2, 3, 5, 6, 8, 9]


def test_ack_numpy_array_and_arrow_batch_in_one_call(log):
    topic = log.create_topic("t")
    produce(topic, 1000)
    consumer = topic.subscribe("s", initial_position="earliest")
    consumer.ack(np.arange(0, 1000, 2))
    assert topic.stats()["subscriptions"]["s"]["msgBacklog"] == 500
    assert drain(consumer) == list(range(1, 1000, 2))


def test_acks_of_unwritten_offsets_and_bad_targets_are_refused(log):
    topic = log.create_topic("t")
    produce(topic, 3)
    consumer = topic.subscribe("s", initial_position="earliest")
    with pytest.raises(InvalidArgumentError, match="below its end offset 3"):
        consumer.ack(3)
    with pytest.raises(InvalidArgumentError, match="offset"):
        consumer.ack("x")
    with pytest.raises(InvalidArgumentError, match="1-D array of integer"):
        consumer.ack(np.array([1.5]))
    assert topic.stats()["subscriptions"]["s"]["msgBacklog"] == 3


@pytest.mark.parametrize("call", [
    lambda consumer: consumer.ack(seglog.MessageId(2, 0)),
    lambda consumer: consumer.ack((2, 0)),
    lambda consumer: consumer.ack_cumulative(seglog.MessageId(2, 0)),
    lambda consumer: consumer.negative_ack(seglog.MessageId(2, 0)),
])
def test_acking_a_partition_the_topic_does_not_have_is_refused(log, call):
    topic = log.create_topic("t", partitions=2)
    produce(topic, 1, partition=0)
    consumer = topic.subscribe("s", initial_position="earliest")
    with pytest.raises(InvalidArgumentError, match=r"invalid partition 2; accepted: an int from 0 to 1"):
        call(consumer)
    assert consumer.receive(timeout=5).offset == 0


@pytest.mark.parametrize("partition, offset, argument", [(-1, 0, "partition"), (0, -1, "offset"),
                                                         (2**31, 0, "partition"), (0, 2**63, "offset")])
def test_a_message_id_outside_the_int_ranges_is_refused(partition, offset, argument):
    with pytest.raises(InvalidArgumentError, match=f"invalid {argument} "):
        seglog.MessageId(partition, offset)


def test_cumulative_ack_and_refusal_on_shared(log):
    topic = log.create_topic("t")
    produce(topic, 10)
    exclusive = topic.subscribe("e", initial_position="earliest")
    exclusive.ack_cumulative(6)
    assert topic.stats()["subscriptions"]["e"]["msgBacklog"] == 3
    for kind in ("shared", "key_shared"):
        consumer = topic.subscribe(kind, subscription_type=kind, initial_position="earliest")
        with pytest.raises(InvalidArgumentError, match="exclusive or failover"):
            consumer.ack_cumulative(5)


def test_exclusive_refuses_a_second_consumer_and_type_changes(log):
    topic = log.create_topic("t")
    first = topic.subscribe("s")
    with pytest.raises(ConsumerBusyError, match="exclusive"):
        topic.subscribe("s")
    with pytest.raises(ConsumerBusyError, match="shared"):
        topic.subscribe("s", subscription_type="shared")
    first.close()
    topic.subscribe("s", subscription_type="shared").close()  # no consumers: the type may change


def test_shared_spreads_messages_and_redelivers_on_close(log):
    topic = log.create_topic("t")
    a = topic.subscribe("s", subscription_type="shared", initial_position="earliest")
    b = topic.subscribe("s", subscription_type="shared")
    for i in range(4):
        produce(topic, 5, start=5 * i)
    from_a = a.receive_batch()
    from_b = b.receive_batch()
    assert set(from_a.column("offset").to_pylist()).isdisjoint(from_b.column("offset").to_pylist())
    a.close()  # a never acknowledged: its messages go to b
    got = from_b.column("offset").to_pylist()
    b.ack(from_b)
    got += drain(b)
    assert sorted(got) == list(range(20))


def test_key_shared_keeps_each_key_on_one_consumer(log):
    topic = log.create_topic("t")
    consumers = [topic.subscribe("s", subscription_type="key_shared", initial_position="earliest",
                                 consumer_name=f"c{i}") for i in range(3)]
    keys = [f"k{i % 7}".encode() for i in range(300)]
    with topic.producer() as producer:
        producer.send_batch([b"v"] * 300, keys=keys)
    owner = {}
    for consumer in consumers * 3:
        while (batch := consumer.receive_batch()) is not None:
            for key in batch.column("key").to_pylist():
                assert owner.setdefault(key, consumer.name) == consumer.name
            consumer.ack(batch)
    assert len(owner) == 7 and topic.stats()["subscriptions"]["s"]["msgBacklog"] == 0


def test_key_shared_ring_moves_only_the_keys_of_the_consumer_that_came_or_went():
    from seglog.subscriptions.key_shared import KEY_HASH_SLOTS, HashRing
    slots = np.arange(KEY_HASH_SLOTS)
    names = ["a", "b", "c"]
    before = np.array(names)[HashRing(names).owners(slots)]
    shares = {name: np.count_nonzero(before == name) / KEY_HASH_SLOTS for name in names}
    assert all(0.2 < share < 0.5 for share in shares.values()), shares  # 100 points each: roughly even
    joined = np.array(names + ["d"])[HashRing(names + ["d"]).owners(slots)]
    moved = before != joined
    assert set(joined[moved]) == {"d"} and 0.1 < moved.mean() < 0.4
    left = np.array(["a", "c"])[HashRing(["a", "c"]).owners(slots)]
    moved = before != left
    assert set(before[moved]) == {"b"} and np.array_equal(moved, before == "b")


def _deliveries_in_key_order(deliveries):
    """Each key's messages were delivered in offset order, whichever consumer got them."""
    last = {}
    for key, offset in deliveries:
        assert offset > last.get(key, -1), (key, offset, last[key])
        last[key] = offset


def test_key_shared_holds_back_a_joining_consumer_until_earlier_messages_are_acknowledged(log):
    topic = log.create_topic("t")
    keys = [f"k{i % 10}".encode() for i in range(100)]
    a = topic.subscribe("s", subscription_type="key_shared", consumer_name="a", initial_position="earliest")
    with topic.producer() as producer:
        producer.send_batch([b"v"] * 100, keys=keys)
        first = a.receive_batch()
        assert len(first) == 100  # a holds all of them, unacknowledged
        b = topic.subscribe("s", subscription_type="key_shared", consumer_name="b")
        producer.send_batch([b"v"] * 100, keys=keys)
    deliveries = list(zip(first.column("key").to_pylist(), first.column("offset").to_pylist()))
    from_a = a.receive_batch()  # the keys a still owns
    deliveries += zip(from_a.column("key").to_pylist(), from_a.column("offset").to_pylist())
    b_keys = set(keys) - set(from_a.column("key").to_pylist())
    assert b_keys and b.receive_batch() is None  # b's keys have messages before 100 unacknowledged
    a.ack(first)
    received = drain_batches(b)
    assert sorted(received.column("offset").to_pylist()) == [100 + i for i in range(100) if keys[i] in b_keys]
    deliveries += zip(received.column("key").to_pylist(), received.column("offset").to_pylist())
    _deliveries_in_key_order(deliveries)


def test_key_shared_consumer_leaving_hands_its_keys_over_in_order(log):
    topic = log.create_topic("t")
    keys = [f"k{i % 20}".encode() for i in range(200)]
    consumers = [topic.subscribe("s", subscription_type="key_shared", consumer_name=name,
                                 initial_position="earliest") for name in ("a", "b", "c")]
    produce_keys = lambda: producer.send_batch([b"v"] * 200, keys=keys)  # noqa: E731
    with topic.producer() as producer:
        produce_keys()
        got = {c.name: drain_batches(c, ack=False) for c in consumers}
        assert all(len(batch) for batch in got.values())
        consumers[0].ack(got["a"])
        consumers[2].ack(got["c"])
        consumers[1].close()  # b leaves without acknowledging: its keys go to a and c
        produce_keys()
    offsets = []
    for name, consumer in (("a", consumers[0]), ("c", consumers[2])):
        batch = drain_batches(consumer)  # in the order received: b's redelivered messages come first
        _deliveries_in_key_order(zip(batch.column("key").to_pylist(), batch.column("offset").to_pylist()))
        keys_before = set(got[name].column("key").to_pylist()) | set(got["b"].column("key").to_pylist())
        assert set(batch.column("key").to_pylist()) <= keys_before
        offsets += batch.column("offset").to_pylist()
    assert sorted(offsets) == sorted(got["b"].column("offset").to_pylist()) + list(range(200, 400))


def test_failover_has_one_active_consumer_and_fails_over(log):
    topic = log.create_topic("t")
    a = topic.subscribe("s", subscription_type="failover", consumer_name="a", initial_position="earliest")
    b = topic.subscribe("s", subscription_type="failover", consumer_name="b")
    produce(topic, 5)
    assert b.receive_batch() is None  # standby
    assert a.receive(timeout=1).offset == 0
    a.close()
    assert b.receive(timeout=1).offset == 0  # unacknowledged: redelivered to the new active consumer


def test_negative_ack_and_ack_timeout_redeliver_by_the_log_clock(log, clock):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", initial_position="earliest", ack_timeout=30, negative_ack_redelivery_delay=5)
    produce(topic, 3)
    first = consumer.receive(timeout=1)
    consumer.negative_ack(first)
    second, third = consumer.receive(timeout=1), consumer.receive(timeout=1)
    consumer.ack(second)
    assert consumer.receive_batch() is None
    clock.advance(seconds=5)
    assert consumer.receive(timeout=1).offset == first.offset
    clock.advance(seconds=30)  # `third` and the redelivered first were never acknowledged
    assert sorted(drain(consumer)) == [first.offset, third.offset]


def test_seek_resets_the_cursor(log, clock):
    topic = log.create_topic("t")
    produce(topic, 10)
    consumer = topic.subscribe("s", initial_position="earliest")
    drain(consumer)
    consumer.seek(4)
    assert consumer.receive(timeout=1).offset == 4
    consumer.seek("earliest")
    assert consumer.receive(timeout=1).offset == 0


def test_a_seek_past_the_end_is_the_end_for_consumers_and_reset_cursor_as_in_pulsar(log):
    topic = log.create_topic("t")
    produce(topic, 10)
    topic.subscribe("admin-moved", initial_position="earliest").close()
    consumer = topic.subscribe("s", initial_position="earliest")
    consumer.seek(1000)
    assert log.admin.topics.reset_cursor("t", "admin-moved", {0: 1000}) is True
    assert _floors(topic, "s") == _floors(topic, "admin-moved") == [10]
    produce(topic, 1, start=10)
    assert consumer.receive(timeout=5).value == b"m10"
    with pytest.raises(InvalidArgumentError, match="invalid start"):
        consumer.seek(2**63)


@pytest.mark.parametrize("timeout, detail", [(float("nan"), "it is NaN"), (-1, "it is negative"),
                                             ("soon", "expected a number"), (True, "not bool")])
def test_a_timeout_that_is_not_seconds_is_refused_by_every_call_that_waits(log, timeout, detail):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", initial_position="earliest")
    reader = topic.reader()
    for call, argument in [(lambda: consumer.receive(timeout=timeout), "timeout"),
                           (lambda: consumer.receive_batch(timeout=timeout), "timeout"),
                           (lambda: reader.read_batch(timeout=timeout), "timeout"),
                           (lambda: reader.read_messages(timeout=timeout), "timeout"),
                           (lambda: topic.producer(send_timeout=timeout), "send_timeout")]:
        with pytest.raises(InvalidArgumentError, match=f"invalid {argument} .*{detail}"):
            call()


def test_timeouts_take_infinity_and_durations(log):
    topic = log.create_topic("t")
    produce(topic, 1)
    consumer = topic.subscribe("s", initial_position="earliest")
    assert consumer.receive(timeout=math.inf).offset == 0
    with pytest.raises(ReceiveTimeoutError):
        consumer.receive(timeout="1ms")
    assert topic.reader().read_batch(timeout="10ms").num_rows == 1
    with topic.producer(send_timeout=math.inf) as producer:
        assert producer.send_timeout == math.inf
    with topic.producer(send_timeout="2s") as producer:
        assert producer.send_timeout == 2.0


def test_unsubscribe_removes_the_backlog(log):
    topic = log.create_topic("t")
    consumer = topic.subscribe("s", initial_position="earliest")
    produce(topic, 3)
    consumer.unsubscribe()
    assert topic.subscriptions() == [] and topic.stats()["subscriptions"] == {}


def test_clear_backlog(log):
    topic = log.create_topic("t")
    topic.subscribe("a", initial_position="earliest").close()
    topic.subscribe("b", initial_position="earliest").close()
    produce(topic, 4)
    log.admin.topics.clear_backlog("t", subscription="a")
    assert topic.stats()["subscriptions"]["a"]["msgBacklog"] == 0
    assert topic.stats()["subscriptions"]["b"]["msgBacklog"] == 4
    log.admin.namespaces.clear_backlog("public/default")
    assert topic.stats()["subscriptions"]["b"]["msgBacklog"] == 0


def test_a_subscription_is_consumed_by_one_process(tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("t")
        log.topic("t").subscribe("s").close()
    with consumed_in_another_process(tmp_path) as pid, seglog.open(tmp_path) as log:
        with pytest.raises(ConsumerBusyError, match=f"process {pid}"):
            log.topic("t").subscribe("s")


def _floors(topic, name):
    cursors = topic.internal_stats()["partitions"]
    return [cursors[str(p)]["cursors"][name]["markDeletePosition"] + 1 for p in range(topic.partitions)]


def test_admin_creates_resets_and_acknowledges_a_cursor_without_a_consumer(log):
    topic = log.create_topic("t", partitions=2)
    with topic.producer() as producer:
        producer.send_batch([b"x"] * 10, partition=0)
        producer.send_batch([b"y"] * 5, partition=1)
    admin = log.admin.topics
    admin.create_subscription("t", "spark", {0: 4, 1: 0})
    assert _floors(topic, "spark") == [4, 0]
    with pytest.raises(AlreadyExistsError, match="subscription spark of public/default/t already exists"):
        admin.create_subscription("t", "spark", {0: 0, 1: 0})
    assert admin.ack_cumulative("t", "spark", {0: 6}) is True
    assert _floors(topic, "spark") == [7, 0]
    assert admin.ack_cumulative("t", "spark", {0: 2, 1: 4}) is True  # never moves a cursor back
    assert _floors(topic, "spark") == [7, 5]
    assert admin.reset_cursor("t", "spark", {0: 3}) is True          # reset-cursor does
    assert _floors(topic, "spark") == [3, 5]
    consumer = topic.subscribe("spark", subscription_type="shared")
    assert admin.ack_cumulative("t", "spark", {0: 5}) is True  # a live one of this process, type kept
    assert _floors(topic, "spark") == [6, 5] and topic.stats()["subscriptions"]["spark"]["type"] == "shared"
    consumer.close()
    for bad in ({0: 10}, {2: 0}, {0: -1}, {}, [(0, 1)]):
        with pytest.raises(InvalidArgumentError, match="invalid offsets .*accepted: {partition: offset}"):
            admin.ack_cumulative("t", "spark", bad)
    with pytest.raises(InvalidArgumentError, match="for every partition"):
        admin.create_subscription("t", "other", {0: 0})
    with pytest.raises(NotFoundError, match="subscription nope of public/default/t does not exist"):
        admin.reset_cursor("t", "nope", {0: 0})
    assert _floors(topic, "spark") == [6, 5]


def test_admin_leaves_a_cursor_another_process_consumes(tmp_path):
    with seglog.open(tmp_path) as log:
        topic = log.create_topic("t")
        produce(topic, 10)
        topic.subscribe("s", initial_position="earliest").close()
    with consumed_in_another_process(tmp_path), seglog.open(tmp_path) as log:
        assert log.admin.topics.ack_cumulative("t", "s", {0: 5}) is False
        assert _floors(log.topic("t"), "s") == [0]


@pytest.mark.slow
def test_sigkill_resumes_at_the_persisted_cursor_without_skipping(tmp_path):
    with seglog.open(tmp_path) as log:
        topic = log.create_topic("t")
        produce(topic, 20_000)
    script = textwrap.dedent(f"""
        import seglog, sys
        log = seglog.open({str(tmp_path)!r}, cursor_persist_interval="20ms")
        consumer = log.topic("t").subscribe("s", initial_position="earliest")
        while True:
            message = consumer.receive()
            consumer.ack(message)
            print(message.offset, flush=True)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as child:
        acked = [int(child.stdout.readline()) for _ in range(5000)]
        os.kill(child.pid, signal.SIGKILL)
        acked += [int(line) for line in child.stdout]  # (what it acknowledged before the kill landed)
    with seglog.open(tmp_path) as log:
        topic = log.topic("t")
        cursor = topic.internal_stats()["partitions"]["0"]["cursors"]["s"]
        consumer = topic.subscribe("s")
        first = consumer.receive(timeout=1).offset
    assert first == cursor["markDeletePosition"] + 1
    # never skips an unacknowledged message: the last acknowledged is the last printed, or the one after it
    # (acknowledged, then killed before it was printed)
    assert first <= acked[-1] + 2


def test_a_consumer_that_opens_a_subscription_an_admin_change_holds_keeps_it(tmp_path, clock):
    """An admin change of a subscription no one consumes here opens the persisted one for the change; a
    consumer opening it meanwhile (the server subscribing while a TTL pass or an admin ack runs) gets that
    same subscription, and the change's end must not close it under the consumer."""
    with seglog.open(tmp_path / "data", clock=clock) as log:
        produce(log.create_topic("t"), 4)
        log.admin.topics.create_subscription("t", "s", "earliest")
    broker = Broker.open(tmp_path / "data", clock=clock, background=False)
    try:
        registry, ref = broker.subscriptions, broker.topic("t")
        consumer = ConsumerState("c", None, lambda _: None, lambda: None)
        with registry.modify(ref, "s") as held:
            held.ack_cumulative(0, 0)  # (the change: message 0 acknowledged)
            subscribed = registry.open(ref, "s", "exclusive", "earliest")
            subscribed.attach(consumer, "exclusive")
        assert subscribed is held and not subscribed.closed and registry.live(ref, "s") is subscribed
        given = subscribed.next_delivery(consumer, 10)
        assert [int(o) for piece in given for o in piece.offsets] == [1, 2, 3]
        subscribed.ack_many(0, np.array([1], dtype=np.int64))
        subscribed.detach(consumer)
        registry.release(subscribed)
        # a change no one claimed closes what it opened, and both changes were saved
        with registry.modify(ref, "s") as held:
            held.ack_cumulative(0, 2)
        assert held.closed and registry.live(ref, "s") is None
    finally:
        broker.close()
    with seglog.open(tmp_path / "data", clock=clock) as log:
        assert log.admin.topics.stats("t")["subscriptions"]["s"]["msgBacklog"] == 1
