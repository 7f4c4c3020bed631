"""Topic.read_range: the messages of [start, end) of a partition, as a query engine's input split reads them."""

from __future__ import annotations

import pyarrow as pa
import pytest

import seglog
from helpers_storage import partition_writer
from seglog.errors import InvalidArgumentError, OffsetOutOfRangeError
from seglog.storage.range_read import SCHEMA_VERSION_ATTRIBUTE


def _offsets(batches) -> list[int]:
    return [o for batch in batches for o in batch.column("offset").to_pylist()]


def test_a_range_gives_exactly_its_offsets_across_segments(tmp_path):
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("events", segment_max_messages=10)
        with topic.producer() as producer:
            for i in range(5):
                producer.send_batch([b"v%d" % (i * 7 + j) for j in range(7)])
        batches = list(topic.read_range(0, 3, 31))
        assert _offsets(batches) == list(range(3, 31))
        assert [v.as_py() for b in batches for v in b.column("value")] == [b"v%d" % i for i in range(3, 31)]
        assert batches[0].schema.names == ["offset", "timestamp", "key", "value", "properties"]
        assert list(topic.read_range(0, 10, 10)) == []
        with pytest.raises(OffsetOutOfRangeError, match="the range ends at offset 40, past the partition's end "
                                                        "offset 35"):
            list(topic.read_range(0, 30, 40, fail_on_data_loss=False))


def test_deleted_offsets_are_data_loss_or_left_out(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as log:
        topic = log.create_topic("events", segment_max_messages=10, retention_time="1h")
        with topic.producer() as producer:
            for _ in range(5):
                producer.send_batch([b"x"] * 10)
        clock.advance(2 * 3600 * 1000)
        with topic.producer() as producer:
            producer.send_batch([b"y"] * 10)
        log.run_maintenance()  # the first five segments go: offsets 0..49 (the active one stays)
        with pytest.raises(OffsetOutOfRangeError, match="events partition 0: offsets 0 to 39 were deleted"):
            list(topic.read_range(0, 0, 40))
        assert _offsets(topic.read_range(0, 0, 55, fail_on_data_loss=False)) == list(range(50, 55))


def test_schema_versions_come_from_the_stored_batches(tmp_path):
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("events")
        with partition_writer(log, topic) as writer:
            writer.append(writer.source([b"a", b"b"], attributes={SCHEMA_VERSION_ATTRIBUTE: "%016x" % 3}))
            writer.append(writer.source([b"c"]))
        batches = list(topic.read_range(0, 1, 3, schema_versions=True))
        assert [b.column("schema_version").to_pylist() for b in batches] == [[3], [None]]
        assert batches[0].schema.field("schema_version").type == pa.int64()


@pytest.mark.parametrize("start, end", [(-1, 5), (5, 4), ("0", 5)])
def test_a_bad_range_is_refused_naming_it(tmp_path, start, end):
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("events")
        with pytest.raises(InvalidArgumentError, match="start, end.*offsets from 0 with start <= end"):
            topic.read_range(0, start, end)
