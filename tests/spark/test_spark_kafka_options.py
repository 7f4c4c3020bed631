"""The options of Spark's Kafka source: topics and topicsPattern, offsets by timestamp, endingTimestamp,
minOffsetsPerTrigger with maxTriggerDelay, the latest offsets in a stream's progress, and filters pushed down."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

import seglog
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.stream_reader import SeglogStreamReader

from .test_spark_read import make_topic
from .test_spark_stream import produce, run_available_now

BASE_MS = 1_700_000_000_000  # make_topic's first timestamp: message i at BASE_MS + i


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Topics the read-only cases share: events-a (2 partitions, 100 messages), events-b (1, 30), other (1, 5)
    in public/default, and acme/iot/sensor-1 (1, 10)."""
    data = tmp_path_factory.mktemp("kafka-options")
    make_topic(data, "events-a", partitions=2, messages=100)
    make_topic(data, "events-b", partitions=1, messages=30)
    make_topic(data, "other", partitions=1, messages=5)
    make_topic(data, "acme/iot/sensor-1", partitions=1, messages=10)
    return data


def read(spark, path, **options):
    reader = spark.read.format("seglog").option("path", str(path))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def counts(df):
    return {(r.topic, r.partition): r["count"] for r in df.groupBy("topic", "partition").count().collect()}


def test_topics_read_every_topic_listed_each_row_naming_its_topic(spark, shared):
    assert counts(read(spark, shared, topics=" events-a, events-b ,")) == {
        ("events-a", 0): 50, ("events-a", 1): 50, ("events-b", 0): 30}
    assert counts(read(spark, shared, topics="events-b,public/default/other")) == {
        ("events-b", 0): 30, ("public/default/other", 0): 5}


def test_a_topics_pattern_matches_whole_names_in_its_namespace(spark, shared):
    assert counts(read(spark, shared, topicsPattern="events-.*")) == {
        ("events-a", 0): 50, ("events-a", 1): 50, ("events-b", 0): 30}
    assert counts(read(spark, shared, topicsPattern="acme/iot/sensor-\\d+")) == {("acme/iot/sensor-1", 0): 10}
    assert read(spark, shared, topicsPattern="events").count() == 0  # a whole name, not a part of one
    assert read(spark, shared, topicsPattern="sensor-.*").count() == 0  # public/default's only


def test_offsets_json_names_each_topic_read(spark, shared):
    df = read(spark, shared, topicsPattern="events-.*",
              startingOffsets='{"events-a": {"0": 40, "1": -2}, "events-b": {"0": 25}}',
              endingOffsets='{"events-a": {"0": 45, "1": 3}, "events-b": {"0": -1}}')
    assert counts(df) == {("events-a", 0): 5, ("events-a", 1): 3, ("events-b", 0): 5}


@pytest.mark.parametrize(("options", "named", "accepted"), [
    ({}, "topic", "exactly one of the options topic"),
    ({"topic": "other", "topics": "events-a"}, "topic / topics", "exactly one of the options topic"),
    ({"topics": " , "}, "topics", "topics separated by commas"),
    ({"topicsPattern": "events-("}, "topicsPattern", "the regex does not compile"),
    ({"topicsPattern": "acme/events-.*"}, "topicsPattern", "'tenant/namespace/events-.*'"),
    ({"topics": "events-a,events-b", "startingOffsets": '{"events-a": {"0": 1, "1": 1}}'}, "startingOffsets",
     "one object per topic read, as given: for the topics 'events-a', 'events-b'"),
    ({"topicsPattern": "events-.*", "startingOffsets": '{"events-a": {"0": 1, "1": 1}}'}, "startingOffsets",
     "an object for every topic read and no other, as named by topicsPattern 'events-.*': events-a, events-b"),
    ({"topics": "events-a,events-b", "valueSchema": "topic"}, "valueSchema",
     "'binary' when several topics are read (topics 'events-a,events-b')"),
])
def test_bad_topic_options_fail_naming_the_option(spark, shared, options, named, accepted):
    with pytest.raises(Exception) as failure:
        read(spark, shared, **options).collect()
    assert f"invalid {named}" in str(failure.value) and accepted in str(failure.value)


