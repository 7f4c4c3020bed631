"""Compaction in the admin stats (issue 29): Pulsar's `compaction` section of TopicStats (CompactionStats) in
stats and in each partition's stats of partitioned-stats, seglog's compactionHorizon beside each partition's
offsets, and each partition's compacted view in internal stats, all read from the view's state on disk, so a
process that did not compact shows them too."""

from __future__ import annotations

from pathlib import Path

import seglog
from seglog.clock import ManualClock

NEVER = {"lastCompactionRemovedEventCount": 0, "lastCompactionSucceedTimestamp": 0,
         "lastCompactionFailedTimestamp": 0, "lastCompactionDurationTimeInMills": 0}


def produce(topic: seglog.Topic, pairs: list[tuple[bytes, bytes | None]], partition: int = 0) -> None:
    with topic.producer() as producer:
        for key, value in pairs:
            producer.send(value, key=key, partition=partition)


def test_a_topic_never_compacted(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "data", background=False) as log:
        produce(log.create_topic("plain"), [(b"k", b"v")])
        stats = log.admin.topics.stats("plain")
        assert stats["compaction"] == NEVER
        assert stats["partitions"]["0"]["compactionHorizon"] == 0
        assert log.admin.topics.internal_stats("plain")["partitions"]["0"]["compaction"] == {
            "horizon": 0, "generation": 0, "messages": 0, "size": 0, "lastRemoved": 0, "lastFinishedMs": 0,
            "lastDurationMs": 0}


def test_the_last_compaction_in_stats_and_internal_stats(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    with seglog.open(tmp_path / "data", clock=clock, background=False) as log:
        topic = log.create_topic("prices")
        produce(topic, [(b"apple", b"101"), (b"apple", b"99"), (b"pear", b"7"), (b"pear", None), (b"fig", b"1")])
        log.admin.topics.compact("prices")
    with seglog.open(tmp_path / "data", background=False) as log:  # (another process: the figures are on disk)
        stats = log.admin.topics.stats("prices")
        internal = log.admin.topics.internal_stats("prices")["partitions"]["0"]["compaction"]
    assert stats["partitions"]["0"]["compactionHorizon"] == 5
    assert internal["horizon"] == 5 and internal["generation"] == 1 and internal["messages"] == 2  # apple, fig
    assert internal["size"] > 0 and internal["lastRemoved"] == 3 and internal["lastFinishedMs"] == 1_700_000_000_000
    assert stats["compaction"] == {"lastCompactionRemovedEventCount": 3,
                                   "lastCompactionSucceedTimestamp": 1_700_000_000_000,
                                   "lastCompactionFailedTimestamp": 0,
                                   "lastCompactionDurationTimeInMills": internal["lastDurationMs"]}


def test_a_partitioned_topic_together_and_per_partition(tmp_path: Path) -> None:
    clock = ManualClock(1_000)
    with seglog.open(tmp_path / "data", clock=clock, background=False) as log:
        topic = log.create_topic("parted", partitions=3)
        produce(topic, [(b"a", b"1"), (b"a", b"2"), (b"a", b"3")], partition=0)
        produce(topic, [(b"z", b"1")], partition=1)
        produce(topic, [(b"b", b"1"), (b"c", b"2")], partition=2)
        log.admin.topics.compact("parted")
        clock.advance(500)
        produce(topic, [(b"b", b"3")], partition=2)
        log.admin.topics.compact("parted")  # partition 2 again, later; partition 0 has nothing new
        stats = log.admin.topics.partitioned_stats("parted", per_partition=True)
        seglog_stats = log.admin.topics.stats("parted")
    per_partition = {name.rsplit("-", 1)[1]: p["compaction"] for name, p in stats["partitions"].items()}
    assert per_partition["0"]["lastCompactionRemovedEventCount"] == 2
    assert per_partition["0"]["lastCompactionSucceedTimestamp"] == 1_000
    assert per_partition["1"]["lastCompactionRemovedEventCount"] == 0  # z alone: nothing left out
    assert per_partition["1"]["lastCompactionSucceedTimestamp"] == 1_000
    assert per_partition["2"]["lastCompactionRemovedEventCount"] == 1  # b's first value, at the second compaction
    assert per_partition["2"]["lastCompactionSucceedTimestamp"] == 1_500
    # every partition together: what they left out added up, the latest end
    assert stats["compaction"]["lastCompactionRemovedEventCount"] == 3
    assert stats["compaction"]["lastCompactionSucceedTimestamp"] == 1_500
    assert [seglog_stats["partitions"][p]["compactionHorizon"] for p in "012"] == [3, 1, 3]
