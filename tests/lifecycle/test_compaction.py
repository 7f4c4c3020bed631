"""Compaction (docs/LIFECYCLE.md, Compaction): a partition's compacted view holds each key's latest message
below its horizon with its own offset; read_compacted readers read it, then the log; a later compaction
merges the view with what came since; tombstones and keyless messages follow each model's rule."""

import os

import pytest

from seglog.errors import CorruptLogError
from seglog.lifecycle.compaction import CompactionRunningError, compact_partition
from seglog.storage.compacted import STATE_NAME, compacted_directory, read_state


def produce(topic, pairs, partition=0):
    with topic.producer() as producer:
        for key, value in pairs:
            producer.send(value, key=key, partition=partition)


def compacted(topic, partition=0):
    return [(m.offset, m.key, m.value) for m in topic.reader(partition=partition, read_compacted=True)]


def latest_per_key(topic, partition=0, below=None):
    """The reference: each key's latest message with a value, from a plain read of the log."""
    latest = {}
    for m in topic.reader(partition=partition):
        if m.key is not None and (below is None or m.offset < below):
            latest[m.key] = (m.offset, m.key, m.value)
    return sorted(v for v in latest.values() if v[2] is not None)


def compact(topic, partition=0, now_ms=0, delete_retention_ms=None, **kwargs):
    view = topic.partition_view(partition)
    return compact_partition(view, horizon=view.end_offset(), now_ms=now_ms, delete_retention_ms=delete_retention_ms,
                             **kwargs)


def test_the_view_keeps_each_keys_latest_value_with_its_offset(log):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0"), (b"b", b"b0"), (b"a", b"a1"), (b"c", b"c0"), (b"c", None), (None, b"no key"),
                    (b"e", b""), (b"b", b"b1")])
    outcome = compact(topic)
    assert (outcome.horizon, outcome.read, outcome.kept, outcome.removed) == (8, 8, 3, 5)
    # c's tombstone removed c; the keyless message is not in the view; b"" is a value
    assert compacted(topic) == [(2, b"a", b"a1"), (6, b"e", b""), (7, b"b", b"b1")]
    # a plain reader sees everything, the log is untouched (Pulsar's model)
    assert [m.offset for m in topic.reader()] == list(range(8))


def test_a_compacted_read_goes_on_in_the_log_past_the_horizon(log):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0"), (b"a", b"a1")])
    compact(topic)
    produce(topic, [(b"a", b"a2"), (None, b"keyless after")])
    assert compacted(topic) == [(1, b"a", b"a1"), (2, b"a", b"a2"), (3, None, b"keyless after")]
    reader = topic.reader(read_compacted=True)
    assert reader.read_batch().column("offset").to_pylist() == [1]
    assert reader.offset == 2
    assert reader.read_batch(max_messages=1).column("offset").to_pylist() == [2]


def test_the_next_compaction_merges_the_view_with_what_came_since(log):
    topic = log.create_topic("t", segment_size="4 KiB")
    produce(topic, [(f"k{i % 50}".encode(), f"v{i}".encode()) for i in range(400)])
    compact(topic)
    produce(topic, [(b"k1", b"newer"), (b"k2", None), (b"k99", b"new key")] +
            [(f"k{i % 7}".encode(), f"w{i}".encode()) for i in range(30)])
    outcome = compact(topic)
    assert outcome.previous_horizon == 400 and outcome.horizon == 433
    assert compacted(topic) == latest_per_key(topic)
    state = read_state(topic.partition_view(0).directory)
    assert (state.generation, state.horizon, state.records) == (2, 433, len(latest_per_key(topic)))
    assert sorted(os.listdir(compacted_directory(topic.partition_view(0).directory))) == \
        [".lock", "00000000000000000002.compacted", STATE_NAME]


