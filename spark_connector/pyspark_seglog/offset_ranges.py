"""What a query reads: offsets resolved against a topic, checked for data loss, cut into Spark input
partitions, and read back as record batches in the executors.

Offsets keep their meaning when a partition's compacted view is read (readCompacted, or a log compacted by
cleanup_policy=compact): the view's rows keep their own offsets, with gaps between them, and a range [start, end)
gives the view's rows whose offsets are in it, then the log's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from pyspark_seglog.arrow_rows import rebatched, spark_rows
from pyspark_seglog.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from pyspark_seglog.value_schema import TopicValueSchema
from seglog.storage.range_read import check_data_loss


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
    """Offsets [start, end) of one partition: one Spark input partition, all its reader needs. With
    `read_compacted`, the partition's compacted view below its horizon, then the log; `max_horizon` is the
    highest horizon the view may have when it is read: the query's end in the partition, or the horizon the
    query was planned with if that is higher."""
    path: str
    topic: str
    partition: int
    start: int
    end: int
    fail_on_data_loss: bool
    read_compacted: bool = False
    max_horizon: int = 0


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
    return _resolve(topic, options.starting, "startingOffsets", options.read_compacted)


def _offset_at(topic, timestamp: int, partition: int) -> int:
    """The first offset whose timestamp is at or after `timestamp` (the end offset if none is)."""
    with topic.reader({"timestamp": timestamp}, partition) as reader:
        return reader.offset


def end_offsets(topic, spec: OffsetSpec = "latest") -> dict[int, int]:
    """Where each partition ends, as of now (the snapshot a query plans with)."""
    return _resolve(topic, spec, "endingOffsets")


def earliest_readable(topic, partition: int, read_compacted: bool) -> int:
    """The first offset a read of the partition can give, as seglog's reader resolves 'earliest': the log's
    first offset, or the compacted view's first when the view is read below the log (with read_compacted, or
    where the view stands for a compacted log)."""
    with topic.reader("earliest", partition, read_compacted=read_compacted) as reader:
        return reader.offset


def compaction_horizons(topic) -> dict[int, int]:
    """Each partition's compaction horizon now (0 where it was never compacted)."""
    horizons = {}
    for partition in range(topic.partitions):
        with topic.reader("earliest", partition) as reader:
            horizons[partition] = reader.compacted_view.horizon()
    return horizons


def _resolve(topic, spec: OffsetSpec, option: str, read_compacted: bool = False) -> dict[int, int]:
    from seglog.errors import InvalidArgumentError
    partitions = range(topic.partitions)
    if isinstance(spec, str):
        return {p: earliest_readable(topic, p, read_compacted) if spec == "earliest" else topic.end_offset(p)
                for p in partitions}
    if set(spec) != set(partitions):
        given = "partitions " + ", ".join(map(str, sorted(spec)))
        raise InvalidArgumentError(option, given, f"offsets for every partition of {topic.name}: "
                                                  f"{', '.join(map(str, partitions))}")
    return {p: earliest_readable(topic, p, read_compacted) if o == EARLIEST else topic.end_offset(p)
            if o == LATEST else o for p, o in spec.items()}


def plan(topic, name: str, starts: dict[int, int], ends: dict[int, int], options: SourceOptions,
         horizons: dict[int, int] | None = None) -> list[OffsetRange]:
    """The input partitions reading [starts[p], ends[p]) of each partition, at most
    maxRecordsPerPartition offsets each (offsets, not rows: a compacted view has fewer rows than offsets, as
    Spark's Kafka source counts on a compacted topic). Offsets already deleted fail the query, or with
    failOnDataLoss false are left out; offsets deleted between the compacted view and the log are found when
    they are read. `horizons`: with readCompacted, the compaction horizons taken before `ends` were."""
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
        earliest = earliest_readable(topic, partition, options.read_compacted)
        if start < earliest and start < end:
            check_data_loss(options.fail_on_data_loss, topic.name, partition, start, min(earliest, end))
            start = min(earliest, end)
        step = options.max_records_per_partition or max(end - start, 1)
        max_horizon = max(end, (horizons or {}).get(partition, 0))
        ranges += [OffsetRange(options.path, name, partition, s, min(s + step, end), options.fail_on_data_loss,
                               options.read_compacted, max_horizon)
                   for s in range(start, end, step)]
    return ranges


def read_range(piece: OffsetRange | InputPartition,
               value_schema: TopicValueSchema | None = None) -> Iterator[pa.RecordBatch]:
    """The rows of `piece` in Spark's schema, in batches of about 64k rows; with `value_schema`, values
    decoded with it (valueSchema 'topic'). Spark hands a query that planned no range one empty
    InputPartition: it reads nothing."""
    if not isinstance(piece, OffsetRange):
        return
    with open_log(piece.path) as log:
        topic = log.topic(piece.topic)
        batches = topic.read_range(piece.partition, piece.start, piece.end, read_compacted=piece.read_compacted,
                                   fail_on_data_loss=piece.fail_on_data_loss, max_horizon=piece.max_horizon,
                                   schema_versions=value_schema is not None and value_schema.needs_versions)
        values = None if value_schema is None else value_schema.column(log)
        for batch in rebatched(batches):
            yield spark_rows(batch, piece.topic, piece.partition,
                             None if values is None else values.decode(batch, piece.partition))
