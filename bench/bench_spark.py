"""Spark over seglog: batch reads, streaming reads and writes through pyspark_seglog, local[2].

The topic: 10M messages of 100 random bytes, keys from a pool of 1,000, over 4 partitions (by key hash).

Group "spark read: count()":
  baseline  tuple source                 the same planning, but read() yields one Python tuple per row
                                         (datetime timestamps, bytes, dicts): a Python data source
                                         written the plain way; one round (it takes ~45 s)
  seglog    format("seglog").count()     Arrow batches over the segments        >= 4x the tuple source
Group "spark read: groupBy(key) count, sum(length(value))":
  baseline  Parquet                      the same rows written to Parquet (untimed, once): Spark reads
                                         only the two columns the query needs
  baseline  tuple source                 as above, one round
  baseline  one cached batch             a source that yields one batch in Spark's schema again and again,
                                         no seglog work at all: the ceiling of PySpark's Python sources
  seglog    format("seglog")             every column crosses from Python to the JVM (PySpark's Python
                                         sources cannot prune columns)           >= 0.5x Parquet (within
                                                                                 2x), >= 4x tuples
Group "spark streaming: availableNow, 4 micro-batches":
  baseline  batch read into format("noop")
  seglog    readStream -> noop           rows/s inside the micro-batches (their triggerExecution
                                         durations), recorded as seconds per million rows <= 1 s
                                         (>= 1M rows/s); the round time includes the query's start
Group "spark write: 10M rows of 100 B":
  baseline  the same DataFrame into format("noop")
  seglog    df.write.format("seglog")    tasks stage Arrow files, the driver publishes  >= 0.4M rows/s
Groups "spark read: valueSchema topic, 1M AVRO records" and "... JSON records" (noop sink):
  baseline  the same rows, value as binary   valueSchema 'binary' (the default)
  seglog    valueSchema 'topic'               the value decoded into a struct of 5 fields (long, string,
                                              double, timestamp-millis, array<string>); the ratio to binary
                                              is recorded (no target)
Group "spark read: Python worker memory":
  seglog    the growth of a Python worker's anonymous memory during one read() task, reading a fifth of
            the topic and all of it: flat in the topic's size, <= 64 MiB

With --benchmark-disable (CI) the topic has 20k messages and every body runs once.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import resource
import shutil
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)
from pyspark.sql.datasource import DataSource

import seglog
from pyspark_seglog.arrow_rows import ROWS_PER_BATCH
from pyspark_seglog.batch_reader import SeglogBatchReader
from pyspark_seglog.local import local_spark
from pyspark_seglog.offset_ranges import OffsetRange, read_range
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.sessions import open_log

READ_COUNT = "spark read: count()"
READ_AGGREGATE = "spark read: groupBy(key) count, sum(length(value))"
STREAM = "spark streaming: availableNow, 4 micro-batches"
WRITE = "spark write: 10M rows of 100 B"
MEMORY = "spark read: Python worker memory"
TOPIC = "events"
PARTITIONS = 4
VALUE_BYTES = 100
KEYS = 1000
MiB = 1 << 20
UTC = dt.timezone.utc


class TupleReader(SeglogBatchReader):
    """The baseline: the connector's planning, with rows yielded as Python tuples."""

    def read(self, partition: OffsetRange) -> Iterator[tuple]:
        with open_log(partition.location.path) as log:
            reader = log.topic(partition.topic).reader(partition.start, partition.partition)
            for message in reader:
                if message.offset >= partition.end:
                    break
                yield (partition.topic, partition.partition, message.offset,
                       dt.datetime.fromtimestamp(message.timestamp / 1000, UTC), message.key, message.value,
                       message.properties)


class TupleSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "seglog_tuples"

    def schema(self) -> str:
        from pyspark_seglog.arrow_rows import SPARK_SCHEMA
        return SPARK_SCHEMA

    def reader(self, schema):
        return TupleReader(SourceOptions.parse(self.options, streaming=False))


class CachedBatchReader(SeglogBatchReader):
    """The ceiling of PySpark's Python data sources: the connector's planning, and for each range one
    batch in Spark's schema, made once and yielded again and again (no seglog work at all)."""

    def read(self, partition: OffsetRange) -> Iterator:
        first = next(read_range(OffsetRange(partition.location, partition.topic, partition.partition, partition.start,
                                            min(partition.end, partition.start + ROWS_PER_BATCH), True)))
        for start in range(partition.start, partition.end, first.num_rows):
            yield first.slice(0, min(first.num_rows, partition.end - start))


