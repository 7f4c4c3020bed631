"""spark.readStream.format("seglog"): micro-batches of offset ranges, as Spark's Kafka source.

Offsets are JSON {"TOPIC": {"0": next offset, "1": ...}}, partitions in numeric order (Spark compares them
as text). A micro-batch reads [start, end) of each partition, so a batch planned again reads the same rows
and a restart from the checkpoint neither skips nor repeats any. With `subscription`, commit(end) acknowledges
the subscription up to `end`: Spark calls it only once a batch is done (one batch late, and maybe never for
the last one), so the acknowledgement may lag, never lead."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pyspark_seglog.offset_ranges import OffsetRange, end_offsets, plan, read_range, start_offsets
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.sessions import connect
from pyspark_seglog.value_schema import TopicValueSchema


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runs in one long-lived driver process per query, except read(), which gets a pickled copy on the
    executors (so all it needs travels in the OffsetRange)."""

    def __init__(self, options: SourceOptions, value_schema: TopicValueSchema | None = None) -> None:
        self.options = options
        self.value_schema = value_schema  # valueSchema 'topic': the version of the topic's schema read with
        self._initial: dict | None = None  # resolved once: Spark asks for it more than once
        self._available_now: dict[int, int] | None = None  # trigger availableNow: the ends to stop at
        self.location = options.location.resolved()  # (the server's Flight port, found once)

    def initialOffset(self) -> dict:
        """Where a query without a checkpoint starts; the subscription, if named, is created there (or, if
        it exists and has acknowledged past it, moved back to it: it must never lead Spark)."""
        if self._initial is None:
            with connect(self.location) as session:
                starts = start_offsets(session.admin, self.options)
                if self.options.subscription is not None:
                    _start_subscription(session.admin, self.options.topic, self.options.subscription, starts)
            self._initial = self._offset_dict(starts)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with connect(self.location) as session:
            self._available_now = end_offsets(session.admin, self.options.topic)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        starts = self._offsets_in(start)
        if self._available_now is not None:
            ends = self._available_now
        else:
            with connect(self.location) as session:
                ends = end_offsets(session.admin, self.options.topic)
        ends = {p: max(ends[p], starts[p]) for p in starts}  # never behind the start (data loss is read's)
        if isinstance(limit, ReadMaxRows):
            ends = rate_limited(starts, ends, limit.max_rows)
        return self._offset_dict(ends)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        with connect(self.location) as session:
            return plan(session.admin, self.location, self._offsets_in(start), self._offsets_in(end), self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition, self.value_schema)

    def commit(self, end: dict) -> None:
        """Spark has committed everything before `end`: acknowledge it on the subscription. If another
        process consumes the subscription now, it is left alone; a later commit catches up."""
        if self.options.subscription is None:
            return
        offsets = {p: o - 1 for p, o in self._offsets_in(end).items() if o > 0}
        if offsets:
            with connect(self.location) as session:
                session.admin.topics.ack_cumulative(self.options.topic, self.options.subscription, offsets)

    def _offset_dict(self, offsets: dict[int, int]) -> dict:
        """The offsets as Spark stores them: JSON keys in numeric partition order."""
        return {self.options.topic: {str(p): offsets[p] for p in sorted(offsets)}}

    def _offsets_in(self, offsets: dict) -> dict[int, int]:
        """{partition: offset} from Spark's offsets; an error naming the topics if the checkpoint is of
        another topic (the topic option changed)."""
        from seglog.errors import InvalidArgumentError
        if set(offsets) != {self.options.topic}:
            raise InvalidArgumentError("topic", self.options.topic, f"the topic of the query's checkpoint: "
                                       f"{', '.join(offsets)}")
        return {int(p): int(o) for p, o in offsets[self.options.topic].items()}


def _start_subscription(admin, topic: str, name: str, starts: dict[int, int]) -> None:
    if name not in admin.topics.subscriptions(topic):
        admin.topics.create_subscription(topic, name, starts)
        return
    cursors = admin.topics.internal_stats(topic)["partitions"]
    ahead = {p: start for p, start in starts.items()
             if cursors[str(p)]["cursors"][name]["markDeletePosition"] + 1 > start}
    if ahead:
        admin.topics.reset_cursor(topic, name, ahead)


def rate_limited(starts: dict[int, int], ends: dict[int, int], max_rows: int) -> dict[int, int]:
    """Ends that take about `max_rows` offsets in all, shared in proportion to what each partition has
    waiting, as Spark's Kafka source shares maxOffsetsPerTrigger: the shares' remainders go one each to
    the partitions with the most left over, and a partition with messages waiting gets at least one, so
    none starves (which can take a few more than `max_rows`, one per partition at most, as in Spark)."""
    waiting = {p: ends[p] - starts[p] for p in starts}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(ends)
    shares = {p: max_rows * w // total for p, w in waiting.items()}
    left_over = sorted(waiting, key=lambda p: (-(max_rows * waiting[p] % total), p))
    for p in left_over[:max_rows - sum(shares.values())]:
        shares[p] += 1
    return {p: starts[p] + max(shares[p], min(waiting[p], 1)) for p in starts}
