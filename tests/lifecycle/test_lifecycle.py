"""The lifecycle rules of docs/LIFECYCLE.md, with a manual clock moved by days: the worked examples,
retention's combinations, message TTL, backlog-quota eviction, segment eviction and minimum timestamp."""

import pytest

import seglog
from seglog.storage.segment import list_segments

MiB = 1 << 20
KiB = 1 << 10
VALUE = b"v" * 1000


def write_mib(topic, mib: float, *, timestamp=None):
    """Write about `mib` MiB of 1000-byte values in 64-value batches (each about 64 KB on disk)."""
    count = int(mib * MiB / 1024)
    with topic.producer() as producer:
        for start in range(0, count, 64):
            n = min(64, count - start)
            producer.send_batch([VALUE] * n, timestamps=None if timestamp is None else [timestamp] * n)


def segments(topic, partition=0):
    return list_segments(topic.partition_directory(partition))


def test_worked_example_retention_time_7_days(log, clock):
    topic = log.create_topic("fluvio", segment_size="1 MiB", retention_time="7 days")
    write_mib(topic, 2.5)
    assert len(segments(topic)) == 3
    clock.advance(days=6)
    write_mib(topic, 2)
    day0 = segments(topic)
    assert len(day0) == 5
    clock.advance(days=1)  # day 7: segments 0 and 1 were last written on day 0
    report = log.run_maintenance()
    assert segments(topic) == day0[2:]
    assert [base for _, _, base in report.deleted_segments] == day0[:2]
    clock.advance(days=7)  # day 14: segments 2 and 3 were last written on day 6
    log.run_maintenance()
    assert segments(topic) == day0[4:]  # the active segment stays, though last written on day 6
    assert topic.earliest_offset() == day0[4]


def test_worked_example_max_partition_size(log):
    topic = log.create_topic("bounded", segment_size="1 MiB", max_partition_size="3 MiB")
    write_mib(topic, 2.5)
    before = segments(topic)
    log.run_maintenance()
    assert segments(topic) == before  # 2.5 MiB: within the limit
    write_mib(topic, 0.6)
    assert len(segments(topic)) == 4
    log.run_maintenance()
    assert segments(topic) == segments(topic)[-3:] and segments(topic)[0] == before[1]


def test_max_partition_size_below_segment_size_is_refused(log):
    with pytest.raises(seglog.errors.InvalidArgumentError, match="max_partition_size.*segment_size"):
        log.create_topic("bad", segment_size="10 MiB", max_partition_size="1 MiB")
    assert "public/default/bad" not in log.list_topics()


def test_segment_eviction_moves_cursors_and_counts_evicted(log, clock):
    topic = log.create_topic("evict", segment_size="1 MiB", retention_time="1h")
    consumer = topic.subscribe("slow", initial_position="earliest")
    write_mib(topic, 2.5)
    first_kept = segments(topic)[2]
    clock.advance(hours=1)
    log.run_maintenance()
    assert topic.earliest_offset() == first_kept
    stats = topic.stats()["subscriptions"]["slow"]
    assert stats["msgEvicted"] == first_kept
    assert consumer.receive(timeout=1).offset == first_kept  # skipped messages are never delivered


def test_nothing_is_deleted_at_open_close_or_roll(tmp_path, clock):
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("t", segment_size="1 MiB", retention_time="1h")
        write_mib(topic, 2.5)
    clock.advance(days=2)
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.topic("t")
        write_mib(topic, 1)  # rolls
        assert len(segments(topic)) == 4
        log.run_maintenance()
        assert len(segments(topic)) == 2  # the old three go, the segment sealed today and the active stay


