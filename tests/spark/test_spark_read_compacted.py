"""readCompacted: batch reads of each partition's compacted view below its horizon, then the log; offset ranges
that keep meaning offsets over the view's gaps; compactions between planning and reading; streams refused. A log
compacted by cleanup_policy=compact is read through its view by every read, as seglog's readers read it."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

import seglog
from helpers_storage import partition_writer
from pyspark_seglog.arrow_rows import ROWS
from pyspark_seglog.batch_reader import SeglogBatchReader
from pyspark_seglog.options import SourceOptions
from seglog.storage.range_read import SCHEMA_VERSION_ATTRIBUTE

from .test_spark_read import read
from .test_spark_stream import stream
from .test_value_schema import decoded


def compacted_topic(path, name="prices", partitions=2):
    """Per partition p: keys a, b, c, d written twice at offsets 0..7, b's latest a tombstone, d's latest an
    empty value; compacted (Pulsar's model, horizon 8); then a written again at offset 8, past the horizon."""
    with seglog.open(path) as log:
        topic = log.create_topic(name, partitions=partitions)
        with topic.producer() as producer:
            for p in range(partitions):
                producer.send_batch([b"a0", b"b0", b"c0", b"d0"], keys=[b"a", b"b", b"c", b"d"], partition=p)
                producer.send_batch([b"a1", None, b"c1", b""], keys=[b"a", b"b", b"c", b"d"], partition=p)
        log.admin.topics.compact(name)
        with topic.producer() as producer:
            for p in range(partitions):
                producer.send(b"a2", key=b"a", partition=p)


def rows_of(reader: SeglogBatchReader) -> list[tuple[int, int, bytes, bytes | None]]:
    """(partition, offset, key, value) of every row the planned read gives, each piece read as an executor would."""
    batches = [b for piece in reader.partitions() for b in reader.read(piece)]
    assert all(b.schema.equals(ROWS) for b in batches)
    return sorted((p, o, k, v) for b in batches
                  for p, o, k, v in zip(*(b.column(c).to_pylist() for c in ("partition", "offset", "key", "value"))))


def batch_reader(path, topic="prices", **options) -> SeglogBatchReader:
    return SeglogBatchReader(SourceOptions.parse({"path": str(path), "topic": topic, **options}, streaming=False))


def test_read_compacted_gives_each_keys_latest_message_with_its_offset_then_the_log(spark, tmp_path):
    compacted_topic(tmp_path)
    df = read(spark, tmp_path, topic="prices", readCompacted="TRUE")  # Spark's booleans: any case
    assert df.schema.simpleString() == read(spark, tmp_path, topic="prices").schema.simpleString()
    got = sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in df.collect())
    assert got == [(p, o, k, v) for p in (0, 1) for o, k, v in [(4, b"a", b"a1"), (6, b"c", b"c1"), (7, b"d", b""),
                                                                (8, b"a", b"a2")]]
    assert read(spark, tmp_path, topic="prices", readCompacted="false").count() == 18  # the log, as without it


def test_read_compacted_refuses_other_values_and_streams(spark, tmp_path):
    compacted_topic(tmp_path)
    with pytest.raises(Exception, match="invalid readCompacted 'yes'; accepted: 'true' or 'false'"):
        read(spark, tmp_path, topic="prices", readCompacted="yes").collect()
    with pytest.raises(Exception, match="invalid readCompacted 'true'; accepted: only in batch queries"):
        stream(spark, tmp_path, topic="prices", readCompacted="true").writeStream.format("noop") \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).start().awaitTermination()


def test_offset_ranges_keep_meaning_offsets_over_the_views_gaps(tmp_path):
    """startingOffsets, endingOffsets and maxRecordsPerPartition count offsets: each range gives the compacted
    rows whose offsets fall in it, however few, and nothing past its end."""
    compacted_topic(tmp_path, partitions=1)
    for split in ("1", "3", "100"):
        reader = batch_reader(tmp_path, readCompacted="true", maxRecordsPerPartition=split,
                              startingOffsets='{"prices": {"0": 5}}', endingOffsets='{"prices": {"0": 8}}')
        assert rows_of(reader) == [(0, 6, b"c", b"c1"), (0, 7, b"d", b"")]
        pieces = reader.partitions()
        assert [(piece.start, piece.end) for piece in pieces] == [(s, min(s + int(split), 8))
                                                                  for s in range(5, 8, int(split))]
    only_c = batch_reader(tmp_path, readCompacted="true", startingOffsets='{"prices": {"0": 0}}',
                          endingOffsets='{"prices": {"0": 7}}')
    assert rows_of(only_c) == [(0, 4, b"a", b"a1"), (0, 6, b"c", b"c1")]


def test_a_compaction_past_the_planned_end_fails_the_read_one_below_it_does_not(tmp_path):
    """Between planning and reading, a compaction up to the planned end only drops superseded rows; one past
    it may have moved a key's latest message out of the query's offsets, which must not pass silently."""
    compacted_topic(tmp_path, partitions=1)
    reader = batch_reader(tmp_path, readCompacted="true")
    planned = reader.partitions()  # ends at offset 9
    with seglog.open(tmp_path) as log:
        log.admin.topics.compact("prices")  # horizon 9: the planned end
    assert rows_of(reader) == [(0, 6, b"c", b"c1"), (0, 7, b"d", b""), (0, 8, b"a", b"a2")]  # a1 superseded
    with seglog.open(tmp_path) as log:
        with log.topic("prices").producer() as producer:
            producer.send(b"c2", key=b"c", partition=0)
        log.admin.topics.compact("prices")  # horizon 10: c's latest is now past the planned end
    with pytest.raises(seglog.errors.OffsetOutOfRangeError,
                       match="prices partition 0: compacted up to offset 10 since the query was planned to read "
                             "its compacted view up to offset 9 at most"):
        [b for piece in planned for b in reader.read(piece)]


