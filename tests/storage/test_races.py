"""Threads racing on one partition's writer or one subscription's cursor: first each interleaving forced at
the point where it used to break, then plain threads in a loop bounded by count and time."""

import random
import sys
import threading
import time

import numpy as np
import pytest

import seglog
import seglog.lifecycle.maintenance
import seglog.storage.writer
from seglog import MessageId

THREAD_OPERATIONS = 300
THREAD_SECONDS = 10  # a bound, not a timing assertion: each thread stops at whichever comes first


@pytest.fixture
def frequent_switches():
    """Let the interpreter switch threads every few bytecodes, so that the loops meet every interleaving."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def run_in_thread(action) -> None:
    """Run `action` in another thread and wait for it; re-raise what it raised."""
    errors = []

    def run():
        try:
            action()
        except BaseException as error:  # noqa: BLE001 (handed to the calling thread)
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def run_threads(work, count: int) -> None:
    """Run work(index) in `count` threads; re-raise the first error any of them raised."""
    errors = []

    def run(index):
        try:
            work(index)
        except BaseException as error:  # noqa: BLE001 (handed to the test's thread)
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def assert_stored_exactly(topic, expected: dict[MessageId, bytes]) -> None:
    """Every message of `expected` is stored at its id, and nothing else is stored."""
    stored = {MessageId(p, m.offset): m.value for p in range(topic.partitions) for m in topic.reader(0, p)}
    missing = {mid: value for mid, value in expected.items() if stored.get(mid) != value}
    assert not missing, f"{len(missing)} returned ids do not hold their message, e.g. {next(iter(missing.items()))}"
    assert len(stored) == len(expected), f"{len(stored) - len(expected)} messages stored that no call returned"


# ---------------------------------------------------------------------------------------------------------
# send() racing send_batch() on one partition


def test_a_send_while_send_batch_prepares_its_batch_is_numbered_before_the_batch(log, monkeypatch):
    topic = log.create_topic("t")
    producer = topic.producer(linger_ms=60_000)
    batch = [b"batch-0", b"batch-1"]
    racing: list[MessageId] = []
    make_source = seglog.storage.writer.make_source

    def make_source_meeting_a_send(values, *args, **kwargs):
        if values is batch:  # the send_batch's own values, not the queued messages
            run_in_thread(lambda: racing.append(producer.send(b"racing")))
        return make_source(values, *args, **kwargs)

    monkeypatch.setattr(seglog.storage.writer, "make_source", make_source_meeting_a_send)
    queued = producer.send(b"queued")
    first = producer.send_batch(batch)
    producer.close()
    assert (queued, racing, first) == (MessageId(0, 0), [MessageId(0, 1)], MessageId(0, 2))
    assert_stored_exactly(topic, {queued: b"queued", racing[0]: b"racing", first: b"batch-0",
                                  MessageId(0, 3): b"batch-1"})


def test_a_send_while_send_batch_copies_its_batch_is_numbered_after_the_batch(log, monkeypatch):
    topic = log.create_topic("t")
    producer = topic.producer(linger_ms=60_000)
    racing: list[MessageId] = []
    write = seglog.storage.writer.ActiveSegment.write

    def write_meeting_a_send(segment, source, start, stop, base_offset):
        if not racing:
            run_in_thread(lambda: racing.append(producer.send(b"racing")))
        return write(segment, source, start, stop, base_offset)

    monkeypatch.setattr(seglog.storage.writer.ActiveSegment, "write", write_meeting_a_send)
    queued = producer.send(b"queued")
    first = producer.send_batch([b"batch-0", b"batch-1"])
    producer.close()
    assert (queued, first, racing) == (MessageId(0, 0), MessageId(0, 1), [MessageId(0, 3)])
    assert_stored_exactly(topic, {queued: b"queued", first: b"batch-0", MessageId(0, 2): b"batch-1",
                                  racing[0]: b"racing"})


def test_send_send_batch_and_flush_from_many_threads_store_each_message_once_at_its_id(log, frequent_switches):
    topic = log.create_topic("t", partitions=2)
    producer = topic.producer(linger_ms=1, batch_size=4096)
    expected: dict[MessageId, bytes] = {}
    deadline = time.monotonic() + THREAD_SECONDS

    def work(thread: int) -> None:
        rng = random.Random(thread)
        for i in range(THREAD_OPERATIONS):
            if time.monotonic() > deadline:
                return
            partition = rng.randrange(2)
            choice = rng.random()
            if choice < 0.6:
                value = b"send-%d-%d" % (thread, i)
                expected[producer.send(value, partition=partition)] = value
            elif choice < 0.9:
                values = [b"batch-%d-%d-%d" % (thread, i, j) for j in range(rng.randrange(1, 20))]
                base = producer.send_batch(values, partition=partition)
                expected.update((MessageId(partition, base.offset + j), v) for j, v in enumerate(values))
            else:
                producer.flush()

    run_threads(work, 6)
    producer.close()
    assert_stored_exactly(topic, expected)


# ---------------------------------------------------------------------------------------------------------
# consumer acks racing the maintenance pass (a consumer_backlog_eviction quota reads every cursor's backlog)

CURSOR_WINDOW = 1_000_000  # messages between the floor and the highest ack: the backlog reads loop over them
LONG_READ_LOOPS = 10  # GIL-free loops over the window in the forced read, each a few ms
MAINTENANCE_PASSES = 20


@pytest.fixture
def evicting_topic(log):
    """A topic of CURSOR_WINDOW one-byte messages whose quota makes maintenance read every cursor's backlog
    (nothing is old enough to evict), and a consumer that acknowledged the last one only."""
    topic = log.create_topic("t")
    log.admin.topics.set_backlog_quota(topic.name, limit_time=3600, type="message_age",
                                       policy="consumer_backlog_eviction")
    with topic.producer() as producer:
        producer.send_batch(np.zeros((CURSOR_WINDOW, 1), dtype=np.uint8))
    consumer = topic.subscribe("s", initial_position="earliest")
    consumer.ack(CURSOR_WINDOW - 1)
    return topic, consumer


def test_an_ack_meeting_a_maintenance_read_of_the_cursor_waits_for_it_and_is_kept(log, evicting_topic, monkeypatch):
    topic, consumer = evicting_topic
    backlog_read = threading.Event()
    partition_backlog = seglog.lifecycle.maintenance.partition_backlog

    def long_backlog_read(view, table, acks):
        """The real read after GIL-free loops over the whole window, during which the test thread acks."""
        backlog_read.set()
        bounds = np.arange(acks.floor, acks.high + 1, dtype=np.int64)
        for _ in range(LONG_READ_LOOPS):
            acks.weighted_acked(bounds, np.ones(len(bounds) - 1))
        return partition_backlog(view, table, acks)

    monkeypatch.setattr(seglog.lifecycle.maintenance, "partition_backlog", long_backlog_read)
    maintenance = threading.Thread(target=log.run_maintenance)
    maintenance.start()
    assert backlog_read.wait(THREAD_SECONDS)
    acked = []
    deadline = time.monotonic() + THREAD_SECONDS
    try:
        for offset in range(CURSOR_WINDOW - 1):
            if not maintenance.is_alive() or time.monotonic() > deadline:
                break
            consumer.ack(MessageId(0, offset))
            acked.append(offset)
    finally:
        maintenance.join()
    assert acked and all(consumer.subscription.is_acked(0, offset) for offset in acked)


def test_acks_and_maintenance_from_threads_never_race(log, evicting_topic, frequent_switches):
    topic, consumer = evicting_topic
    acked: list[int] = []
    acking, maintained = threading.Event(), threading.Event()
    deadline = time.monotonic() + THREAD_SECONDS

    def maintain() -> None:
        acking.wait(THREAD_SECONDS)  # (a loaded machine may start the ackers late: the passes must meet them)
        try:
            for _ in range(MAINTENANCE_PASSES):
                if time.monotonic() > deadline:
                    return
                log.run_maintenance()
                topic.stats()
        finally:
            maintained.set()

    def ack(thread: int) -> None:
        rng = random.Random(thread)
        while not maintained.is_set() and time.monotonic() < deadline:
            offsets = [rng.randrange(CURSOR_WINDOW) for _ in range(rng.choice([1, 1, 1, 50]))]
            if len(offsets) == 1:
                consumer.ack(MessageId(0, offsets[0]))
            else:
                consumer.ack(np.array(offsets, dtype=np.int64), partition=0)
            acked.extend(offsets)
            acking.set()

    run_threads(lambda index: maintain() if index == 0 else ack(index), 3)
    assert acked and all(consumer.subscription.is_acked(0, offset) for offset in acked)


def test_admin_acks_of_one_persisted_subscription_from_threads_are_never_lost(log, frequent_switches):
    """Two threads acknowledging the same subscription through the admin API (as two replicated-subscription
    UPDATEs do), nobody consuming it: each change opens, changes and saves the persisted cursor; one given the
    cursor another had opened once lost its change when the other closed it first."""
    topic = log.create_topic("admin-acks")
    with topic.producer() as producer:
        producer.send_batch([b"m"] * 200)
    log.admin.topics.create_subscription("admin-acks", "sub", "earliest")
    top = {0: 99, 1: 199}  # each thread's last ack

    def ack(index: int) -> None:
        for offset in range(index * 100, top[index] + 1):
            log.admin.topics.ack_cumulative("admin-acks", "sub", {0: offset})

    run_threads(ack, 2)
    assert log.admin.topics.stats("admin-acks")["subscriptions"]["sub"]["msgBacklog"] == 0