@pytest.mark.parametrize("time, size, kept", [
    (-1, -1, 3),       # infinite: every sealed segment stays
    (0, 0, 1),         # no retention: every acknowledged sealed segment goes at once
    ("1h", -1, 3),     # time only, not yet reached
    (-1, "1M", 2),        # size only: the oldest acknowledged segment goes while they hold more
])
def test_retention_combinations_for_a_topic_without_subscriptions(log, time, size, kept):
    log.admin.namespaces.set_retention("public/default", time=time, size=size)
    topic = log.create_topic("r", segment_size="1 MiB")
    write_mib(topic, 2.5)
    log.run_maintenance()
    assert len(segments(topic)) == kept


def test_retention_time_deletes_acknowledged_segments_once_reached(log, clock):
    log.admin.namespaces.set_retention("public/default", time="3h", size=-1)
    topic = log.create_topic("r", segment_size="1 MiB")
    write_mib(topic, 2.5)
    clock.advance(hours=3, seconds=-1)
    log.run_maintenance()
    assert len(segments(topic)) == 3
    clock.advance(seconds=1)
    log.run_maintenance()
    assert len(segments(topic)) == 1


def test_retention_zero_with_a_limit_is_refused_and_changes_nothing(log):
    log.admin.namespaces.set_retention("public/default", time="3h", size="1G")
    for time, size in ((0, "1G"), ("3h", 0)):
        with pytest.raises(seglog.errors.InvalidArgumentError, match="retention"):
            log.admin.namespaces.set_retention("public/default", time=time, size=size)
    assert log.admin.namespaces.get_retention("public/default") == {
        "retentionTimeInMinutes": 180, "retentionSizeInMB": 1024}


def test_retention_never_deletes_unacknowledged_messages(log, clock):
    log.admin.namespaces.set_retention("public/default", time=0, size=0)
    topic = log.create_topic("r", segment_size="1 MiB")
    consumer = topic.subscribe("s", initial_position="earliest")
    write_mib(topic, 2.5)
    clock.advance(days=365)
    log.run_maintenance()
    assert len(segments(topic)) == 3
    second = segments(topic)[1]
    consumer.ack_cumulative(second - 1)  # the first segment is acknowledged now
    log.run_maintenance()
    assert segments(topic)[0] == second
    explained = topic.explain_retention()["partitions"]["0"]
    assert explained[0]["rule"] == "backlog" and "'s'" in explained[0]["reason"]
    assert explained[-1]["rule"] == "active"


def test_explain_names_the_rule_and_time_of_the_next_deletion(log, clock):
    topic = log.create_topic("x", segment_size="1 MiB", retention_time="2d")
    write_mib(topic, 1.5)
    written_at = clock()
    fates = topic.explain_retention()["partitions"]["0"]
    assert fates[0]["deletedAtMs"] == written_at + 2 * 86_400_000
    assert fates[0]["deletedNextPass"] is False
    clock.advance(days=2)
    fates = topic.explain_retention()["partitions"]["0"]
    assert fates[0]["deletedNextPass"] is True and fates[0]["rule"] == "retention_time"


@pytest.mark.parametrize("timestamp_type", ["create_time", "log_append_time"])
def test_retention_min_timestamp(log, clock, timestamp_type):
    topic = log.create_topic("kafka", segment_size="1 MiB", timestamp_type=timestamp_type)
    consumer = topic.subscribe("s", initial_position="earliest")
    stamp = clock() if timestamp_type == "log_append_time" else 1_000
    write_mib(topic, 1.5, timestamp=1_000)
    clock.advance(hours=1)
    write_mib(topic, 1.5, timestamp=5_000)
    before = segments(topic)
    log.run_maintenance()
    assert segments(topic) == before  # 0: off
    minimum = (clock() if timestamp_type == "log_append_time" else 5_000)
    log.admin.topics.set_config("kafka", retention_min_timestamp=minimum)
    log.run_maintenance()
    assert segments(topic)[0] > before[0]
    assert stamp  # both timestamp types delete whole segments below the minimum, acknowledged or not
    assert topic.stats()["subscriptions"]["s"]["msgEvicted"] > 0
    del consumer


