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
from pyspark_seglog.options import EARLIEST, LATEST, Bound, ByTimestamp, SourceOptions
from pyspark_seglog.pushdown import PushedFilters
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


Offsets = dict[str, dict[int, int]]  # {topic, as the options name it: {partition: offset}}


def snapshot(admin: Any, topics: list[str], *, read_compacted: bool = False,
             timestamp: int | None = None) -> dict[str, TopicOffsets]:
    """Each topic's offsets, now (with `timestamp`, each partition's first offset at or after it too): what
    one step of planning resolves its offsets against, asked of the admin API once a topic."""
    return {topic: TopicOffsets.of(admin, topic, read_compacted=read_compacted, timestamp=timestamp)
            for topic in topics}


def start_offsets(admin: Any, options: SourceOptions, now: dict[str, TopicOffsets]) -> Offsets:
    """Where each partition of the topics of `now` (a snapshot() with the options' read_compacted) starts, by
    the starting bound of the options."""
    return _resolve(admin, options, now, options.starting, starting=True)


def end_offsets(admin: Any, options: SourceOptions, now: dict[str, TopicOffsets], bound: Bound = "latest") -> Offsets:
    """Where each partition of the topics of `now` (a snapshot()) ends: `bound`, the ending bound of the options
    for a batch query, 'latest' for a stream."""
    return _resolve(admin, options, now, bound, starting=False)


def _resolve(admin: Any, options: SourceOptions, now: dict[str, TopicOffsets], bound: Bound, *,
             starting: bool) -> Offsets:
    from seglog.errors import InvalidArgumentError
    option = "startingOffsets" if starting else "endingOffsets"
    topics = list(now)
    given = bound if isinstance(bound, dict) else bound.by_topic if isinstance(bound, ByTimestamp) else None
    if given is not None and set(given) != set(topics):
        option = bound.option if isinstance(bound, ByTimestamp) else option
        raise InvalidArgumentError(option, ", ".join(sorted(given)), "an object for every topic read and no "
                                   f"other, as named by {options.selection.describe()}: "
                                   f"{', '.join(topics) or 'none now'}")
    resolved = {}
    for topic, offsets in now.items():
        if isinstance(bound, ByTimestamp):
            resolved[topic] = _at_times(admin, options, offsets, topic, bound, starting=starting)
        elif isinstance(bound, str):
            resolved[topic] = dict(offsets.earliest if bound == "earliest" else offsets.end)
        else:
            spec = _every_partition(bound[topic], offsets, option)
            resolved[topic] = {p: offsets.earliest[p] if o == EARLIEST else offsets.end[p] if o == LATEST else o
                               for p, o in spec.items()}
    return resolved


def _every_partition(given: Any, offsets: TopicOffsets, option: str) -> Any:
    """`given` ({partition: value}), checked to name every partition of the topic."""
    from seglog.errors import InvalidArgumentError
    partitions = range(offsets.partitions)
    if set(given) != set(partitions):
        raise InvalidArgumentError(option, "partitions " + ", ".join(map(str, sorted(given))),
                                   f"offsets for every partition of {offsets.name}: {', '.join(map(str, partitions))}")
    return given


def _at_times(admin: Any, options: SourceOptions, offsets: TopicOffsets, topic: str, bound: ByTimestamp, *,
              starting: bool) -> dict[int, int]:
    """Each partition's first offset at or after its time. No message that recent: the end for an ending bound
    (Spark: latest); for a starting one, an error unless startingOffsetsByTimestampStrategy is 'latest'."""
    from seglog.errors import InvalidArgumentError
    times = ({p: bound.every for p in range(offsets.partitions)} if bound.every is not None
             else _every_partition((bound.by_topic or {})[topic], offsets, bound.option))
    found = {time: TopicOffsets.of(admin, topic, read_compacted=options.read_compacted, timestamp=time)
             for time in set(times.values())}
    at = {p: found[time].at_timestamp[p] for p, time in times.items()}
    late = [p for p, offset in sorted(at.items()) if offset >= found[times[p]].end[p]]
    if starting and late and options.timestamp_strategy == "error":
        raise InvalidArgumentError(bound.option, bound.every if bound.every is not None else topic,
                                   f"a time at or before the newest message of every partition (partitions "
                                   f"{', '.join(map(str, late))} of {offsets.name} have none that recent); or set "
                                   "startingOffsetsByTimestampStrategy to 'latest' to start there at the end")
    return at


def plan(now: dict[str, TopicOffsets], location: Location, starts: Offsets, ends: Offsets, options: SourceOptions,
         horizons: Offsets | None = None, pushed: PushedFilters | None = None) -> list[OffsetRange]:
    """The input partitions reading [starts[t][p], ends[t][p]) of each partition of each topic of `ends`, at
    most maxRecordsPerPartition offsets each (offsets, not rows: a compacted view has fewer rows than offsets,
    as Spark's Kafka source counts on a compacted topic). A partition `starts` lacks (a stream found it, or its
    topic, later) starts at its earliest offset, as in Spark's Kafka source. Offsets already deleted fail the
    query, or with failOnDataLoss false are left out; offsets deleted between the compacted view and the log
    are found when they are read. `now`: a snapshot() of the topics of `ends` with the options' read_compacted
    (and the pushed filters' timestamp_from), taken no earlier than `ends`. `horizons`: with readCompacted, the
    compaction horizons taken before `ends` were. `pushed`: what the filters Spark pushed down leave out
    (pushdown.py)."""
    pushed = pushed or PushedFilters()
    ranges = []
    for topic in filter(pushed.keeps_topic, sorted(ends)):
        ranges += _plan_topic(location, topic, now[topic], starts.get(topic, {}), ends[topic], options,
                              (horizons or {}).get(topic, {}), pushed)
    return ranges


def _plan_topic(location: Location, topic: str, offsets: TopicOffsets, starts: dict[int, int],
                ends: dict[int, int], options: SourceOptions, horizons: dict[int, int],
                pushed: PushedFilters) -> list[OffsetRange]:
    from seglog.errors import InvalidArgumentError
    if not set(starts) <= set(ends) <= set(range(offsets.partitions)):
        raise InvalidArgumentError("offsets", f"partitions {sorted(starts)} to {sorted(ends)}",
                                   f"the {offsets.partitions} partitions of {offsets.name} (was it deleted and "
                                   "created again? start a new query, with a new checkpoint)")
    ranges = []
    for partition in filter(pushed.keeps_partition, sorted(ends)):
        earliest = offsets.earliest[partition]
        start, end = starts.get(partition, earliest), ends[partition]
        written = offsets.end[partition]
        if end > written:
            raise InvalidArgumentError("endingOffsets", end, f"offsets up to the end offset {written} of "
                                       f"partition {partition} of {offsets.name}")
        if start > end:
            raise InvalidArgumentError("startingOffsets", start, f"offsets up to the ending offset {end} of "
                                       f"partition {partition} of {offsets.name}")
        start, end = pushed.cut(start, end)
        if pushed.timestamp_from is not None and not options.read_compacted and not offsets.horizon[partition]:
            start = max(start, offsets.at_timestamp[partition])  # all before it is older (pushdown.py)
        if start >= end:
            continue
        if start < earliest and start < end:
            check_data_loss(options.fail_on_data_loss, offsets.name, partition, start, min(earliest, end))
            start = min(earliest, end)
        step = options.max_records_per_partition or max(end - start, 1)
        max_horizon = max(end, horizons.get(partition, 0))
        ranges += [OffsetRange(location, topic, partition, s, min(s + step, end), options.fail_on_data_loss,
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