class CachedBatchSource(TupleSource):
    @classmethod
    def name(cls) -> str:
        return "seglog_cached"

    def reader(self, schema):
        return CachedBatchReader(SourceOptions.parse(self.options, streaming=False))


class MemoryWatchingReader(SeglogBatchReader):
    """The connector's reader, noting how much a worker's anonymous memory grew during each read()."""

    def read(self, partition: OffsetRange) -> Iterator:
        start = peak = _rss_anon()
        for batch in read_range(partition):
            yield batch
            peak = max(peak, _rss_anon())
        report = os.path.join(self.options.location.path, "rss",
                              f"{os.getpid()}-{partition.partition}-{partition.start}")
        os.makedirs(os.path.dirname(report), exist_ok=True)
        with open(report, "w") as out:
            json.dump({"growth": peak - start, "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, out)


class MemoryWatchingSource(TupleSource):
    @classmethod
    def name(cls) -> str:
        return "seglog_rss"

    def reader(self, schema):
        return MemoryWatchingReader(SourceOptions.parse(self.options, streaming=False))


def _rss_anon() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))


@pytest.fixture(scope="module")
def spark():
    # The baseline sources above reach Spark's Python workers by value: they cannot import this file.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    session = local_spark("local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
                                       "spark.driver.memory": "4g"})
    session.dataSource.register(TupleSource)
    session.dataSource.register(MemoryWatchingSource)
    session.dataSource.register(CachedBatchSource)
    return session


@pytest.fixture(scope="module")
def topic_path(scratch, scale):
    """(data directory, messages) of the benchmark topic."""
    messages = scale(10_000_000, 20_000)
    path = scratch / "data"
    write_topic(path, TOPIC, messages)
    return path, messages


def write_topic(path, name: str, messages: int) -> None:
    """The benchmark topic `name` in the data directory `path`: `messages` of VALUE_BYTES random bytes, keys
    from a pool of KEYS, over PARTITIONS partitions (by key hash)."""
    rng = np.random.default_rng(7)
    pool = np.frombuffer(b"".join(b"key-%04d" % i for i in range(KEYS)), dtype=np.uint8).reshape(KEYS, 8)
    with seglog.open(path) as log:
        topic = log.create_topic(name, partitions=PARTITIONS)
        with topic.producer() as producer:
            chunk = 500_000
            for start in range(0, messages, chunk):
                n = min(chunk, messages - start)
                producer.send_batch(rng.integers(0, 256, (n, VALUE_BYTES), dtype=np.uint8),
                                    keys=pool[rng.integers(0, KEYS, n)])


def _source(spark, path, name="seglog", **options):
    reader = spark.read.format(name).option("path", str(path)).option("topic", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def aggregate(df):
    """The grouped aggregation of the read benchmarks: per key, the rows and the sum of the values' lengths."""
    return df.groupBy("key").agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).collect()


def check_aggregate(rows, messages):
    """aggregate()'s rows add up to the topic: every key, every message, every value's bytes."""
    assert len(rows) == min(KEYS, messages) and sum(r.n for r in rows) == messages
    assert sum(r.bytes for r in rows) == messages * VALUE_BYTES


# ---------------------------------------------------------------------------------------------------------
# Reading: count() and a grouped aggregation

def test_tuple_source_count(bench, spark, topic_path):
    path, messages = topic_path
    bench.baseline(READ_COUNT, "tuple source", messages=messages, unit="row")
    assert bench.run(lambda: _source(spark, path, "seglog_tuples").count(), rounds=1, warmup_rounds=0) == messages


def test_seglog_count(bench, spark, topic_path):
    path, messages = topic_path
    bench.seglog(READ_COUNT, 'format("seglog").count()', messages=messages, unit="row",
                 at_least={"tuple source": 4})
    assert bench.run(lambda: _source(spark, path).count(), rounds=5) == messages


@pytest.fixture(scope="module")
def parquet_path(spark, topic_path, scratch):
    path, _ = topic_path
    out = scratch / "parquet"
    _source(spark, path).write.parquet(str(out))
    yield out
    shutil.rmtree(out, ignore_errors=True)


