"""Structured Streaming: read limits, triggers, restart from a checkpoint, the subscription commit, data
loss; and the streaming sink."""

from __future__ import annotations

import json

import pytest

import seglog
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.stream_reader import SeglogStreamReader, rate_limited

from .test_spark_read import make_topic


def produce(path, name, values, partition=0):
    with seglog.open(path) as log, log.topic(name).producer() as producer:
        producer.send_batch(values, partition=partition)


def stream(spark, path, topic="events", **options):
    reader = spark.readStream.format("seglog").option("path", str(path)).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df, checkpoint, output):
    """Run the query to the end of what is there now, appending its rows to a Parquet folder; returns the
    rows of each micro-batch."""
    query = (df.writeStream.format("parquet").option("path", str(output))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return [progress["numInputRows"] for progress in query.recentProgress if progress["numInputRows"]]


def test_rate_limit_shares_max_offsets_in_proportion_to_what_waits():
    assert rate_limited({0: 0, 1: 0}, {0: 300, 1: 100}, 100) == {0: 75, 1: 25}
    assert rate_limited({0: 0, 1: 0}, {0: 1_000_000, 1: 1}, 100) == {0: 100, 1: 1}  # none starves
    assert rate_limited({0: 0, 1: 0, 2: 0}, {0: 1, 1: 1, 2: 1}, 2) == {0: 1, 1: 1, 2: 1}
    assert rate_limited({0: 5, 1: 0}, {0: 10, 1: 3}, 100) == {0: 10, 1: 3}
    ends = rate_limited({0: 0, 1: 0}, {0: 7, 1: 7}, 5)
    assert sum(ends.values()) == 5


def test_offsets_are_json_per_partition_in_a_stable_order(tmp_path):
    make_topic(tmp_path, partitions=12, messages=120)
    reader = SeglogStreamReader(SourceOptions.parse({"path": str(tmp_path), "topic": "events",
                                                     "startingOffsets": "earliest"}, streaming=True))
    start = reader.initialOffset()
    assert json.dumps(start) == json.dumps({"events": {str(p): 0 for p in range(12)}})
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert list(end["events"]) == [str(p) for p in range(12)] and set(end["events"].values()) == {10}
    # the same range planned twice reads the same rows
    first = [b.column("offset").to_pylist() for piece in reader.partitions(start, end) for b in reader.read(piece)]
    produce(tmp_path, "events", [b"more"] * 5)
    again = [b.column("offset").to_pylist() for piece in reader.partitions(start, end) for b in reader.read(piece)]
    assert first == again and sum(map(len, first)) == 120


def test_available_now_with_max_offsets_per_trigger_then_restart_from_the_checkpoint(spark, tmp_path):
    data, checkpoint, output = tmp_path / "data", tmp_path / "checkpoint", tmp_path / "out"
    make_topic(data, messages=1000)
    df = stream(spark, data, startingOffsets="earliest", maxOffsetsPerTrigger="300")
    assert run_available_now(df, checkpoint, output) == [300, 300, 300, 100]
    produce(data, "events", [b"later-%d" % i for i in range(250)], partition=1)
    assert run_available_now(df, checkpoint, output) == [250]
    rows = spark.read.parquet(str(output)).select("partition", "offset").collect()
    assert len(rows) == 1250  # no gap and no duplicate across the restart
    assert sorted((r.partition, r.offset) for r in rows) == (
        [(0, o) for o in range(500)] + [(1, o) for o in range(750)])


def test_processing_time_trigger_reads_what_arrives(spark, tmp_path):
    data = tmp_path / "data"
    make_topic(data, partitions=1, messages=10)
    query = (stream(spark, data, startingOffsets="earliest").writeStream.format("memory").queryName("arrivals")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="200 milliseconds")
             .start())
    try:
        query.processAllAvailable()
        produce(data, "events", [b"new"] * 5)
        query.processAllAvailable()
        assert spark.sql("select count(*) as n from arrivals").first().n == 15
    finally:
        query.stop()


