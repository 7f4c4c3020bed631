"""Writes: round trips of every column, retried and failing tasks, the streaming sink's idempotence."""

from __future__ import annotations

import datetime as dt
import os
import shutil

import pyarrow as pa
import pytest
from pyspark import TaskContext
from pyspark.sql import functions as F  # noqa: N812 (Spark's convention)
from pyspark.sql.types import BinaryType

import seglog
from pyspark_seglog.options import SinkOptions
from pyspark_seglog.staging import STAGING_DIRECTORY, micro_batch_directory, stage
from pyspark_seglog.writer import STAGED, SeglogStreamWriter, sink_id, staged_rows

from .test_spark_read import make_topic, read

UTC = dt.timezone.utc


def messages(path, topic="out"):
    with seglog.open(path) as log:
        t = log.topic(topic)
        return [m for p in range(t.partitions) for m in t.reader("earliest", p)]


def write(df, path, topic="out", mode="append"):
    df.write.format("seglog").option("path", str(path)).option("topic", topic).mode(mode).save()


def test_write_round_trip_of_every_column(spark, tmp_path):
    with seglog.open(tmp_path) as log:
        log.create_topic("out", partitions=3)
    rows = [(b"v%d" % i, b"k%d" % i if i % 4 else None, i % 3 if i % 5 else None,
             dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=i), {"i": str(i)})
            for i in range(200)]
    df = spark.createDataFrame(rows, "value binary, key binary, partition int, timestamp timestamp, "
                                     "properties map<string,string>").repartition(4)
    write(df, tmp_path)
    got = {m.value: m for m in messages(tmp_path)}
    assert len(got) == 200
    for value, key, partition, timestamp, properties in rows:
        m = got[value]
        assert m.key == key and m.properties == properties
        assert m.timestamp == int(timestamp.timestamp() * 1000)
        if partition is not None:
            assert m.partition == partition
    assert not os.listdir(tmp_path / STAGING_DIRECTORY)  # nothing staged is left behind


def test_write_of_strings_to_a_new_topic_then_read_back_with_spark(spark, tmp_path):
    seglog.open(tmp_path).close()  # a data directory, without the topic
    df = spark.createDataFrame([(f"value {i}", f"key {i % 3}") for i in range(50)], "value string, key string")
    write(df, tmp_path, topic="created")
    back = read(spark, tmp_path, topic="created").select(F.col("value").cast("string").alias("v")).collect()
    assert sorted(r.v for r in back) == sorted(f"value {i}" for i in range(50))


def test_a_retried_task_leaves_no_duplicates(spark, tmp_path):
    def fail_first_attempt(value):
        context = TaskContext.get()
        if context.partitionId() == 1 and context.attemptNumber() == 0:
            raise RuntimeError("a transient failure")
        return value

    seglog.open(tmp_path).close()
    flaky = F.udf(fail_first_attempt, BinaryType())
    df = spark.range(1000).select(flaky(F.col("id").cast("string").cast("binary")).alias("value")).repartition(4)
    write(df, tmp_path)
    assert sorted(int(m.value) for m in messages(tmp_path)) == list(range(1000))


def test_null_values_are_written_as_messages_without_a_value_and_read_back_as_nulls(spark, tmp_path):
    seglog.open(tmp_path).close()
    write(spark.createDataFrame([(b"a", "k1"), (None, "k2"), (b"", "k3")], "value binary, key string"), tmp_path)
    assert sorted((m.key, m.value) for m in messages(tmp_path)) == [(b"k1", b"a"), (b"k2", None), (b"k3", b"")]
    back = read(spark, tmp_path, topic="out").select(F.col("key").cast("string").alias("k"), "value").collect()
    assert sorted((r.k, None if r.value is None else bytes(r.value)) for r in back) == [
        ("k1", b"a"), ("k2", None), ("k3", b"")]


def test_a_failing_write_fails_the_job_with_the_seglog_message_and_publishes_nothing(spark, tmp_path):
    make_topic(tmp_path, name="out", partitions=1, messages=5)
    df = spark.createDataFrame([(b"a", {"k": "v"}), (b"b", {"k": None})], "value binary, properties map<string,string>")
    with pytest.raises(Exception, match="invalid properties column '1 null property values'; accepted: "
                                        "map<string,string> without null values"):
        write(df, tmp_path)
    assert len(messages(tmp_path)) == 5
    assert not os.listdir(tmp_path / STAGING_DIRECTORY)


@pytest.mark.parametrize(("rows", "frame", "match"), [
    ([(b"a", 0), (b"b", 3)], "value binary, partition int", "invalid partition column '1 values outside 0..1'; "
                                                             "accepted: partitions of the topic, from 0 to 1"),
    ([(b"a", {"k": None})], "value binary, properties map<string,string>", "invalid properties column '1 null "
                                                                           "property values'"),
])
def test_rows_the_topic_cannot_take_fail_the_job_before_anything_is_published(spark, tmp_path, rows, frame, match):
    with seglog.open(tmp_path) as log:
        log.create_topic("out", partitions=2)
    with pytest.raises(Exception, match=match):
        write(spark.createDataFrame(rows, frame), tmp_path)
    assert messages(tmp_path) == []


def test_writing_to_a_folder_that_is_not_a_data_directory_is_refused(spark, tmp_path):
    with pytest.raises(Exception, match="invalid path .*accepted: an existing seglog data directory"):
        write(spark.createDataFrame([(b"a",)], "value binary"), tmp_path / "typo")
    assert not (tmp_path / "typo").exists()


