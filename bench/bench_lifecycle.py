"""Acknowledgements, backlog figures and the maintenance pass: the per-message and per-pass costs of the
subscription lifecycle, each against the plain-Python (or plain-OS) way to do the same work.

The acks topic holds 2M messages of 8 B (fixed-width numpy records, sent in chunks of 64k, one stored
batch each); `offsets` is a random half of them, in random order.

Group "ack: 1M offsets, one array":
  baseline  set.update(offsets.tolist())    a fresh set per round; the tolist() is timed, as the
                                            consumer takes the numpy array itself
  seglog    Consumer.ack(array)             one call; the subscription is reset (seek) before each round,
                                            so every round acks into an empty cursor   >= 20M acks/s
Group "ack: one Message per call":
  baseline  s.add((m.partition, m.offset))  a loop over 1M Message objects (read beforehand, untimed)
  seglog    Consumer.ack(message)           a loop over the same messages              >= 1.5M acks/s
Group "backlog: 1M scattered acks of 2M":
  baseline  n - np.count_nonzero(acked)     the plain-numpy count over a bool array of the 2M messages
  seglog    partition_backlog(view, table, acks)   the per-partition figure behind topic.stats()
                                            ['subscriptions'][name]['msgBacklog'|'backlogSize'|...]:
                                            messages, bytes (pro rata of acked messages per stored batch)
                                            and the oldest unacked timestamp         <= 1 ms a call
            topic.stats()                   the whole stats dict of the topic (one subscription): also a
                                            listdir + stat for physicalStorageSize and the policies in force
                                            (for information)
  Both are called 200 times per round; their rates are calls per second (1000/s is 1 ms a call).
Group "maintenance: 10,000 segments, 100 subscriptions":
  baseline  os.listdir + os.stat of every file of the partition directory (30,000 files: what any tool
            that looks at 10,000 segments pays)
  seglog    log.run_maintenance(), warm     the segment facts cached by an earlier pass (one untimed pass
                                            in setup), the directory unchanged for a second, as it is
                                            between rolls                            <= 50 ms a pass
            log.run_maintenance(), warm, after a roll   one new segment written before each pass (untimed),
                                            so the directory is listed again         <= 50 ms a pass
            log.run_maintenance(), cold     the first pass of a log opened afresh on the same directory
                                            (the open itself untimed; files in the page cache) (information)
  The topic has one partition of 10,000 one-message segments (segment_max_messages=1, 1 KiB segments) and
  100 subscriptions spread over it (each closed: the pass reads their cursor files). Policies that make the
  pass evaluate every rule and act on none: namespace retention -1/-1, a message TTL of 1 h and
  consumer_backlog_eviction quotas of 1 GiB and 1 h (the clock does not move, so nothing expires), topic
  retention_time 30 d and max_partition_size 1 GiB. Each round checks that nothing was deleted or skipped.
Groups "consume: whole stored batches" and "consume: 1000 messages per call" (information):
  baseline  Reader.read_batch()             verify_crc=False: dispatch hands out the mapped batches
                                            unchecked too
  seglog    Consumer.receive_batch()        one consumer of a shared subscription, reset before each
                                            round, not acknowledging (its pending list grows)

With --benchmark-disable (CI) the sizes shrink to 20k messages, 200 segments and 10 subscriptions.
"""

from __future__ import annotations

import os
import time
from itertools import islice

import numpy as np
import pytest

import seglog
from seglog.catalog.config import MIN_SEGMENT_SIZE
from seglog.lifecycle.backlog import partition_backlog
from seglog.storage.partition_view import MTIME_SETTLED_NS

ACK_ARRAY = "ack: 1M offsets, one array"
ACK_ONE = "ack: one Message per call"
BACKLOG = "backlog: 1M scattered acks of 2M"
MAINTENANCE = "maintenance: 10,000 segments, 100 subscriptions"
CONSUME_WHOLE = "consume: whole stored batches"
CONSUME_1000 = "consume: 1000 messages per call"
NAMESPACE = "public/default"
RECORD_BYTES = 8
BACKLOG_CALLS = 200
# Neither the background passes nor the cursor persisting may run inside a timed round.
QUIET = {"maintenance_interval": "1h", "cursor_persist_interval": "1h"}