def test_a_pattern_stream_reads_topics_and_partitions_added_later_from_their_earliest(spark, tmp_path):
    data, checkpoint, output = tmp_path / "data", tmp_path / "checkpoint", tmp_path / "out"
    make_topic(data, "logs-a", partitions=1, messages=20)
    df = (spark.readStream.format("seglog").option("path", str(data)).option("topicsPattern", "logs-.*")
          .option("startingOffsets", "earliest").load())
    assert run_available_now(df, checkpoint, output) == [20]
    make_topic(data, "logs-b", partitions=1, messages=7)  # a topic the pattern matches, created since
    make_topic(data, "not-logs", partitions=1, messages=3)
    with seglog.open(data) as log:
        log.admin.topics.update_partitions("logs-a", 2)  # and a partition added since
    produce(data, "logs-a", [b"new"] * 4, partition=1)
    produce(data, "logs-a", [b"more"] * 2, partition=0)
    assert run_available_now(df, checkpoint, output) == [13]
    rows = spark.read.parquet(str(output)).select("topic", "partition", "offset").collect()
    assert sorted(map(tuple, rows)) == sorted([("logs-a", 0, i) for i in range(22)] + [("logs-a", 1, i) for i in
                                              range(4)] + [("logs-b", 0, i) for i in range(7)])


def test_stream_offsets_hold_every_topic_and_a_subscription_on_each(tmp_path):
    make_topic(tmp_path, "logs-a", partitions=2, messages=10)
    make_topic(tmp_path, "logs-b", partitions=1, messages=4)
    reader = SeglogStreamReader(SourceOptions.parse({"path": str(tmp_path), "topics": "logs-b,logs-a",
                                                     "startingOffsets": "earliest", "subscription": "etl"},
                                                    streaming=True))
    start = reader.initialOffset()
    assert start == {"logs-a": {"0": 0, "1": 0}, "logs-b": {"0": 0}} and list(start) == ["logs-a", "logs-b"]
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"logs-a": {"0": 5, "1": 5}, "logs-b": {"0": 4}}
    reader.commit(end)
    with seglog.open(tmp_path) as log:
        assert [log.topic(t).stats()["subscriptions"]["etl"]["msgBacklog"] for t in ("logs-a", "logs-b")] == [0, 0]
    with pytest.raises(seglog.errors.InvalidArgumentError, match="invalid topics 'logs-b,logs-a'.*the topics of "
                                                                 "the query's checkpoint, elsewhere, logs-a"):
        reader.latestOffset({"logs-a": {"0": 0, "1": 0}, "elsewhere": {"0": 1}}, reader.getDefaultReadLimit())


def test_offsets_by_timestamp_start_each_partition_at_its_first_message_at_or_after_its_time(spark, shared):
    df = read(spark, shared, topics="events-a,events-b",
              startingOffsetsByTimestamp=f'{{"events-a": {{"0": {BASE_MS + 10}, "1": {BASE_MS}}}, '
                                         f'"events-b": {{"0": {BASE_MS + 29}}}}}')
    assert counts(df) == {("events-a", 0): 45, ("events-a", 1): 50, ("events-b", 0): 1}
    # startingTimestamp over startingOffsetsByTimestamp over startingOffsets, as in Spark
    df = read(spark, shared, topic="events-a", startingTimestamp=str(BASE_MS + 20), startingOffsets="earliest",
              startingOffsetsByTimestamp=f'{{"events-a": {{"0": {BASE_MS}, "1": {BASE_MS}}}}}')
    assert counts(df) == {("events-a", 0): 40, ("events-a", 1): 40}


def test_ending_timestamps_end_before_the_first_message_at_or_after_them_or_at_the_end(spark, shared):
    assert counts(read(spark, shared, topic="events-a", endingTimestamp=str(BASE_MS + 30))) == {
        ("events-a", 0): 15, ("events-a", 1): 15}
    df = read(spark, shared, topic="events-a", endingOffsets='{"events-a": {"0": 1, "1": 1}}',
              endingOffsetsByTimestamp=f'{{"events-a": {{"0": {BASE_MS + 10}, "1": {BASE_MS + 10**6}}}}}')
    assert counts(df) == {("events-a", 0): 5, ("events-a", 1): 50}  # none that recent in 1: latest
    df = read(spark, shared, topic="events-a", endingTimestamp=str(BASE_MS + 40),
              endingOffsetsByTimestamp=f'{{"events-a": {{"0": {BASE_MS}, "1": {BASE_MS}}}}}')
    assert counts(df) == {("events-a", 0): 20, ("events-a", 1): 20}


