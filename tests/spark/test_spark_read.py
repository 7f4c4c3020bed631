"""Batch reads: every column, offset ranges, split partitions, the planned snapshot, bad options."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import seglog
from pyspark_seglog.arrow_rows import ROWS
from pyspark_seglog.batch_reader import SeglogBatchReader
from pyspark_seglog.options import SourceOptions

from .conftest import spark_environment

UTC = dt.timezone.utc


def make_topic(path, name="events", partitions=2, messages=100, **config):
    """Messages i = 0..n-1: value b'v<i>', key b'k<i % 7>', timestamp 1.7e12 + i ms, property {'i': str(i)};
    even i to partition 0, odd to partition 1."""
    with seglog.open(path) as log:
        topic = log.create_topic(name, partitions=partitions, **config)
        with topic.producer() as producer:
            for p in range(partitions):
                rows = [i for i in range(messages) if i % partitions == p]
                producer.send_batch([b"v%d" % i for i in rows], keys=[b"k%d" % (i % 7) for i in rows],
                                    timestamps=[1_700_000_000_000 + i for i in rows],
                                    properties=[{"i": str(i)} for i in rows], partition=p)


def read(spark, path, topic="events", **options):
    reader = spark.read.format("seglog").option("path", str(path)).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_has_every_column_with_spark_types(spark, tmp_path):
    make_topic(tmp_path)
    df = read(spark, tmp_path)
    assert df.schema.simpleString() == ("struct<topic:string,partition:int,offset:bigint,timestamp:timestamp,"
                                        "key:binary,value:binary,properties:map<string,string>>")
    rows = sorted(df.collect(), key=lambda r: int(r.value[1:]))
    assert len(rows) == 100
    for i, row in enumerate(rows):
        assert (row.topic, row.partition, row.offset) == ("events", i % 2, i // 2)
        assert (bytes(row.key), bytes(row.value), row.properties) == (b"k%d" % (i % 7), b"v%d" % i, {"i": str(i)})
        assert row.timestamp.replace(tzinfo=UTC) == dt.datetime.fromtimestamp((1_700_000_000_000 + i) / 1000, UTC)


def test_null_values_read_as_nulls_apart_from_empty_values(spark, tmp_path):
    """A null value (format version 2, with its validity bitmap) beside version-1 batches of the same topic."""
    with seglog.open(tmp_path) as log:
        with log.create_topic("events", partitions=1).producer() as producer:
            producer.send_batch([b"a", b""])
            producer.send_batch([None, b"b", b""])
    rows = read(spark, tmp_path).orderBy("offset").collect()
    assert [None if r.value is None else bytes(r.value) for r in rows] == [b"a", b"", None, b"b", b""]


def test_offset_ranges_as_in_sparks_kafka_source(spark, tmp_path):
    make_topic(tmp_path)
    df = read(spark, tmp_path, startingOffsets='{"events": {"0": 10, "1": -2}}',
              endingOffsets='{"events": {"0": 20, "1": 5}}')
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
    df = read(spark, tmp_path, startingOffsets='{"events": {"0": 48, "1": 49}}', endingOffsets="latest")
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(0, 48), (0, 49), (1, 49)]


def test_starting_timestamp_starts_each_partition_at_its_first_message_at_or_after_it(spark, tmp_path):
    make_topic(tmp_path)
    df = read(spark, tmp_path, startingTimestamp=str(1_700_000_000_000 + 90))
    assert sorted(int(bytes(r.value)[1:]) for r in df.collect()) == list(range(90, 100))


def test_a_starting_timestamp_past_the_newest_message_may_start_at_the_end(spark, tmp_path):
    make_topic(tmp_path)
    df = read(spark, tmp_path, startingTimestamp=str(1_700_000_000_000 + 99),
              startingOffsetsByTimestampStrategy="latest")
    assert [int(bytes(r.value)[1:]) for r in df.collect()] == [99]  # partition 0 starts at its end


def test_a_schema_other_than_the_sources_is_refused(spark, tmp_path):
    make_topic(tmp_path)
    with pytest.raises(Exception, match="invalid schema 'struct<value:binary>'; accepted: the source's own"):
        spark.read.format("seglog").schema("value binary").option("path", str(tmp_path)) \
            .option("topic", "events").load().collect()


def test_max_records_per_partition_splits_a_partition_by_offset_range(spark, tmp_path):
    make_topic(tmp_path, partitions=1, messages=1000)
    df = read(spark, tmp_path, maxRecordsPerPartition="300")
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(1000))


def test_the_end_offsets_are_those_of_the_moment_the_read_is_planned(tmp_path):
    make_topic(tmp_path, partitions=1, messages=10)
    reader = SeglogBatchReader(SourceOptions.parse({"path": str(tmp_path), "topic": "events"}, streaming=False))
    planned = reader.partitions()
    with seglog.open(tmp_path) as log, log.topic("events").producer() as producer:
        producer.send_batch([b"later"] * 5)
    batches = [b for piece in planned for b in reader.read(piece)]
    assert sum(b.num_rows for b in batches) == 10
    assert all(b.schema.equals(ROWS) for b in batches)


def test_read_yields_batches_of_about_64k_rows_over_the_segment_buffers(tmp_path):
    with seglog.open(tmp_path) as log:
        topic = log.create_topic("events")
        with topic.producer() as producer:
            producer.send_batch([b"x" * 10] * 150_000)  # one stored batch: sliced
            for _ in range(100):
                producer.send_batch([b"y" * 10] * 1000)  # small ones: combined
    reader = SeglogBatchReader(SourceOptions.parse({"path": str(tmp_path), "topic": "events"}, streaming=False))
    sizes = [b.num_rows for piece in reader.partitions() for b in reader.read(piece)]
    assert sum(sizes) == 250_000 and max(sizes) <= 65_536 + 1000 and len(sizes) <= 5
    first, second = list(reader.read(reader.partitions()[0]))[:2]
    # slices of the stored batch: one data buffer, the stored batch's own 1.5 MB of values, not a copy
    assert first.column("value").buffers()[2].address == second.column("value").buffers()[2].address
    assert first.column("value").buffers()[2].size == 150_000 * 10


@pytest.mark.parametrize(("options", "named", "accepted"), [
    ({"startingOffsets": "soon"}, "startingOffsets", "'earliest', 'latest', or JSON"),
    ({"startingOffsets": '{"other": {"0": 1}}'}, "startingOffsets", "for the topic 'events'"),
    ({"startingOffsets": '{"events": {"0": 1}}'}, "startingOffsets", "offsets for every partition"),
    ({"startingOffsets": "latest"}, "startingOffsets", "'earliest' or offsets"),
    ({"endingOffsets": "earliest"}, "endingOffsets", "'latest' or offsets"),
    ({"maxRecordsPerPartition": "0"}, "maxRecordsPerPartition", "an integer >= 1"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss", "'true' or 'false'"),
    ({"topic": "nope"}, None, "topic public/default/nope does not exist"),
    ({"startingTimestamp": str(1_700_000_000_000 + 100)}, "startingTimestamp",
     "(partitions 0, 1 of public/default/events have none that recent)"),
    ({"startingOffsetsByTimestampStrategy": "skip"}, "startingOffsetsByTimestampStrategy", "'error' or 'latest'"),
    ({"subscription": "s"}, "subscription", "only in streaming queries"),
    ({"maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger", "only in streaming queries"),
])
def test_bad_options_fail_the_query_naming_the_option(spark, tmp_path, options, named, accepted):
    make_topic(tmp_path)
    options = {"topic": "events", **options}
    with pytest.raises(Exception) as failure:
        read(spark, tmp_path, **options).collect()
    message = str(failure.value)
    assert (named is None or f"invalid {named}" in message) and accepted in message


def test_a_missing_data_directory_is_refused(spark, tmp_path):
    with pytest.raises(Exception, match="invalid path .*accepted: an existing seglog data directory"):
        read(spark, tmp_path / "missing").collect()


def test_pyspark_finds_the_source_by_itself(tmp_path):
    """A new Spark application that never registers it: PySpark imports the pyspark_* modules its
    workers can import and registers their DefaultSource (once per JVM, at the first lookup)."""
    make_topic(tmp_path, messages=30)
    script = textwrap.dedent(f"""
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        print(spark.read.format("seglog").option("path", {str(tmp_path)!r}).option("topic", "events").load().count())
        spark.stop()
    """)
    environment = {**os.environ, **spark_environment()}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                            timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-1] == "30"


def test_an_empty_topic_or_range_reads_nothing(spark, tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("empty", partitions=2)
    assert read(spark, tmp_path, topic="empty").count() == 0
    make_topic(tmp_path)
    assert read(spark, tmp_path, startingOffsets='{"events": {"0": 50, "1": 50}}').count() == 0


def test_ending_offsets_past_the_end_are_refused(spark, tmp_path):
    make_topic(tmp_path)
    with pytest.raises(Exception, match="invalid endingOffsets 70; accepted: offsets up to the end offset 50 "
                                        "of partition 0"):
        read(spark, tmp_path, endingOffsets='{"events": {"0": 70, "1": 50}}').collect()


def test_messages_deleted_between_planning_and_reading(tmp_path):
    """Retention deletes offsets 0..29 after the read was planned: an error naming them, or, with
    failOnDataLoss false, only what is left of the planned range, and nothing past its end."""
    from pyspark_seglog.offset_ranges import OffsetRange, read_range
    from pyspark_seglog.sessions import Location
    clock = seglog.ManualClock()
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("events", segment_max_messages=10, retention_time="1h")
        with topic.producer() as producer:
            for _ in range(5):
                producer.send_batch([b"m"] * 10)
        clock.advance(hours=2)
        log.run_maintenance()  # offsets 0..39 deleted, 40..49 kept
    rows = lambda piece: [o for b in read_range(piece) for o in b.column("offset").to_pylist()]  # noqa: E731
    with pytest.raises(seglog.errors.OffsetOutOfRangeError, match="offsets 0 to 24 were deleted"):
        rows(OffsetRange(Location(str(tmp_path)), "events", 0, 0, 25, True))
    assert rows(OffsetRange(Location(str(tmp_path)), "events", 0, 0, 25, False)) == []
    assert rows(OffsetRange(Location(str(tmp_path)), "events", 0, 20, 45, False)) == [40, 41, 42, 43, 44]


def test_rebatching_slices_big_batches_combines_small_ones_and_keeps_the_order():
    from pyspark_seglog.arrow_rows import rebatched

    def batch(start, n):
        return pa.RecordBatch.from_pydict({"x": list(range(start, start + n))})

    given = [batch(0, 1000), batch(1000, 1000), batch(2000, 100_000), batch(102_000, 30_000), batch(132_000, 30_000),
             batch(162_000, 30_000)]
    out = list(rebatched(given, rows=65_536))
    assert [b.num_rows for b in out] == [2000, 65_536, 34_464, 60_000, 30_000]
    assert [x for b in out for x in b.column("x").to_pylist()] == list(range(192_000))
    wide = [pa.RecordBatch.from_pydict({"x": [b"v" * 1000] * 10}) for _ in range(10)]
    assert max(b.num_rows for b in rebatched(wide, max_bytes=30_000)) <= 30
