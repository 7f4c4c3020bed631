"""Compaction as a lifecycle rule (docs/LIFECYCLE.md, Compaction): Kafka's cleanup_policy=compact compacts the
log itself in the maintenance pass (by the injected clock), within min/max_compaction_lag and the dirty ratio,
keeping tombstones for delete_retention; Pulsar's compaction_threshold compacts beside the log."""

import pytest
from helpers_compaction import drain

from seglog.storage.compacted import read_state

MINUTE = 60_000


def produce(topic, pairs):
    """One batch per message (so the small segments roll often)."""
    with topic.producer(linger_ms=0) as producer:
        for key, value in pairs:
            producer.send(value, key=key, partition=0)
            producer.flush()


def plain(topic):
    return [(m.offset, m.key, m.value) for m in topic.reader()]


def compacted(topic):
    return [(m.offset, m.key, m.value) for m in topic.reader(read_compacted=True)]


def latest(pairs, *, tombstones):
    """Each key's latest message, by offset, from the messages as produced (offsets from 0)."""
    last = {}
    for offset, (key, value) in enumerate(pairs):
        last[key] = (offset, key, value)
    return sorted(v for v in last.values() if tombstones or v[2] is not None)


def kafka_topic(log, **settings):
    settings = {"segment_size": "1 KiB", "cleanup_policy": "compact", "min_cleanable_dirty_ratio": 0.5, **settings}
    return log.create_topic("t", **settings)


PAIRS = [(f"k{i % 5}".encode(), b"v%03d" % i) for i in range(20)] + [(b"k1", None)] + \
    [(f"k{i % 4 + 2}".encode(), b"w%03d" % i) for i in range(20)]


def test_a_compacted_topics_log_is_compacted_and_its_segments_go(log, clock):
    topic = kafka_topic(log)
    produce(topic, PAIRS)
    segments = len(topic.partition_view(0).bases)
    report = log.run_maintenance()
    [(name, partition, horizon, removed, reason)] = report.compactions
    view = topic.partition_view(0)
    assert name == "public/default/t" and horizon == view.bases[-1] and "dirty ratio" in reason
    assert len(report.deleted_segments) == segments - 1 and len(view.bases) == 1
    below = [p for p in PAIRS[:horizon]]
    # a plain reader sees each key's final state below the horizon, the tombstone too (Kafka keeps it), then
    # the log; a compacted reader sees the exact view, without the tombstone
    expected = latest(below, tombstones=True) + [(o, k, v) for o, (k, v) in enumerate(PAIRS) if o >= horizon]
    assert plain(topic) == expected
    assert compacted(topic)[:len(latest(below, tombstones=False))] == latest(below, tombstones=False)
    assert read_state(view.directory).log_compacted


def test_nothing_is_compacted_before_min_compaction_lag(log, clock):
    topic = kafka_topic(log, min_compaction_lag="10min")
    produce(topic, PAIRS)
    assert log.run_maintenance().compactions == []
    clock.advance(minutes=11)
    assert len(log.run_maintenance().compactions) == 1


def test_a_little_dirt_waits_for_the_dirty_ratio_or_max_compaction_lag(log, clock):
    topic = kafka_topic(log, max_compaction_lag="1h")
    produce(topic, [(b"key %d" % i, b"v" * 200) for i in range(60)])  # a view of 60 keys
    assert len(log.run_maintenance().compactions) == 1
    produce(topic, [(b"key 0", b"x" * 600), (b"key 0", b"y" * 600)])  # a little more than a segment
    assert log.run_maintenance().compactions == []  # dirty: well under half of what the view holds
    clock.advance(minutes=61)
    [(_, _, _, _, reason)] = log.run_maintenance().compactions
    assert "max_compaction_lag" in reason


def test_a_tombstone_stays_for_delete_retention_after_its_first_compaction(log, clock):
    topic = kafka_topic(log, delete_retention="1h")
    produce(topic, PAIRS)
    log.run_maintenance()
    assert (20, b"k1", None) in plain(topic)  # kept, and read by plain readers
    clock.advance(minutes=59)
    assert log.run_maintenance().compactions == []
    clock.advance(minutes=2)
    [(_, _, _, _, reason)] = log.run_maintenance().compactions
    assert "delete_retention" in reason
    assert [(o, k) for o, k, v in plain(topic) if v is None] == []