def test_a_starting_time_past_the_newest_message_fails_unless_the_strategy_is_latest(spark, shared):
    late = f'{{"events-a": {{"0": {BASE_MS}, "1": {BASE_MS + 10**6}}}}}'
    with pytest.raises(Exception, match="invalid startingOffsetsByTimestamp 'events-a'.*partitions 1 of "
                                        "public/default/events-a have none that recent"):
        read(spark, shared, topic="events-a", startingOffsetsByTimestamp=late).collect()
    df = read(spark, shared, topic="events-a", startingOffsetsByTimestamp=late,
              startingOffsetsByTimestampStrategy="latest")
    assert counts(df) == {("events-a", 0): 50}


@pytest.mark.parametrize(("options", "streaming", "named", "accepted"), [
    ({"startingOffsetsByTimestamp": f'{{"events-a": {{"0": {BASE_MS}}}}}'}, False, "startingOffsetsByTimestamp",
     "offsets for every partition of public/default/events-a: 0, 1"),
    ({"startingOffsetsByTimestamp": '{"events-a": {"0": "soon", "1": 0}}'}, False, "startingOffsetsByTimestamp",
     "naming every partition of every topic read, with ms since the epoch (not '0': 'soon')"),
    ({"endingOffsetsByTimestamp": "[]"}, False, "endingOffsetsByTimestamp", "ms since the epoch"),
    ({"endingTimestamp": "-5"}, False, "endingTimestamp", "an integer >= 0"),
    ({"endingTimestamp": str(BASE_MS)}, True, "endingTimestamp", "only in batch queries"),
    ({"endingOffsetsByTimestamp": '{"events-a": {"0": 0, "1": 0}}'}, True, "endingOffsetsByTimestamp",
     "only in batch queries"),
    ({"minOffsetsPerTrigger": "10"}, False, "minOffsetsPerTrigger", "only in streaming queries"),
    ({"maxTriggerDelay": "1m"}, False, "maxTriggerDelay", "only in streaming queries"),
    ({"minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"}, True, "minOffsetsPerTrigger",
     "at most maxOffsetsPerTrigger (10)"),
    ({"minOffsetsPerTrigger": "0"}, True, "minOffsetsPerTrigger", "an integer >= 1"),
    ({"minOffsetsPerTrigger": "5", "maxTriggerDelay": "5 parsecs"}, True, "maxTriggerDelay",
     "a duration: a number >= 0 and a unit"),
])
def test_bad_time_and_trigger_options_fail_naming_the_option(spark, shared, options, streaming, named, accepted):
    with pytest.raises(Exception) as failure:
        if streaming:
            (spark.readStream.format("seglog").options(path=str(shared), topic="events-a", **options).load()
             .writeStream.format("memory").queryName("refused").start().awaitTermination(60))
        else:
            read(spark, shared, topic="events-a", **options).collect()
    assert f"invalid {named}" in str(failure.value) and accepted in str(failure.value)