def test_message_ttl_acknowledges_expired_messages(log, clock):
    log.admin.namespaces.set_message_ttl("public/default", 120)
    topic = log.create_topic("ttl")
    topic.subscribe("a", initial_position="earliest").close()
    with topic.producer() as producer:
        producer.send_batch([b"old"] * 10)
    clock.advance(seconds=60)
    with topic.producer() as producer:
        producer.send_batch([b"new"] * 5)
    clock.advance(seconds=61)  # the first ten are 121 s old, the others 61 s
    log.run_maintenance()
    stats = topic.stats()["subscriptions"]["a"]
    assert stats["msgBacklog"] == 5 and stats["msgExpired"] == 10
    consumer = topic.subscribe("a")
    assert consumer.receive(timeout=1).value == b"new"


def test_backlog_quota_eviction_skips_the_oldest_until_90_percent(log):
    log.admin.namespaces.set_backlog_quota("public/default", limit="1 MiB", policy="consumer_backlog_eviction")
    topic = log.create_topic("q", segment_size="1 MiB")
    topic.subscribe("slow", initial_position="earliest").close()
    write_mib(topic, 2)  # each send at or over the limit first evicts down to 90% of it
    stats = topic.stats()["subscriptions"]["slow"]
    assert 0.85 * MiB <= stats["backlogSize"] < MiB + 70 * KiB  # at most one batch over, as in Pulsar
    assert stats["msgEvicted"] > 0
    with topic.producer() as producer:
        producer.send_batch([VALUE] * 100)  # now over: evicted first, then accepted
    log.run_maintenance()
    stats = topic.stats()["subscriptions"]["slow"]
    assert stats["backlogSize"] < MiB
    reader = topic.reader("earliest")
    assert reader.read_batch().column("offset")[0].as_py() == 0  # still readable while retention keeps it


def test_backlog_quota_eviction_by_age(log, clock):
    log.admin.namespaces.set_backlog_quota("public/default", limit_time=3600, type="message_age",
                                           policy="consumer_backlog_eviction")
    topic = log.create_topic("q")
    topic.subscribe("slow", initial_position="earliest").close()
    with topic.producer() as producer:
        producer.send_batch([b"a"] * 3)
        clock.advance(minutes=30)
        producer.send_batch([b"b"] * 4)
    clock.advance(minutes=31)
    log.run_maintenance()
    assert topic.stats()["subscriptions"]["slow"]["msgBacklog"] == 4


def test_policy_levels_topic_over_namespace_over_broker(tmp_path, clock):
    with seglog.open(tmp_path, clock=clock, default_retention_time_minutes=60,
                     default_retention_size_mb=-1) as log:
        topic = log.create_topic("p")
        level = lambda: topic.stats()["policies"]["retention"]  # noqa: E731
        assert level() == {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1, "level": "broker"}
        log.admin.namespaces.set_retention("public/default", time="3h", size="10G")
        assert level()["level"] == "namespace" and level()["retentionTimeInMinutes"] == 180
        log.admin.topics.set_retention("p", time=-1, size=-1)
        assert level()["level"] == "topic" and level()["retentionTimeInMinutes"] == -1
        log.admin.topics.remove_retention("p")
        assert level()["level"] == "namespace"
        log.admin.namespaces.remove_retention("public/default")
        assert level()["level"] == "broker"


def test_fluvio_limits_act_as_the_topic_retention_unless_a_topic_policy_is_set(log):
    log.admin.namespaces.set_retention("public/default", time=0, size=0)
    topic = log.create_topic("f", segment_size="1 MiB", retention_time="7d")
    assert topic.stats()["policies"]["retention"]["level"] == "topic (retention_time / max_partition_size)"
    write_mib(topic, 2.5)
    log.run_maintenance()
    assert len(segments(topic)) == 3  # kept: 0/0 of the namespace does not apply
    log.admin.topics.set_retention("f", time=0, size=0)
    log.run_maintenance()
    assert len(segments(topic)) == 1


