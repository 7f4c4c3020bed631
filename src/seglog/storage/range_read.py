"""A bounded read: the stored batches of offsets [start, end) of one partition, as a query engine reads an
input split (Spark's input partitions, in-process or through `seglog serve`'s Flight port).

Offsets keep their meaning when a partition's compacted view is read (read_compacted, or a log compacted by
cleanup_policy=compact): the view's rows keep their own offsets, with gaps between them, and [start, end) gives
the view's rows whose offsets are in it, then the log's. Messages deleted under the read are data loss: an
error naming them, or, with fail_on_data_loss false, the read goes on at the earliest offset left."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from seglog.errors import OffsetOutOfRangeError
from seglog.names import TopicName

# the stored batch attribute naming the schema version its messages were written with (the server writes
# it from a SEND's metadata: hex of the 8-byte big-endian version)
SCHEMA_VERSION_ATTRIBUTE = "pulsar.schema_version"
VERSION_COLUMN = "schema_version"  # the column read_range adds with schema_versions


def read_range(store: Any, name: TopicName, partition: int, start: int, end: int, *, verify_crc: bool,
               read_compacted: bool = False, fail_on_data_loss: bool = True, max_horizon: int = 0,
               schema_versions: bool = False) -> Iterator[pa.RecordBatch]:
    """The messages of [start, end) of the partition as record batches (offset, timestamp, key, value,
    properties: Reader.read_batch's columns, over the segments' memory), each within one stored batch.

    read_compacted: the partition's compacted view below its horizon, then the log; `max_horizon` is the
    highest horizon the view may have when it is read (the read's planned end, or the horizon when it was
    planned if that is higher), past which the view may no longer hold each key's latest message of the range:
    OffsetOutOfRangeError. schema_versions: a `schema_version` int64 column, the version each message was written
    with (null when none). `store`: a PartitionStore."""
    with store.reader(name, partition, start, verify_crc=verify_crc, read_compacted=read_compacted) as reader:
        batches = _batches_in_range(reader, str(name), start, end, fail_on_data_loss)
        if schema_versions:
            batches = _with_schema_versions(store, name, partition, start, batches, read_compacted, verify_crc)
        yield from batches
        if read_compacted:
            check_horizon(reader.compacted_view.horizon(), str(name), partition, start, max_horizon)


def check_data_loss(fail: bool, topic: str, partition: int, first: int, stop: int) -> None:
    """Messages [first, stop) were deleted before they were read: an error, unless fail (failOnDataLoss) is
    false."""
    if fail:
        raise OffsetOutOfRangeError(
            f"{topic} partition {partition}: offsets {first} to {stop - 1} were deleted (retention) before "
            f"they were read. Set the option failOnDataLoss to 'false' to read on from offset {stop}, as "
            "Spark's Kafka source does")


def check_horizon(horizon: int, topic: str, partition: int, start: int, max_horizon: int) -> None:
    """A compacted read from `start` gives the rows planned only while no compaction since passed the read's
    end: one that did may have moved a key's latest message past that end, leaving the key out of every range
    (a compaction that stays below it only leaves out superseded rows)."""
    if horizon > max_horizon and start < horizon:
        raise OffsetOutOfRangeError(
            f"{topic} partition {partition}: compacted up to offset {horizon} since the query was planned "
            f"to read its compacted view up to offset {max_horizon} at most, so the view may no longer hold "
            "each key's latest message the query would read. Run the query again: it plans with the offsets it "
            "finds then")


def _batches_in_range(reader: Any, topic: str, start: int, end: int, fail_on_data_loss: bool
                      ) -> Iterator[pa.RecordBatch]:
    skipped = 0
    while reader.offset < end:
        batch = reader.read_batch(max_messages=end - reader.offset)
        if reader.skipped > skipped:  # the reader went on at the earliest offset left, where `batch` starts
            resumed = reader.offset if batch is None else batch.column("offset")[0].as_py()
            check_data_loss(fail_on_data_loss, topic, reader.partition, resumed - (reader.skipped - skipped),
                            min(resumed, end))
            skipped = reader.skipped
        if batch is None:
            if reader.offset < end:  # (deleted messages were skipped above: these were never written)
                raise OffsetOutOfRangeError(
                    f"{topic} partition {reader.partition}: the range ends at offset {end}, past the partition's "
                    f"end offset {reader.offset}; read up to an end offset the partition has")
            return
        offsets = batch.column("offset").to_numpy()  # ascending; with gaps in a compacted view's batches
        if offsets[0] >= end:
            return
        yield batch.slice(0, int(np.searchsorted(offsets, end)))


def _with_schema_versions(store: Any, name: TopicName, partition: int, start: int,
                          batches: Iterator[pa.RecordBatch], read_compacted: bool,
                          verify_crc: bool) -> Iterator[pa.RecordBatch]:
    """`batches` (pieces of stored batches, in offset order, from `start`) each with a schema_version column.
    The versions come from the stored batches' attributes, read (headers only) by a second reader alongside; a
    piece of the compacted view that the log no longer holds (a compacted batch keeps its stored batch's
    attributes) takes them from the view's first message of it."""
    with store.reader(name, partition, start, verify_crc=verify_crc) as reader:
        infos = reader.batch_infos()  # the log's batches: the view's are not among them
        info = None
        for batch in batches:
            first = batch.column("offset")[0].as_py()
            while info is None or info.base_offset + info.record_count <= first:
                info = next(infos, None)
                if info is None:
                    break
            attributes = info.attributes if info is not None and info.base_offset <= first \
                else _view_attributes(store, name, partition, first, read_compacted, verify_crc)
            written = attributes.get(SCHEMA_VERSION_ATTRIBUTE)
            version = None if written is None else int(written, 16)
            yield batch.append_column(VERSION_COLUMN, pa.repeat(pa.scalar(version, pa.int64()), batch.num_rows))


def _view_attributes(store: Any, name: TopicName, partition: int, offset: int, read_compacted: bool,
                     verify_crc: bool) -> Mapping[str, str]:
    """The batch attributes of the message at `offset` of the partition's compacted view, read as the rows
    were (one Message)."""
    with store.reader(name, partition, offset, verify_crc=verify_crc, read_compacted=read_compacted) as reader:
        messages = reader.read_messages(1)
    return messages[0].batch_attributes if messages else {}
