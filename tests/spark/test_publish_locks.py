"""Publishing staged rows holds every partition's writer lock from before the end offsets are noted, so what a
replayed streaming batch finds after them is its own (pyspark_seglog.writer.publish)."""

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import seglog
from pyspark_seglog.writer import publish
from seglog.errors import PartitionLockedError

STAGED_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("partition", pa.int32()),
                           ("timestamp", pa.timestamp("ms", tz="UTC")),
                           ("properties", pa.map_(pa.string(), pa.string()))])


def staged(partition: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([None], pa.binary()), pa.array([b"row"]), pa.array([partition], pa.int32()),
                            pa.array([None], pa.timestamp("ms", tz="UTC")),
                            pa.array([None], pa.map_(pa.string(), pa.string()))], schema=STAGED_SCHEMA)


def test_no_other_writer_gets_a_partition_while_rows_are_published(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic("sunk", partitions=2)
    refused: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        yield staged(0)
        # partition 1 has not been written yet by this publishing: another writer must still be refused
        with seglog.open(data, background=False) as other, other.topic("sunk").producer() as intruder:
            for partition in (0, 1):
                with pytest.raises(PartitionLockedError):
                    intruder.send_batch([b"intruder"], partition=partition)
                refused.append(partition)
        yield staged(1)

    publish(str(data), "sunk", batches())
    assert refused == [0, 1]
    with seglog.open(data, background=False) as log:
        assert [log.topic("sunk").end_offset(p) for p in (0, 1)] == [1, 1]