def test_latest_is_the_streaming_default(spark, tmp_path):
    data = tmp_path / "data"
    make_topic(data, partitions=1, messages=10)
    query = (stream(spark, data).writeStream.format("memory").queryName("from_latest")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).start())
    try:
        query.processAllAvailable()
        produce(data, "events", [b"after"] * 3)
        query.processAllAvailable()
        assert [bytes(r.value) for r in spark.sql("select value from from_latest").collect()] == [b"after"] * 3
    finally:
        query.stop()


def test_the_subscription_is_acknowledged_up_to_what_spark_committed(spark, tmp_path):
    data, checkpoint, output = tmp_path / "data", tmp_path / "checkpoint", tmp_path / "out"
    make_topic(data, partitions=1, messages=100)
    df = stream(spark, data, startingOffsets="earliest", maxOffsetsPerTrigger="40", subscription="spark")

    def backlog():
        with seglog.open(data) as log:
            return log.topic("events").stats()["subscriptions"]["spark"]["msgBacklog"]

    assert run_available_now(df, checkpoint, output) == [40, 40, 20]
    # Spark commits a batch when it plans the next: the last batch (offsets 80..99) is not committed yet
    assert backlog() == 20
    produce(data, "events", [b"x"] * 10)
    assert run_available_now(df, checkpoint, output) == [10]
    assert backlog() == 10  # never acknowledged before Spark committed


def test_data_deleted_before_spark_read_it_fails_the_query_or_is_skipped(spark, tmp_path):
    clock = seglog.ManualClock()
    data = tmp_path / "data"
    with seglog.open(data, clock=clock) as log:
        topic = log.create_topic("events", segment_max_messages=10, retention_time="1h")
        with topic.producer() as producer:
            for i in range(5):
                producer.send_batch([b"m%d" % (10 * i + j) for j in range(10)])
        clock.advance(hours=2)
        assert len(log.run_maintenance().deleted_segments) == 4  # offsets 0..39 gone, 40..49 kept
    starting = '{"events": {"0": 0}}'
    with pytest.raises(Exception, match="offsets 0 to 39 were deleted.*failOnDataLoss"):
        stream(spark, data, startingOffsets=starting).writeStream.format("memory").queryName("lossy") \
            .option("checkpointLocation", str(tmp_path / "c1")).trigger(availableNow=True).start().awaitTermination()
    assert run_available_now(stream(spark, data, startingOffsets=starting, failOnDataLoss="false"),
                             tmp_path / "c2", tmp_path / "out") == [10]
    with pytest.raises(Exception, match="offsets 0 to 39 were deleted"):
        spark.read.format("seglog").option("path", str(data)).option("topic", "events") \
            .option("startingOffsets", starting).load().collect()
    batch = spark.read.format("seglog").option("path", str(data)).option("topic", "events") \
        .option("startingOffsets", starting).option("failOnDataLoss", "false").load()
    assert sorted(r.offset for r in batch.collect()) == list(range(40, 50))


def test_ending_offsets_are_refused_in_a_stream(spark, tmp_path):
    make_topic(tmp_path)
    with pytest.raises(Exception, match="invalid endingOffsets.*only in batch queries"):
        stream(spark, tmp_path, endingOffsets="latest").writeStream.format("memory").queryName("never") \
            .option("checkpointLocation", str(tmp_path / "c")).start().awaitTermination()


def test_a_subscription_ahead_of_the_query_start_is_moved_back_to_it(spark, tmp_path):
    data = tmp_path / "data"
    make_topic(data, partitions=1, messages=50)
    with seglog.open(data) as log:
        topic = log.topic("events")
        topic.subscribe("spark", initial_position="latest").close()  # everything acknowledged
        assert topic.stats()["subscriptions"]["spark"]["msgBacklog"] == 0
    reader = SeglogStreamReader(SourceOptions.parse({"path": str(data), "topic": "events", "subscription": "spark",
                                                     "startingOffsets": "earliest"}, streaming=True))
    assert reader.initialOffset() == {"events": {"0": 0}} == reader.initialOffset()
    with seglog.open(data) as log:
        assert log.topic("events").stats()["subscriptions"]["spark"]["msgBacklog"] == 50
    reader.commit({"events": {"0": 20}})
    with seglog.open(data) as log:
        assert log.topic("events").stats()["subscriptions"]["spark"]["msgBacklog"] == 30