class ManualClock:
    """time.time's stand-in: seconds, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_min_offsets_per_trigger_waits_until_max_trigger_delay_passed_since_the_last_batch(tmp_path):
    make_topic(tmp_path, "t", partitions=2, messages=6)
    clock = ManualClock()
    reader = SeglogStreamReader(SourceOptions.parse({"path": str(tmp_path), "topic": "t", "startingOffsets":
                                                     "earliest", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger":
                                                     "12", "maxTriggerDelay": "1m"}, streaming=True), clock=clock)
    limit = reader.getDefaultReadLimit()
    first = reader.latestOffset(reader.initialOffset(), limit)
    assert first == {"t": {"0": 3, "1": 3}}  # the first micro-batch does not wait, as in Spark
    produce(tmp_path, "t", [b"x"] * 9)
    clock.now += 59
    assert reader.latestOffset(first, limit) == first  # 9 < 10 waiting, 59 s < 1 min: no micro-batch
    assert reader.reportLatestOffset() == {"t": {"0": 12, "1": 3}}  # what is there, though
    clock.now += 1
    second = reader.latestOffset(first, limit)
    assert second == {"t": {"0": 12, "1": 3}}  # the delay passed: what waits, however little
    produce(tmp_path, "t", [b"y"] * 20, partition=1)
    clock.now += 1
    assert reader.latestOffset(second, limit) == {"t": {"0": 12, "1": 15}}  # enough: at most 12 of them
    produce(tmp_path, "t", [b"z"] * 20, partition=1)
    assert reader.latestOffset(second, ReadAllAvailable()) == {"t": {"0": 12, "1": 43}}  # availableNow: all


def test_a_stream_waits_for_min_offsets_and_reports_the_latest_offsets_in_its_progress(spark, tmp_path):
    data = tmp_path / "data"
    make_topic(data, "t", partitions=1, messages=5)
    query = (spark.readStream.format("seglog").option("path", str(data)).option("topic", "t")
             .option("startingOffsets", "earliest").option("minOffsetsPerTrigger", "10")
             .option("maxTriggerDelay", "1h").load()
             .writeStream.format("memory").queryName("min_offsets").trigger(processingTime="100 milliseconds")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        assert spark.table("min_offsets").count() == 5
        produce(data, "t", [b"x"] * 3)
        query.processAllAvailable()
        assert spark.table("min_offsets").count() == 5  # 3 < 10: waiting (for up to an hour)
        produce(data, "t", [b"y"] * 7)
        query.processAllAvailable()
        assert spark.table("min_offsets").count() == 15
        source = [p for p in query.recentProgress if p["numInputRows"]][-1]["sources"][0]
        assert json.loads(source["endOffset"]) == json.loads(source["latestOffset"]) == {"t": {"0": 15}}
    finally:
        query.stop()


def test_progress_reports_the_latest_offsets_beside_the_rate_limited_end(spark, tmp_path):
    data = tmp_path / "data"
    make_topic(data, "t", partitions=1, messages=30)
    query = (spark.readStream.format("seglog").option("path", str(data)).option("topic", "t")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "10").load()
             .writeStream.format("memory").queryName("latest_offsets").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    query.awaitTermination()
    sources = [p["sources"][0] for p in query.recentProgress if p["numInputRows"]]
    assert [json.loads(s["endOffset"]) for s in sources] == [{"t": {"0": 10}}, {"t": {"0": 20}}, {"t": {"0": 30}}]
    assert all(json.loads(s["latestOffset"]) == {"t": {"0": 30}} for s in sources)  # 20 then 10 behind: lag is visible


@pytest.fixture
def pushdown(spark):
    """Spark's filter pushdown for Python data sources (spark.sql.python.filterPushdown.enabled, false by
    default), on for one test."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield spark
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_a_query_for_the_last_messages_by_time_plans_only_them(pushdown, shared):
    from pyspark.sql import functions as F
    since = dt.datetime.fromtimestamp((BASE_MS + 80) / 1000, dt.timezone.utc)
    df = read(pushdown, shared, topic="events-a", maxRecordsPerPartition="5")
    assert df.rdd.getNumPartitions() == 20
    recent = df.filter(F.col("timestamp") >= F.lit(since))
    assert recent.rdd.getNumPartitions() == 4  # offsets 40 to 49 of each partition: 2 splits each
    assert sorted(r.offset for r in recent.collect()) == [o for o in range(40, 50) for _ in range(2)]
    later = df.filter(F.col("timestamp") > F.lit(since))  # > t: from t + 1 ms on
    assert sorted(bytes(r.value) for r in later.collect()) == sorted(b"v%d" % i for i in range(81, 100))


def test_partition_offset_and_topic_filters_are_answered_by_the_plan(pushdown, shared):
    df = read(pushdown, shared, topicsPattern="events-.*", maxRecordsPerPartition="5")
    picked = df.filter("partition = 1 AND offset >= 10 AND offset < 20 AND topic = 'events-a'")
    assert picked.rdd.getNumPartitions() == 2
    assert sorted(r.offset for r in picked.collect()) == list(range(10, 20))
    assert df.filter("topic IN ('events-b')").rdd.getNumPartitions() == 6
    assert df.filter("offset IN (3, 41)").rdd.getNumPartitions() == 2 * 8 + 6  # offsets 3 to 41 of each
    assert sorted((r.topic, r.partition, r.offset) for r in df.filter("offset IN (3, 41)").collect()) == [
        ("events-a", 0, 3), ("events-a", 0, 41), ("events-a", 1, 3), ("events-a", 1, 41), ("events-b", 0, 3)]
    assert df.filter("offset > 10 AND offset <= 10").count() == 0


def test_without_pushdown_the_same_filters_give_the_same_rows(spark, shared):
    df = read(spark, shared, topic="events-a", maxRecordsPerPartition="5").filter("partition = 1 AND offset < 3")
    assert df.rdd.getNumPartitions() == 20 and sorted(r.offset for r in df.collect()) == [0, 1, 2]