def test_compact_alone_keeps_what_retention_would_delete_compact_delete_does_not(log, clock):
    for policy, kept in (("compact", 30), ("compact,delete", 3)):  # (3: the active segment's)
        topic = log.create_topic(f"t-{policy.replace(',', '-')}", segment_size="1 KiB", cleanup_policy=policy,
                                 retention_time="1min", min_compaction_lag="1h")  # (not compacted yet)
        produce(topic, [(b"k%d" % i, b"v" * 200) for i in range(30)])
        clock.advance(minutes=5)
        log.run_maintenance()
        assert len(plain(topic)) == kept, policy


def test_a_plain_consumer_reads_the_view_where_the_log_was_compacted(log, clock):
    topic = kafka_topic(log)
    topic.subscribe("s", initial_position="earliest").close()
    produce(topic, PAIRS)
    log.run_maintenance()
    with topic.subscribe("s") as consumer:
        got = [(m.offset, m.key, m.value) for m in drain(consumer)]
    assert got == plain(topic)
    stats = log.admin.topics.stats("t")["subscriptions"]["s"]
    assert stats["msgBacklog"] == 0


def test_pulsars_compaction_threshold_compacts_beside_the_log(log, clock):
    topic = log.create_topic("t", segment_size="1 KiB")
    log.admin.topics.set_compaction_threshold("t", "2 KiB")
    produce(topic, PAIRS[:10])
    assert log.run_maintenance().compactions == []
    produce(topic, PAIRS[10:])
    [(_, _, horizon, _, reason)] = log.run_maintenance().compactions
    assert horizon == len(PAIRS) and "compaction_threshold" in reason
    assert len(plain(topic)) == len(PAIRS)  # the log is untouched
    assert compacted(topic) == latest(PAIRS, tombstones=False)


@pytest.mark.parametrize("policy", ["delete"])
def test_a_delete_topic_is_never_compacted_by_maintenance(log, clock, policy):
    topic = log.create_topic("t", segment_size="1 KiB", cleanup_policy=policy)
    produce(topic, PAIRS)
    assert log.run_maintenance().compactions == []
    assert read_state(topic.partition_view(0).directory) is None


def test_explain_retention_says_what_compaction_deletes_and_why(log, clock):
    topic = kafka_topic(log)
    produce(topic, PAIRS)
    before = log.admin.topics.explain_retention("t")
    fates = before["partitions"]["0"]
    assert before["cleanupPolicy"] == "compact"
    assert [f["rule"] for f in fates[:-1]] == ["compaction"] * (len(fates) - 1) and fates[-1]["rule"] == "active"
    assert all(f["deletedNextPass"] and "dirty ratio" in f["reason"] for f in fates[:-1])
    assert before["compaction"]["0"]["nextCompaction"]["horizon"] == fates[-1]["baseOffset"]
    report = log.run_maintenance()
    assert sorted(base for _, _, base in report.deleted_segments) == [f["baseOffset"] for f in fates[:-1]]
    after = log.admin.topics.explain_retention("t")["compaction"]["0"]
    assert after["logCompacted"] and after["horizon"] == fates[-1]["baseOffset"] and after["nextCompaction"] is None
    assert "deleted by compaction" in after["compactedBelowHorizon"]


def test_explain_retention_of_compact_alone_deletes_nothing_by_retention(log, clock):
    topic = log.create_topic("t", segment_size="1 KiB", cleanup_policy="compact", retention_time="1min",
                             min_compaction_lag="1h")
    produce(topic, [(b"k%d" % i, b"v" * 200) for i in range(30)])
    clock.advance(minutes=5)
    fates = log.admin.topics.explain_retention("t")["partitions"]["0"]
    assert not any(f["deletedNextPass"] for f in fates)
    assert {f["rule"] for f in fates[:-1]} == {"cleanup_policy"}