def test_a_range_with_more_keys_than_the_map_holds_is_compacted_over_several_runs(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        for start in range(0, 300, 10):
            producer.send_batch([f"v{i}".encode() for i in range(start, start + 10)],
                                keys=[f"k{i % 100}".encode() for i in range(start, start + 10)], partition=0)
    horizons = []
    for _ in range(10):
        outcome = compact(topic, max_keys=40)
        horizons.append(outcome.horizon)
        if outcome.horizon == 300:
            break
    assert horizons[0] == 40 and horizons[-1] == 300 and horizons == sorted(horizons)
    assert compacted(topic) == latest_per_key(topic)


def test_a_batch_with_more_keys_than_the_map_holds_is_compacted_over_several_runs(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([f"v{i}".encode() for i in range(100)], keys=[f"k{i % 90}".encode() for i in range(100)],
                            partition=0)
    horizons = [compact(topic, max_keys=40).horizon for _ in range(5)]
    assert horizons[0] == 40 and horizons[-1] == 100
    assert compacted(topic) == latest_per_key(topic)


def test_a_partition_never_written_to_has_nothing_to_compact(log):
    log.create_topic("t", partitions=2)
    answer = log.admin.topics.compact("t")
    assert [p["kept"] for p in answer["partitions"]] == [0, 0]
    assert log.admin.topics.compaction_status("t") == {"status": "SUCCESS", "lastError": ""}


def test_kafkas_tombstones_stay_for_delete_retention_after_their_first_compaction(log):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0"), (b"a", None), (b"b", b"b0")])
    compact(topic, now_ms=1_000, delete_retention_ms=5_000)
    state = read_state(topic.partition_view(0).directory)
    assert (state.records, state.oldest_tombstone) == (2, 1)  # the tombstone is kept...
    assert compacted(topic) == [(2, b"b", b"b0")]           # ...but is no part of the compacted view
    produce(topic, [(b"c", b"c0")])
    compact(topic, now_ms=5_999, delete_retention_ms=5_000)
    assert read_state(topic.partition_view(0).directory).oldest_tombstone == 1
    compact(topic, now_ms=6_000, delete_retention_ms=5_000)  # nothing new: the tombstone's time has come
    state = read_state(topic.partition_view(0).directory)
    assert (state.records, state.oldest_tombstone, state.generation) == (2, -1, 3)


def test_pulsars_tombstones_leave_the_view_at_once(log):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0"), (b"a", None)])
    compact(topic)
    state = read_state(topic.partition_view(0).directory)
    assert (state.records, state.oldest_tombstone) == (0, -1) and compacted(topic) == []


def test_a_run_a_crash_cut_short_leaves_the_view_as_it_was(log):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0"), (b"a", b"a1")])
    compact(topic)
    directory = compacted_directory(topic.partition_view(0).directory)
    (directory / "00000000000000000002.compacted").write_bytes(b"half a batch")  # the next run, killed
    assert compacted(topic) == [(1, b"a", b"a1")]
    produce(topic, [(b"b", b"b0")])
    compact(topic)
    assert compacted(topic) == [(1, b"a", b"a1"), (2, b"b", b"b0")]


def test_a_reader_keeps_reading_while_a_compaction_replaces_the_view(log):
    topic = log.create_topic("t")
    produce(topic, [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)])
    compact(topic)
    reader = topic.reader(read_compacted=True)
    first = reader.read_messages(5)
    produce(topic, [(b"k19", b"v19 again")])
    compact(topic)  # the file the reader read from is removed
    rest = list(reader)
    assert [m.offset for m in first + rest] == list(range(19)) + [20]
    assert first[0].value == b"v0"


def test_a_damaged_view_is_reported_not_read(log):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0"), (b"b", b"b0")])
    compact(topic)
    directory = compacted_directory(topic.partition_view(0).directory)
    data = directory / "00000000000000000001.compacted"
    damaged = bytearray(data.read_bytes())
    damaged[-3] ^= 0xFF
    data.write_bytes(bytes(damaged))
    os.utime(directory / STATE_NAME, ns=(1, 1))  # (readers open the view again when its state changes)
    with pytest.raises(CorruptLogError, match="CRC32C"):
        compacted(topic)
    with pytest.raises(CorruptLogError, match="CRC32C"):
        compact(topic)


def test_one_compaction_of_a_partition_at_a_time(log, clock):
    topic = log.create_topic("t")
    produce(topic, [(b"a", b"a0")])
    from seglog.storage.lock import ExclusiveFileLock
    directory = compacted_directory(topic.partition_view(0).directory)
    directory.mkdir()
    held = ExclusiveFileLock(directory / ".lock")
    try:
        with pytest.raises(CompactionRunningError, match="a compaction of this partition is running"):
            compact(topic)
        assert log.admin.topics.compaction_status("t") == {"status": "NOT_RUN", "lastError": ""}
        with pytest.raises(CompactionRunningError):
            log.admin.topics.compact("t")
        status = log.admin.topics.compaction_status("t")
        assert status["status"] == "ERROR" and "a compaction of this partition is running" in status["lastError"]
        assert log.admin.topics.stats("t")["compaction"]["lastCompactionFailedTimestamp"] == log.admin.now_ms()
    finally:
        held.release()
    log.admin.topics.compact("t")
    assert log.admin.topics.compaction_status("t") == {"status": "SUCCESS", "lastError": ""}


def test_admin_compacts_every_partition(log):
    topic = log.create_topic("t", partitions=2)
    for partition in (0, 1):
        produce(topic, [(b"a", b"x"), (b"a", f"latest {partition}".encode())], partition=partition)
    answer = log.admin.topics.compact("t")
    assert [p["kept"] for p in answer["partitions"]] == [1, 1]
    assert [compacted(topic, p) for p in (0, 1)] == [[(1, b"a", b"latest 0")], [(1, b"a", b"latest 1")]]


def test_read_compacted_must_be_a_bool(log):
    topic = log.create_topic("t")
    with pytest.raises(Exception, match="read_compacted"):
        topic.reader(read_compacted="yes")


def test_the_kept_messages_of_consecutive_batches_share_compacted_batches(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        for call in range(20):
            producer.send_batch([b"v%d-%d" % (call, i) for i in range(10)],
                                keys=[b"k%d" % (call * 10 + i) for i in range(10)], partition=0)
        producer.send_batch([b"with properties"], keys=[b"p"], properties=[{"a": "b"}], partition=0)
        producer.send_batch([b"after"], keys=[b"q"], partition=0)
    compact(topic)
    state = read_state(topic.partition_view(0).directory)
    from seglog.storage.compacted import CompactedFile
    view = CompactedFile(compacted_directory(topic.partition_view(0).directory) / state.file_name, state)
    # 22 stored batches: the first 20 alike, then one with properties (other flags), then one alike again
    assert view.counts.tolist() == [200, 1, 1]
    assert compacted(topic) == latest_per_key(topic)


def test_a_large_batch_after_small_ones_is_compacted_whole(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        producer.send_batch([b"small"], keys=[b"s"], partition=0)
        producer.send_batch([b"x" * 100] * 100_000, keys=[b"k%d" % i for i in range(100_000)], partition=0)  # > 8 MiB
    outcome = compact(topic)
    assert outcome.kept == 100_001
    assert compacted(topic) == latest_per_key(topic)