def test_offsets_deleted_between_the_view_and_the_log_are_data_loss(tmp_path):
    """The view outlives retention (Pulsar's model): a compacted read gives the view, then fails naming the
    offsets retention deleted past its horizon, or with failOnDataLoss false goes on at the earliest left."""
    clock = seglog.ManualClock()
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("prices", segment_max_messages=10, retention_time="1h")
        with topic.producer() as producer:
            producer.send_batch([b"v%d" % i for i in range(20)], keys=[b"k%d" % (i % 2) for i in range(20)])
        log.admin.topics.compact("prices")  # horizon 20
        with topic.producer() as producer:
            for _ in range(3):
                producer.send_batch([b"w"] * 10, keys=[b"k0"] * 10)
        clock.advance(hours=2)
        log.run_maintenance()  # offsets 0..39 deleted, 40..49 kept
        assert topic.earliest_offset(0) == 40
    with pytest.raises(seglog.errors.OffsetOutOfRangeError, match="offsets 20 to 39 were deleted"):
        rows_of(batch_reader(tmp_path, readCompacted="true"))
    rows = rows_of(batch_reader(tmp_path, readCompacted="true", failOnDataLoss="false"))
    assert [o for _, o, _, _ in rows] == [18, 19, *range(40, 50)]


def test_a_log_compacted_by_its_cleanup_policy_is_read_through_its_view(tmp_path):
    """Kafka's model: the segments below the horizon are gone and the view stands for them, so a plain read
    from 'earliest' (or offset 0) gives what seglog's reader gives from there, every key's final state first."""
    clock = seglog.ManualClock()
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("prices", cleanup_policy="compact", segment_max_messages=10,
                                 min_cleanable_dirty_ratio=0.0)
        with topic.producer() as producer:
            for i in range(0, 50, 10):
                producer.send_batch([b"v%d" % (i + j) for j in range(10)], keys=[b"k%d" % (j % 3) for j in range(10)])
        clock.advance(hours=1)
        log.run_maintenance()
        assert topic.earliest_offset(0) == 40
        expected = [(0, m.offset, m.key, m.value) for m in topic.reader("earliest", 0)]
    assert [o for _, o, _, _ in expected] == [37, 38, 39, *range(40, 50)]
    assert rows_of(batch_reader(tmp_path)) == expected
    assert rows_of(batch_reader(tmp_path, startingOffsets='{"prices": {"0": 0}}')) == expected
    assert rows_of(batch_reader(tmp_path, readCompacted="true")) == expected


PRICE_V0 = {"type": "record", "name": "Price", "fields": [{"name": "cents", "type": "long"}]}
PRICE_V1 = {**PRICE_V0, "fields": [*PRICE_V0["fields"], {"name": "currency", "type": ["null", "string"],
                                                          "default": None}]}  # a field added


def write_prices(log, topic) -> None:
    """Avro prices of keys a, b (written with PRICE_V0's version), then a, c (PRICE_V1's, adding a field), each in a
    stored batch of its own marked with its schema version as the server marks a producer's; both versions are
    registered on the topic first."""
    versions = [log.admin.schemas.create(topic.name, "AVRO", json.dumps(v)) for v in (PRICE_V0, PRICE_V1)]
    with partition_writer(log, topic) as writer:
        for version, schema, key, record in [(0, PRICE_V0, b"a", {"cents": 1}), (0, PRICE_V0, b"b", {"cents": 2}),
                                             (1, PRICE_V1, b"a", {"cents": 3, "currency": "EUR"}),
                                             (1, PRICE_V1, b"c", {"cents": 4, "currency": "USD"})]:
            writer.append(writer.source([avro(schema, record)], [key],
                                        attributes={SCHEMA_VERSION_ATTRIBUTE: "%016x" % versions[version]}))


def avro(schema: dict, record: dict) -> bytes:
    """`record` in Avro's schemaless binary encoding, as pulsar-client's AvroSchema writes values."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def test_typed_values_of_the_view_decode_with_the_schema_version_they_were_written_with(tmp_path):
    """valueSchema 'topic' over a log compacted by its cleanup_policy: rows only the view still holds take the
    version of their own stored batch (not the log's first batch), so an Avro record written before a field
    was added reads with that field null."""
    clock = seglog.ManualClock()
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("prices", cleanup_policy="compact", segment_max_messages=2,
                                 min_cleanable_dirty_ratio=0.0)
        write_prices(log, topic)
        clock.advance(hours=1)
        log.run_maintenance()  # the segment of offsets 0 and 1 compacted, then deleted: only the view has them
        assert topic.earliest_offset(0) == 2
    assert decoded(tmp_path, "prices") == [{"cents": 1, "currency": None}, {"cents": 2, "currency": None},
                                           {"cents": 3, "currency": "EUR"}, {"cents": 4, "currency": "USD"}]
    assert decoded(tmp_path, "prices", readCompacted="true") == decoded(tmp_path, "prices")