def test_parquet_aggregate(bench, spark, topic_path, parquet_path):
    _, messages = topic_path
    bench.baseline(READ_AGGREGATE, "Parquet", messages=messages, unit="row")
    check_aggregate(bench.run(lambda: aggregate(spark.read.parquet(str(parquet_path))), rounds=5), messages)


def test_tuple_source_aggregate(bench, spark, topic_path):
    path, messages = topic_path
    bench.baseline(READ_AGGREGATE, "tuple source", messages=messages, unit="row")
    check_aggregate(bench.run(lambda: aggregate(_source(spark, path, "seglog_tuples")), rounds=1,
                               warmup_rounds=0), messages)


def test_cached_batch_aggregate(bench, spark, topic_path):
    path, messages = topic_path
    bench.baseline(READ_AGGREGATE, "one cached batch, again and again", messages=messages, unit="row")
    rows = bench.run(lambda: aggregate(_source(spark, path, "seglog_cached")), rounds=5)
    assert sum(r.n for r in rows) == messages  # the same query; its sums are of the one batch's values


def test_seglog_aggregate(bench, spark, topic_path):
    path, messages = topic_path
    bench.seglog(READ_AGGREGATE, 'format("seglog")', messages=messages, unit="row",
                 at_least={"Parquet": 0.5, "tuple source": 4})
    check_aggregate(bench.run(lambda: aggregate(_source(spark, path)), rounds=5), messages)


# ---------------------------------------------------------------------------------------------------------
# Streaming

def test_batch_read_to_noop(bench, spark, topic_path):
    path, messages = topic_path
    bench.baseline(STREAM, "batch read into noop", messages=messages, unit="row")
    bench.run(lambda: _source(spark, path).write.format("noop").mode("overwrite").save(), rounds=3)


def test_streaming_available_now(bench, spark, topic_path, scratch):
    path, messages = topic_path
    checkpoints = scratch / "checkpoints"
    inside = []

    def fresh_checkpoint():
        shutil.rmtree(checkpoints, ignore_errors=True)
        return (str(checkpoints),)

    def stream(checkpoint):
        query = (spark.readStream.format("seglog").option("path", str(path)).option("topic", TOPIC)
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(messages // 4)).load()
                 .writeStream.format("noop").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        assert sum(p["numInputRows"] for p in batches) == messages and len(batches) == 4
        inside.append(sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000)

    bench.seglog(STREAM, "readStream -> noop, availableNow", messages=messages, unit="row",
                 at_most={"s per 1M rows in micro-batches": 1.0})
    bench.run(stream, setup=fresh_checkpoint, rounds=3)
    bench.record("s per 1M rows in micro-batches", round(min(inside) / (messages / 1e6), 3))
    bench.note(f"{messages / min(inside) / 1e6:.2f}M rows/s inside the micro-batches")


# ---------------------------------------------------------------------------------------------------------
# Writing

def rows_to_write(spark, messages):
    """The DataFrame the write benchmarks write: `messages` rows of a VALUE_BYTES value and a key of KEYS."""
    return spark.range(messages, numPartitions=4).select(
        F.lpad(F.col("id").cast("string"), VALUE_BYTES, "x").cast("binary").alias("value"),
        F.concat(F.lit("key-"), (F.col("id") % KEYS).cast("string")).cast("binary").alias("key"))


def test_write_to_noop(bench, spark, topic_path):
    _, messages = topic_path
    bench.baseline(WRITE, "the same rows into noop", messages=messages, unit="row")
    bench.run(lambda: rows_to_write(spark, messages).write.format("noop").mode("overwrite").save(), rounds=3)


def test_write_to_seglog(bench, spark, topic_path, scratch):
    _, messages = topic_path
    out = scratch / "written"

    def fresh_directory():
        shutil.rmtree(out, ignore_errors=True)
        with seglog.open(out) as log:
            log.create_topic(TOPIC, partitions=PARTITIONS)

    def write():
        rows_to_write(spark, messages).write.format("seglog").option("path", str(out)).option("topic", TOPIC) \
            .mode("append").save()

    bench.seglog(WRITE, 'df.write.format("seglog")', messages=messages, unit="row", min_rate=400_000)
    bench.run(write, setup=fresh_directory, rounds=3)
    with seglog.open(out) as log:
        topic = log.topic(TOPIC)
        assert sum(topic.end_offset(p) for p in range(PARTITIONS)) == messages
    shutil.rmtree(out, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# Typed values: valueSchema 'topic'

RECORD = {"type": "record", "name": "Reading", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "sensor", "type": "string"}, {"name": "value", "type": "double"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}}]}


