"""What a query reads: offsets resolved against a topic, checked for data loss, cut into Spark input
partitions, and read back as record batches in the executors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from pyspark_seglog.arrow_rows import rebatched, spark_rows
from pyspark_seglog.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from pyspark_seglog.value_schema import TopicValueSchema, with_schema_versions


@contextmanager
def open_log(path: str) -> Iterator:
    """An existing data directory, opened without the housekeeping thread: Spark's processes persist no
    cursors between calls, and deleting segments is left to the process that writes them."""
    import seglog
    from seglog.errors import InvalidArgumentError
    if not seglog.is_data_directory(path):
        raise InvalidArgumentError("path", path, "an existing seglog data directory")
    with seglog.open(path, background=False) as log:
        yield log


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets [start, end) of one partition: one Spark input partition, all its reader needs."""
    path: str
    topic: str
    partition: int
    start: int
    end: int
    fail_on_data_loss: bool


def start_offsets(topic, options: SourceOptions) -> dict[int, int]:
    """Where each partition starts: startingTimestamp if given, else startingOffsets."""
    if options.starting_timestamp is not None:
        starts = {p: _offset_at(topic, options.starting_timestamp, p) for p in range(topic.partitions)}
        late = [p for p, offset in starts.items() if offset == topic.end_offset(p)]
        if late and options.timestamp_strategy == "error":
            from seglog.errors import InvalidArgumentError
            raise InvalidArgumentError("startingTimestamp", options.starting_timestamp,
                                       f"a time at or before the newest message of every partition (partitions "
                                       f"{', '.join(map(str, late))} of {topic.name} have none that recent); or "
                                       "set startingOffsetsByTimestampStrategy to 'latest' to start there at the end")
        return starts
    return _resolve(topic, options.starting, "startingOffsets")


def _offset_at(topic, timestamp: int, partition: int) -> int:
    """The first offset whose timestamp is at or after `timestamp` (the end offset if none is)."""
    with topic.reader({"timestamp": timestamp}, partition) as reader:
        return reader.offset


def end_offsets(topic, spec: OffsetSpec = "latest") -> dict[int, int]:
    """Where each partition ends, as of now (the snapshot a query plans with)."""
    return _resolve(topic, spec, "endingOffsets")


def _resolve(topic, spec: OffsetSpec, option: str) -> dict[int, int]:
    from seglog.errors import InvalidArgumentError
    partitions = range(topic.partitions)
    if isinstance(spec, str):
        return {p: topic.earliest_offset(p) if spec == "earliest" else topic.end_offset(p) for p in partitions}
    if set(spec) != set(partitions):
        given = "partitions " + ", ".join(map(str, sorted(spec)))
        raise InvalidArgumentError(option, given, f"offsets for every partition of {topic.name}: "
                                                  f"{', '.join(map(str, partitions))}")
    return {p: topic.earliest_offset(p) if o == EARLIEST else topic.end_offset(p) if o == LATEST else o
            for p, o in spec.items()}


def plan(topic, name: str, starts: dict[int, int], ends: dict[int, int], options: SourceOptions) -> list[OffsetRange]:
    """The input partitions reading [starts[p], ends[p]) of each partition, at most
    maxRecordsPerPartition offsets each. Offsets already deleted fail the query, or with failOnDataLoss
    false are left out."""
    from seglog.errors import InvalidArgumentError
    if set(starts) != set(range(topic.partitions)) or set(ends) != set(starts):
        raise InvalidArgumentError("offsets", f"partitions {sorted(starts)} to {sorted(ends)}",
                                   f"the {topic.partitions} partitions of {topic.name} (was it deleted and "
                                   "created again? start a new query, with a new checkpoint)")
    ranges = []
    for partition in range(topic.partitions):
        start, end = starts[partition], ends[partition]
        written = topic.end_offset(partition)
        if end > written:
            raise InvalidArgumentError("endingOffsets", end, f"offsets up to the end offset {written} of "
                                       f"partition {partition} of {topic.name}")
        if start > end:
            raise InvalidArgumentError("startingOffsets", start, f"offsets up to the ending offset {end} of "
                                       f"partition {partition} of {topic.name}")
        earliest = topic.earliest_offset(partition)
        if start < earliest and start < end:
            check_data_loss(options.fail_on_data_loss, topic.name, partition, start, min(earliest, end))
            start = min(earliest, end)
        step = options.max_records_per_partition or max(end - start, 1)
        ranges += [OffsetRange(options.path, name, partition, s, min(s + step, end), options.fail_on_data_loss)
                   for s in range(start, end, step)]
    return ranges


def check_data_loss(fail: bool, topic: str, partition: int, first: int, stop: int) -> None:
    """Messages [first, stop) were deleted before Spark read them: an error, unless failOnDataLoss is false."""
    if fail:
        from seglog.errors import OffsetOutOfRangeError
        raise OffsetOutOfRangeError(
            f"{topic} partition {partition}: offsets {first} to {stop - 1} were deleted (retention) before "
            f"Spark read them. Set the option failOnDataLoss to 'false' to read on from offset {stop}, as "
            "Spark's Kafka source does")


def read_range(piece: OffsetRange | InputPartition,
               value_schema: TopicValueSchema | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of `piece` in Spark's schema, in batches of about 64k rows; with `value_schema`, values
    decoded with it (valueSchema 'topic'). Spark hands a query that planned no range one empty
    InputPartition: it reads nothing."""
    if not isinstance(piece, OffsetRange):
        return
    with open_log(piece.path) as log:
        topic = log.topic(piece.topic)
        batches = _stored_batches(topic, piece)
        if value_schema is not None and value_schema.needs_versions:
            batches = with_schema_versions(topic, piece.partition, piece.start, batches)
        values = None if value_schema is None else value_schema.column(log)
        for batch in rebatched(batches):
            yield spark_rows(batch, piece.topic, piece.partition,
                             None if values is None else values.decode(batch, piece.partition))


def _stored_batches(topic, piece: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The stored batches holding [start, end), sliced to it. Messages deleted under the reader are data
    loss; with failOnDataLoss false the read goes on at the earliest offset left, never past `end`."""
    with topic.reader(piece.start, piece.partition) as reader:
        skipped = 0
        while reader.offset < piece.end:
            expected = reader.offset
            batch = reader.read_batch(max_messages=piece.end - expected)
            if reader.skipped > skipped:  # the reader went on at the earliest offset left
                check_data_loss(piece.fail_on_data_loss, topic.name, piece.partition, expected,
                                min(expected + reader.skipped - skipped, piece.end))
                skipped = reader.skipped
            if batch is None:
                if reader.offset < piece.end:
                    check_data_loss(piece.fail_on_data_loss, topic.name, piece.partition, reader.offset,
                                    piece.end)
                return
            first = batch.column("offset")[0].as_py()
            if first >= piece.end:
                return
            yield batch.slice(0, piece.end - first)