def test_repair_keeps_the_sound_part_of_a_damaged_view_that_stands_for_the_log(log, clock, tmp_path):
    from seglog.lifecycle.compacted_repair import repair_compacted_views
    from seglog.storage.compacted import compacted_directory

    topic = kafka_topic(log)
    produce(topic, [(b"key %d" % i, b"v%d" % i) for i in range(60)])
    log.run_maintenance()
    directory = topic.partition_view(0).directory
    state = read_state(directory)
    data = compacted_directory(directory) / state.file_name
    damaged = bytearray(data.read_bytes())
    damaged[-3] ^= 0xFF  # the last batch's CRC no longer matches
    data.write_bytes(bytes(damaged))
    report = repair_compacted_views([directory])
    assert len(report.salvaged_views) == 1 and report.removed_views == []
    salvaged = read_state(directory)
    assert salvaged.log_compacted and salvaged.horizon == state.horizon
    assert 0 < salvaged.records < state.records
    keys = [m.key for m in topic.reader()]
    assert keys[:salvaged.records] == [b"key %d" % i for i in range(salvaged.records)]


def test_a_reader_and_a_consumer_in_the_middle_go_on_in_the_view_when_compaction_deletes_their_segments(log, clock):
    topic = kafka_topic(log)
    topic.subscribe("s", initial_position="earliest").close()
    produce(topic, PAIRS)
    reader = topic.reader()
    first = reader.read_messages(3)
    consumer = topic.subscribe("s")
    taken = [consumer.receive(1) for _ in range(3)]
    for message in taken:
        consumer.ack(message)
    log.run_maintenance()  # compacts, and deletes the segments both are reading
    rest = list(reader)
    assert reader.skipped == 0
    seen = {m.key: m.value for m in first + rest}
    assert seen == {k: v for _, k, v in latest(PAIRS, tombstones=True)}
    got = taken + drain(consumer)
    consumer.close()
    assert {m.key: m.value for m in got} == seen
    stats = log.admin.topics.stats("t")["subscriptions"]["s"]
    assert (stats["msgBacklog"], stats["msgEvicted"]) == (0, 0)


def test_a_reader_of_another_open_goes_on_in_the_view_when_compaction_deletes_its_segments(log, clock, tmp_path):
    import seglog

    topic = kafka_topic(log)
    produce(topic, PAIRS)
    with seglog.open(tmp_path / "data") as other:  # (its own listing of the segments, as another process has)
        reader = other.topic("t").reader()
        first = reader.read_messages(1)
        log.run_maintenance()
        rest = list(reader)
        assert reader.skipped == 0
        assert {m.key: m.value for m in first + rest} == {k: v for _, k, v in latest(PAIRS, tombstones=True)}


def test_a_consumer_of_another_open_goes_on_in_the_view_when_compaction_deletes_its_segments(log, clock, tmp_path):
    import seglog

    topic = kafka_topic(log)
    topic.subscribe("s", initial_position="earliest").close()
    produce(topic, PAIRS)
    with seglog.open(tmp_path / "data") as other:
        consumer = other.topic("t").subscribe("s")
        got = [consumer.receive(1)]
        consumer.ack(got[0])
        log.run_maintenance()
        got += drain(consumer)
        consumer.close()
        assert {m.key: m.value for m in got} == {k: v for _, k, v in latest(PAIRS, tombstones=True)}
        assert other.admin.topics.stats("t")["subscriptions"]["s"]["msgEvicted"] == 0


def test_compact_delete_lets_retention_delete_compacted_messages_too(log, clock):
    for policy, kept in (("compact", True), ("compact,delete", False)):
        name = f"t-{policy.replace(',', '-')}"
        topic = log.create_topic(name, segment_size="1 KiB", cleanup_policy=policy, retention_time="1h")
        produce(topic, [(b"old %d" % i, b"v" * 100) for i in range(20)])
        log.run_maintenance()  # compacted: the keys' latest messages are in the view
        clock.advance(minutes=30)
        produce(topic, [(b"new %d" % i, b"w" * 100) for i in range(20)])
        clock.advance(minutes=45)  # the old keys' messages are 75 minutes old, the new ones' 45
        log.run_maintenance()
        keys = {m.key for m in topic.reader()}
        assert (b"old 0" in keys) == kept, policy
        assert b"new 0" in keys, policy
        assert {m.key for m in topic.reader(read_compacted=True)} == keys, policy