def test_a_new_checkpoint_at_the_same_path_is_a_new_query(spark, tmp_path):
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    make_topic(data, messages=40)

    def copy():
        (spark.readStream.format("seglog").option("path", str(data)).option("topic", "events")
         .option("startingOffsets", "earliest").load().select("value")
         .writeStream.format("seglog").option("path", str(data)).option("topic", "copy")
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start().awaitTermination())

    copy()
    shutil.rmtree(checkpoint)
    copy()  # its batch 0 is not the first query's batch 0
    assert len(messages(data, "copy")) == 80


@pytest.mark.parametrize(("frame", "mode", "match"), [
    ("key binary", "append", "a 'value' column"),
    ("value int", "append", "invalid value column 'int'; accepted: binary or string"),
    ("value binary, partition string", "append", "invalid partition column 'string'; accepted: an integer type"),
    ("value binary", "overwrite", "invalid mode 'overwrite'.*'append'"),
])
def test_a_dataframe_the_sink_cannot_take_is_refused_before_any_task(spark, tmp_path, frame, mode, match):
    seglog.open(tmp_path).close()
    df = spark.createDataFrame([], frame)
    with pytest.raises(Exception, match=match):
        write(df, tmp_path, mode=mode)
    with seglog.open(tmp_path) as log:
        assert log.list_topics() == []


def test_streaming_from_one_topic_to_another(spark, tmp_path):
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    make_topic(data, messages=300)
    query = (spark.readStream.format("seglog").option("path", str(data)).option("topic", "events")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load()
             .select("key", "value", "timestamp", "properties")
             .writeStream.format("seglog").option("path", str(data)).option("topic", "copy")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    copied = messages(data, "copy")
    assert sorted(m.value for m in copied) == sorted(b"v%d" % i for i in range(300))
    assert {m.value: m.properties for m in copied}[b"v7"] == {"i": "7"}


def test_the_streaming_sink_publishes_a_batch_id_once(spark, tmp_path):
    """Spark commits a micro-batch again after a restart that followed a crash between its offset and
    commit logs; the second commit of batch 0 publishes nothing."""
    data, checkpoint = tmp_path / "data", tmp_path / "checkpoint"
    make_topic(data, messages=40)
    options = {"path": str(data), "topic": "copy", "checkpointLocation": str(checkpoint)}
    query = (spark.readStream.format("seglog").option("path", str(data)).option("topic", "events")
             .option("startingOffsets", "earliest").load().select("value")
             .writeStream.format("seglog").options(**options).trigger(once=True).start())
    query.awaitTermination()
    assert len(messages(data, "copy")) == 40
    sink = SeglogStreamWriter(SinkOptions.parse(options), sink_id(options))

    def staged(batch_id):  # what a task of micro-batch `batch_id` would have staged: 3 rows
        directory = micro_batch_directory(str(data), sink.sink_id, batch_id)
        rows = pa.RecordBatch.from_pydict({"value": [b"a", b"b", b"c"]})
        return [stage(directory, 0, 0, [staged_rows(rows, 1)], STAGED)]

    sink.commit(staged(0), 0)  # batch 0 again: already published, so nothing is
    assert len(messages(data, "copy")) == 40
    sink.commit(staged(1), 1)
    assert len(messages(data, "copy")) == 43
    sink.commit(staged(1), 1)
    assert len(messages(data, "copy")) == 43
    with pytest.raises(Exception, match="invalid checkpointLocation.*accepted: the option"):
        sink_id({"path": str(data), "topic": "copy"})


def test_a_micro_batch_cut_short_by_the_drivers_death_is_completed_not_repeated(tmp_path, monkeypatch):
    """The driver dies after publishing partition 0's rows of batch 3; meanwhile another producer appends.
    Spark replays batch 3: partition 0's rows are found and left out, partition 1's are sent."""
    from pyspark_seglog import writer
    with seglog.open(tmp_path) as log:
        log.create_topic("out", partitions=2)
    options = {"path": str(tmp_path), "topic": "out", "checkpointLocation": str(tmp_path / "checkpoint")}
    sink = SeglogStreamWriter(SinkOptions.parse(options), sink_id(options))
    rows = pa.RecordBatch.from_pydict({"value": [b"a0", b"a1", b"b0", b"b1", b"a2"], "partition": [0, 0, 1, 1, 0]})

    def staged():
        directory = micro_batch_directory(str(tmp_path), sink.sink_id, 3)
        return [stage(directory, 0, 0, [staged_rows(rows, 2)], STAGED)]

    send = writer._send

    def dies_after_partition_0(producer, part, partition, now):
        if partition == 1:
            raise SystemExit("the driver died")
        send(producer, part, partition, now)

    monkeypatch.setattr(writer, "_send", dies_after_partition_0)
    with pytest.raises(SystemExit):
        sink.commit(staged(), 3)
    monkeypatch.setattr(writer, "_send", send)
    with seglog.open(tmp_path) as log, log.topic("out").producer() as producer:
        producer.send_batch([b"foreign"], partition=0)
        producer.send_batch([b"foreign"], partition=1)
    sink.commit(staged(), 3)
    sink.commit(staged(), 3)  # and once it is done, a replay publishes nothing
    with seglog.open(tmp_path) as log:
        topic = log.topic("out")
        assert [m.value for m in topic.reader("earliest", 0)] == [b"a0", b"a1", b"a2", b"foreign"]
        assert [m.value for m in topic.reader("earliest", 1)] == [b"foreign", b"b0", b"b1"]