def _produce(topic, messages: int, chunk: int) -> None:
    records = np.zeros((chunk, RECORD_BYTES), dtype=np.uint8)
    with topic.producer() as producer:
        for start in range(0, messages, chunk):
            producer.send_batch(records[:min(chunk, messages - start)])


@pytest.fixture(scope="module")
def acks_log(scratch, scale):
    """(log, topic of 2M messages, a random half of its offsets in random order)."""
    messages, chunk = scale(2_000_000, 20_000), scale(65_536, 4_096)
    with seglog.open(scratch / "acks", clock=seglog.ManualClock(), **QUIET) as log:
        topic = log.create_topic("acks")
        _produce(topic, messages, chunk)
        assert topic.end_offset() == messages
        offsets = np.random.default_rng(0xAC5).permutation(messages)[:messages // 2].astype(np.int64)
        yield log, topic, offsets


def _consumer(topic, name: str, subscription_type: str = "exclusive"):
    return topic.subscribe(name, subscription_type=subscription_type, initial_position="earliest")


def _reset(consumer):
    """Setup of a round: the subscription back at the earliest offset, nothing acknowledged."""
    consumer.seek("earliest")


# ---------------------------------------------------------------------------------------------------------
# 1. Individual acks from one numpy array

def test_set_update(bench, acks_log):
    _, _, offsets = acks_log

    def update(acked):
        acked.update(offsets.tolist())
        return acked

    bench.baseline(ACK_ARRAY, "set.update(offsets.tolist())", messages=len(offsets), unit="ack")
    assert len(bench.run(update, setup=lambda: (set(),))) == len(offsets)


def test_ack_array(bench, acks_log):
    _, topic, offsets = acks_log
    consumer = _consumer(topic, "array")

    def fresh_cursor():
        _reset(consumer)
        return (offsets,)

    bench.seglog(ACK_ARRAY, "Consumer.ack(array)", messages=len(offsets), unit="ack", min_rate=20e6)
    bench.run(consumer.ack, setup=fresh_cursor)
    acks = consumer.subscription.cursors[0].acks  # seek gave the cursor a new AckSet
    assert acks.floor + acks.individual_count == len(offsets)  # the floor moves over a leading run of acks
    consumer.close()


# ---------------------------------------------------------------------------------------------------------
# 2. One Consumer.ack(message) call per message

@pytest.fixture(scope="module")
def messages(acks_log, scale):
    _, topic, _ = acks_log
    with topic.reader("earliest") as reader:
        return list(islice(reader, scale(1_000_000, 10_000)))


def test_set_add_loop(bench, messages):
    def add_all(s):
        add = s.add
        for m in messages:
            add((m.partition, m.offset))
        return s

    bench.baseline(ACK_ONE, "s.add((m.partition, m.offset)) loop", messages=len(messages), unit="ack")
    assert len(bench.run(add_all, setup=lambda: (set(),))) == len(messages)


def test_ack_message_loop(bench, acks_log, messages):
    _, topic, _ = acks_log
    consumer = _consumer(topic, "single")

    def ack_all():
        ack = consumer.ack
        for m in messages:
            ack(m)

    bench.seglog(ACK_ONE, "Consumer.ack(message) loop", messages=len(messages), unit="ack", min_rate=1.5e6)
    bench.run(ack_all, setup=lambda: _reset(consumer))
    assert consumer.subscription.cursors[0].acks.floor == len(messages)
    consumer.close()


# ---------------------------------------------------------------------------------------------------------
# 3. Backlog figures of a subscription with 1M scattered individual acks

@pytest.fixture(scope="module")
def backlog_state(scratch, scale):
    """(topic with one subscription holding the scattered acks, its AckSet, the same acks as a bool array)."""
    messages, chunk = scale(2_000_000, 20_000), scale(65_536, 4_096)
    with seglog.open(scratch / "backlog", clock=seglog.ManualClock(), **QUIET) as log:
        topic = log.create_topic("backlog")
        _produce(topic, messages, chunk)
        offsets = np.random.default_rng(0xBAC).permutation(messages)[:messages // 2].astype(np.int64)
        consumer = _consumer(topic, "backlog")
        consumer.ack(offsets)
        acked = np.zeros(messages, dtype=bool)
        acked[offsets] = True
        yield topic, consumer.subscription.cursors[0].acks, acked
        consumer.close()


def test_count_nonzero(bench, backlog_state):
    _, _, acked = backlog_state

    def count():
        for _ in range(BACKLOG_CALLS):
            unacked = len(acked) - np.count_nonzero(acked)
        return unacked

    bench.baseline(BACKLOG, "len(acked) - np.count_nonzero(acked)", messages=BACKLOG_CALLS, unit="call")
    assert bench.run(count) == len(acked) // 2 + len(acked) % 2


def test_partition_backlog(bench, backlog_state):
    topic, acks, acked = backlog_state
    view = topic.partition_view(0)
    table = view.facts.table()

    def backlogs():
        for _ in range(BACKLOG_CALLS):
            backlog = partition_backlog(view, table, acks)
        return backlog

    bench.seglog(BACKLOG, "partition_backlog(view, table, acks)", messages=BACKLOG_CALLS, unit="call",
                 min_rate=1000)
    backlog = bench.run(backlogs)
    assert backlog.messages == len(acked) - np.count_nonzero(acked)
    assert 0 < backlog.bytes < table.total_size


def test_topic_stats(bench, backlog_state):
    topic, _, acked = backlog_state

    def stats():
        for _ in range(BACKLOG_CALLS):
            result = topic.stats()
        return result

    bench.seglog(BACKLOG, "topic.stats(), the whole dict", messages=BACKLOG_CALLS, unit="call")
    result = bench.run(stats, rounds=3)
    assert result["subscriptions"]["backlog"]["msgBacklog"] == len(acked) - np.count_nonzero(acked)


# ---------------------------------------------------------------------------------------------------------
# 4. The maintenance pass over 10,000 segments and 100 subscriptions

@pytest.fixture(scope="module")
def maintained(scratch, scale):
    """(log, directory, clock, segments) of one partition of many segments and subscriptions, after one
    untimed maintenance pass."""
    segments, subscriptions = scale(10_000, 200), scale(100, 10)
    path, clock = scratch / "maintenance", seglog.ManualClock()
    with seglog.open(path, clock=clock, **QUIET) as log:
        log.admin.namespaces.set_retention(NAMESPACE, time=-1, size=-1)
        log.admin.namespaces.set_message_ttl(NAMESPACE, "1h")
        log.admin.namespaces.set_backlog_quota(NAMESPACE, limit="1G", policy="consumer_backlog_eviction")
        log.admin.namespaces.set_backlog_quota(NAMESPACE, limit_time="1h", policy="consumer_backlog_eviction",
                                               type="message_age")
        topic = log.create_topic("segments", segment_size=MIN_SEGMENT_SIZE, segment_max_messages=1,
                                 retention_time="30d", max_partition_size="1G")
        # Subscriptions spread over the partition: each is made at the end offset of the moment, before
        # the next share of segments is written (made at the end, each would list all the segments twice).
        records = np.zeros((segments // subscriptions, RECORD_BYTES), dtype=np.uint8)
        with topic.producer() as producer:
            for i in range(subscriptions):
                topic.subscribe(f"sub-{i:03d}", initial_position="latest").close()
                producer.send_batch(records)
        directory = topic.partition_directory(0)
        floors = [cursor["markDeletePosition"] + 1 for cursor in
                  topic.internal_stats()["partitions"]["0"]["cursors"].values()]
        assert floors == [i * len(records) for i in range(subscriptions)]
        assert topic.stats()["partitions"]["0"]["segments"] >= segments
        _check_untouched(log.run_maintenance())
        yield log, directory, clock, segments, subscriptions


def _check_untouched(report) -> None:
    assert not report.deleted_segments and not report.expired and not report.evicted, report
    assert not report.skipped_partitions, report


def test_listdir_stat(bench, maintained):
    _, directory, _, segments, _ = maintained

    def scan():
        return [os.stat(os.path.join(directory, name)) for name in os.listdir(directory)]

    bench.baseline(MAINTENANCE, "os.listdir + os.stat of every file", messages=1, unit="pass")
    assert len(bench.run(scan)) >= 3 * segments


def test_maintenance_warm(bench, maintained):
    log, directory, _, _, subscriptions = maintained
    # A directory changed in the last second is listed again on every pass (see PartitionView.rescan);
    # the next group measures that case.
    while time.time_ns() - os.stat(directory).st_mtime_ns <= MTIME_SETTLED_NS:
        time.sleep(0.1)
    bench.seglog(MAINTENANCE, "log.run_maintenance(), warm", messages=1, unit="pass", min_rate=20)
    _check_untouched(bench.run(log.run_maintenance))
    assert len(log.topic("segments").subscriptions()) == subscriptions


def test_maintenance_after_a_roll(bench, maintained):
    log, _, _, _, _ = maintained
    record = np.zeros((1, RECORD_BYTES), dtype=np.uint8)
    with log.topic("segments").producer() as producer:
        def roll():
            producer.send_batch(record)

        bench.seglog(MAINTENANCE, "log.run_maintenance(), warm, after a roll", messages=1, unit="pass",
                     min_rate=20)
        bench.note("a segment created just before each pass: the directory is listed again")
        _check_untouched(bench.run(log.run_maintenance, setup=roll))


def test_maintenance_cold(bench, maintained):
    log, _, clock, _, _ = maintained

    def fresh_log():
        return (seglog.open(log.path, clock=clock, **QUIET),)

    bench.seglog(MAINTENANCE, "log.run_maintenance(), cold (fresh open)", messages=1, unit="pass")
    bench.note("the first pass of a newly opened log: every sealed segment's facts read once")
    _check_untouched(bench.run(lambda fresh: fresh.run_maintenance(), setup=fresh_log,
                               teardown=lambda fresh: fresh.close()))


# ---------------------------------------------------------------------------------------------------------
# 5. Consuming a shared subscription against reading the same topic

@pytest.mark.parametrize("group, max_messages", [(CONSUME_WHOLE, None), (CONSUME_1000, 1000)])
def test_reader_read_batch(bench, acks_log, group, max_messages):
    _, topic, _ = acks_log

    def read_all(reader):
        total = 0
        while (batch := reader.read_batch(max_messages)) is not None:
            total += batch.num_rows
        return total

    bench.baseline(group, "Reader.read_batch(), verify_crc=False", messages=topic.end_offset())
    assert bench.run(read_all, setup=lambda: (topic.reader("earliest", verify_crc=False),),
                     teardown=lambda reader: reader.close()) == topic.end_offset()


@pytest.mark.parametrize("group, max_messages", [(CONSUME_WHOLE, None), (CONSUME_1000, 1000)])
def test_receive_batch_shared(bench, acks_log, group, max_messages):
    _, topic, _ = acks_log
    consumer = _consumer(topic, "shared", "shared")

    def receive_all():
        total = 0
        while (batch := consumer.receive_batch(max_messages)) is not None:
            total += batch.num_rows
        return total

    bench.seglog(group, "Consumer.receive_batch(), shared subscription", messages=topic.end_offset())
    assert bench.run(receive_all, setup=lambda: _reset(consumer)) == topic.end_offset()
    consumer.close()