def test_broker_conf_file_sets_defaults_and_keywords_override_it(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "broker.conf").write_text("# Pulsar's default\ndefault_retention_time_minutes=0\n"
                                          "default_retention_size_mb=0\n")
    with seglog.open(tmp_path) as log:
        assert log.create_topic("a").stats()["policies"]["retention"]["retentionTimeInMinutes"] == 0
    with seglog.open(tmp_path, default_retention_time_minutes=5, default_retention_size_mb=-1) as log:
        assert log.topic("a").stats()["policies"]["retention"]["retentionTimeInMinutes"] == 5
    (tmp_path / "broker.conf").write_text("default_retention_time_minutes=0\ndefault_retention_size_mb=7\n")
    with pytest.raises(seglog.errors.InvalidArgumentError, match="retention"):
        seglog.open(tmp_path)


def test_stats_show_logical_and_physical_storage(log):
    topic = log.create_topic("s", segment_size="1 MiB")
    write_mib(topic, 1.5)
    stats = topic.stats()
    assert stats["storageSize"] == topic.storage_size()
    assert stats["physicalStorageSize"] >= stats["storageSize"]  # the active segment is pre-allocated


def test_a_log_opened_without_background_runs_no_housekeeper(tmp_path, clock):
    import threading

    def housekeepers():
        return sum(t.name == "seglog-housekeeper" for t in threading.enumerate())

    before = housekeepers()
    with seglog.open(tmp_path / "quiet", clock=clock, background=False) as log:
        assert housekeepers() == before
        log.create_topic("t")
        assert log.run_maintenance().deleted_segments == []  # maintenance still runs when asked
    with seglog.open(tmp_path / "busy", clock=clock):
        assert housekeepers() == before + 1


@pytest.mark.parametrize("reader_process", ["same", "other"])
def test_a_reader_goes_on_at_the_earliest_offset_after_its_segments_were_deleted(tmp_path, clock, reader_process):
    data = tmp_path / "data"
    with seglog.open(data, clock=clock, background=False) as log:
        topic = log.create_topic("deleted", segment_size="1 MiB", retention_time="1 day")
        write_mib(topic, 3.5)
        reader_log = log if reader_process == "same" else seglog.open(data, background=False)
        reader = reader_log.topic("deleted").reader("earliest")
        offsets = reader.read_batch(max_messages=10).column("offset").to_pylist()  # maps the first segment
        first_kept = segments(topic)[3]
        clock.advance(days=2)
        log.run_maintenance()
        assert segments(topic)[0] == first_kept
        for _ in range(10_000):  # bounded: the partition holds about 3,600 messages
            batch = reader.read_batch()
            if batch is None:
                break
            offsets.extend(batch.column("offset").to_pylist())
        end = topic.end_offset()
        if reader_process == "other":
            reader_log.close()
    # What was still mapped may be read to its end; then the reader jumps to the earliest retained offset,
    # counting what it skipped, and reads on to the end without an error.
    jump = offsets.index(first_kept)
    assert offsets == list(range(jump)) + list(range(first_kept, end))
    assert reader.skipped == first_kept - jump


def test_maintenance_skips_a_partition_reached_through_a_symbolic_link(log, clock, tmp_path):
    topic = log.create_topic("linked", segment_size="1 MiB", retention_time="1 day")
    write_mib(topic, 2.5)
    clock.advance(days=2)  # every sealed segment is past its retention
    partition = topic.partition_directory(0)
    outside = tmp_path / "elsewhere"
    partition.rename(outside)
    partition.symlink_to(outside, target_is_directory=True)
    before = {p.name: p.stat().st_size for p in outside.iterdir()}
    report = log.run_maintenance()
    assert report.deleted_segments == []
    ((name, number, why),) = report.skipped_partitions
    assert (name, number) == ("public/default/linked", 0) and f"{partition} is a symbolic link" in why
    assert {p.name: p.stat().st_size for p in outside.iterdir()} == before
