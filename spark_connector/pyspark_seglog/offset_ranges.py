"""What a query reads: offsets resolved against a snapshot of a topic's offsets, checked for data loss, cut into
Spark input partitions, and read back as record batches in the executors.

Offsets keep their meaning when a partition's compacted view is read (readCompacted, or a log compacted by
cleanup_policy=compact): the view's rows keep their own offsets, with gaps between them, and a range [start, end)
gives the view's rows whose offsets are in it, then the log's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from pyspark_seglog.arrow_rows import rebatched, spark_rows
from pyspark_seglog.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from pyspark_seglog.sessions import Location, connect
from pyspark_seglog.value_schema import TopicValueSchema
from seglog.storage.range_read import check_data_loss


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Offsets [start, end) of one partition: one Spark input partition, all its reader needs. With
    `read_compacted`, the partition's compacted view below its horizon, then the log; `max_horizon` is the
    highest horizon the view may have when it is read: the query's end in the partition, or the horizon the
    query was planned with if that is higher."""
    location: Location
    topic: str
    partition: int
    start: int
    end: int
    fail_on_data_loss: bool
    read_compacted: bool = False
    max_horizon: int = 0


@dataclass(frozen=True)
class TopicOffsets:
    """A topic's offsets at one moment (admin.topics.offsets): per partition the first offset a read gives,
    the end offset, the compaction horizon (taken before the end) and, when asked for, the first offset at or
    after a time."""
    name: str  # in full, tenant/namespace/topic, as errors name it
    earliest: dict[int, int]
    end: dict[int, int]
    horizon: dict[int, int]
    at_timestamp: dict[int, int]

    @classmethod
    def of(cls, admin: Any, name: str, *, read_compacted: bool = False, timestamp: int | None = None) -> TopicOffsets:
        from seglog.names import TopicName
        found = admin.topics.offsets(name, read_compacted=read_compacted, timestamp=timestamp)
        by = lambda key: {p["partition"]: p[key] for p in found if key in p}  # noqa: E731
        return cls(str(TopicName.parse(name)), by("earliestOffset"), by("endOffset"), by("compactionHorizon"),
                   by("offsetAtTimestamp"))

    @property
    def partitions(self) -> int:
        return len(self.end)


def start_offsets(admin: Any, options: SourceOptions) -> dict[int, int]:
    """Where each partition starts: startingTimestamp if given, else startingOffsets."""
    offsets = TopicOffsets.of(admin, options.topic, read_compacted=options.read_compacted,
                              timestamp=options.starting_timestamp)
    if options.starting_timestamp is not None:
        starts = offsets.at_timestamp
        late = [p for p, offset in starts.items() if offset == offsets.end[p]]
        if late and options.timestamp_strategy == "error":
            from seglog.errors import InvalidArgumentError
            raise InvalidArgumentError("startingTimestamp", options.starting_timestamp,
                                       f"a time at or before the newest message of every partition (partitions "
                                       f"{', '.join(map(str, late))} of {offsets.name} have none that recent); "
                                       "or set startingOffsetsByTimestampStrategy to 'latest' to start there at "
                                       "the end")
        return starts
    return _resolve(offsets, options.starting, "startingOffsets")


def end_offsets(admin: Any, name: str, spec: OffsetSpec = "latest") -> dict[int, int]:
    """Where each partition ends, as of now (the snapshot a query plans with)."""
    return _resolve(TopicOffsets.of(admin, name), spec, "endingOffsets")


def _resolve(offsets: TopicOffsets, spec: OffsetSpec, option: str) -> dict[int, int]:
    from seglog.errors import InvalidArgumentError
    partitions = range(offsets.partitions)
    if isinstance(spec, str):
        return dict(offsets.earliest if spec == "earliest" else offsets.end)
    if set(spec) != set(partitions):
        given = "partitions " + ", ".join(map(str, sorted(spec)))
        raise InvalidArgumentError(option, given, f"offsets for every partition of {offsets.name}: "
                                                  f"{', '.join(map(str, partitions))}")
    return {p: offsets.earliest[p] if o == EARLIEST else offsets.end[p] if o == LATEST else o
            for p, o in spec.items()}


def plan(admin: Any, location: Location, starts: dict[int, int], ends: dict[int, int], options: SourceOptions,
         horizons: dict[int, int] | None = None) -> list[OffsetRange]:
    """The input partitions reading [starts[p], ends[p]) of each partition, at most
    maxRecordsPerPartition offsets each (offsets, not rows: a compacted view has fewer rows than offsets, as
    Spark's Kafka source counts on a compacted topic). Offsets already deleted fail the query, or with
    failOnDataLoss false are left out; offsets deleted between the compacted view and the log are found when
    they are read. `horizons`: with readCompacted, the compaction horizons taken before `ends` were."""
    from seglog.errors import InvalidArgumentError
    offsets = TopicOffsets.of(admin, options.topic, read_compacted=options.read_compacted)
    if set(starts) != set(range(offsets.partitions)) or set(ends) != set(starts):
        raise InvalidArgumentError("offsets", f"partitions {sorted(starts)} to {sorted(ends)}",
                                   f"the {offsets.partitions} partitions of {offsets.name} (was it deleted and "
                                   "created again? start a new query, with a new checkpoint)")
    ranges = []
    for partition in range(offsets.partitions):
        start, end = starts[partition], ends[partition]
        written = offsets.end[partition]
        if end > written:
            raise InvalidArgumentError("endingOffsets", end, f"offsets up to the end offset {written} of "
                                       f"partition {partition} of {offsets.name}")
        if start > end:
            raise InvalidArgumentError("startingOffsets", start, f"offsets up to the ending offset {end} of "
                                       f"partition {partition} of {offsets.name}")
        earliest = offsets.earliest[partition]
        if start < earliest and start < end:
            check_data_loss(options.fail_on_data_loss, offsets.name, partition, start, min(earliest, end))
            start = min(earliest, end)
        step = options.max_records_per_partition or max(end - start, 1)
        max_horizon = max(end, (horizons or {}).get(partition, 0))
        ranges += [OffsetRange(location, options.topic, partition, s, min(s + step, end), options.fail_on_data_loss,
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
    with connect(piece.location) as session:
        batches = session.read(piece.topic, piece.partition, piece.start, piece.end,
                               read_compacted=piece.read_compacted, fail_on_data_loss=piece.fail_on_data_loss,
                               max_horizon=piece.max_horizon,
                               schema_versions=value_schema is not None and value_schema.needs_versions)
        values = None if value_schema is None else value_schema.column(session.admin.schemas)
        for batch in rebatched(batches):
            yield spark_rows(batch, piece.topic, piece.partition,
                             None if values is None else values.decode(batch, piece.partition))