@pytest.fixture(scope="module", params=["AVRO", "JSON"])
def typed_topic(request, scratch, scale):
    """(data directory, topic, messages): records of RECORD encoded as the schema type says, over 2 partitions,
    the topic's schema RECORD."""
    import io

    import fastavro
    schema_type, messages = request.param, scale(1_000_000, 20_000)
    parsed = fastavro.parse_schema(RECORD)

    def encoded(i: int) -> bytes:
        record = {"id": i, "sensor": f"sensor-{i % 100}", "value": i / 7, "at": 1_700_000_000_000 + i,
                  "tags": ["a", "b"][: i % 3]}
        if schema_type == "JSON":
            return json.dumps(record).encode()
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, record)
        return buffer.getvalue()

    path, name = scratch / f"typed-{schema_type}", f"readings-{schema_type.lower()}"
    with seglog.open(path) as log:
        topic = log.create_topic(name, partitions=2)
        log.admin.schemas.create(name, schema_type, json.dumps(RECORD))
        with topic.producer() as producer:
            for start in range(0, messages, 100_000):
                producer.send_batch([encoded(i) for i in range(start, min(start + 100_000, messages))])
    yield path, name, messages
    shutil.rmtree(path, ignore_errors=True)


def _typed_read(spark, path, name, value_schema):
    df = spark.read.format("seglog").option("path", str(path)).option("topic", name) \
        .option("valueSchema", value_schema).load()
    df.write.format("noop").mode("overwrite").save()
    return df


def test_value_schema_binary_read(bench, spark, typed_topic):
    path, name, messages = typed_topic
    schema_type = name.rpartition("-")[2].upper()
    bench.baseline(f"spark read: valueSchema topic, 1M {schema_type} records", "the same rows, value as binary",
                   messages=messages, unit="row")
    bench.run(lambda: _typed_read(spark, path, name, "binary"), rounds=3)


def test_value_schema_topic_read(bench, spark, typed_topic):
    path, name, messages = typed_topic
    schema_type = name.rpartition("-")[2].upper()
    bench.seglog(f"spark read: valueSchema topic, 1M {schema_type} records", "valueSchema 'topic', decoded",
                 messages=messages, unit="row")
    df = bench.run(lambda: _typed_read(spark, path, name, "topic"), rounds=3)
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:bigint,sensor:string,value:double,at:timestamp,tags:array<string>>"
    assert df.selectExpr("sum(value.id)").first()[0] == messages * (messages - 1) // 2


# ---------------------------------------------------------------------------------------------------------
# Memory

def test_python_worker_memory_is_flat_in_the_topic_size(bench, spark, topic_path):
    path, messages = topic_path
    reports = path / "rss"

    def growth(**options) -> int:
        shutil.rmtree(reports, ignore_errors=True)
        assert _source(spark, path, "seglog_rss", **options).count() > 0
        return max(json.loads(report.read_text())["growth"] for report in reports.iterdir())

    with open_log(str(path)) as log:
        topic = log.topic(TOPIC)
        fifth = {TOPIC: {str(p): topic.end_offset(p) // 5 for p in range(PARTITIONS)}}
    bench.seglog(MEMORY, "read() of a fifth, then all of the topic", messages=messages, unit="row",
                 at_most={"anon growth, whole topic (MiB)": 64})
    small = bench.run(lambda: growth(endingOffsets=json.dumps(fifth)), rounds=1, warmup_rounds=0)
    large = growth()
    bench.record("anon growth, a fifth (MiB)", round(small / MiB, 1))
    bench.record("anon growth, whole topic (MiB)", round(large / MiB, 1))
    bench.note(f"a worker's anonymous memory grew {small / MiB:.1f} MiB reading a fifth of the topic, "
               f"{large / MiB:.1f} MiB reading all of it")
