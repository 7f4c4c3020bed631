"""spark.readStream.format("seglog"): micro-batches of offset ranges, as Spark's Kafka source.

Offsets are JSON {"TOPIC": {"0": next offset, "1": ...}}, partitions in numeric order (Spark compares them
as text). A micro-batch reads [start, end) of each partition, so a batch planned again reads the same rows
and a restart from the checkpoint neither skips nor repeats any. With `subscription`, commit(end) acknowledges
the subscription up to `end`: Spark calls it only once a batch is done (one batch late, and maybe never for
the last one), so the acknowledgement may lag, never lead."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pyspark_seglog.offset_ranges import OffsetRange, end_offsets, open_log, plan, read_range, start_offsets
from pyspark_seglog.options import SourceOptions


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._available_now: dict[int, int] | None = None  # trigger availableNow: the ends to stop at

    def initialOffset(self) -> dict:
        with open_log(self.options.path) as log:
            topic = log.topic(self.options.topic)
            starts = start_offsets(topic, self.options)
            if self.options.subscription is not None:
                _create_subscription(topic, self.options.subscription, starts)
        return self._json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with open_log(self.options.path) as log:
            self._available_now = end_offsets(log.topic(self.options.topic))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        starts = self._partitions(start)
        if self._available_now is not None:
            ends = self._available_now
        else:
            with open_log(self.options.path) as log:
                ends = end_offsets(log.topic(self.options.topic))
        ends = {p: max(ends[p], starts[p]) for p in starts}  # never behind the start (data loss is read's)
        if isinstance(limit, ReadMaxRows):
            ends = rate_limited(starts, ends, limit.max_rows)
        return self._json(ends)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        with open_log(self.options.path) as log:
            return plan(log.topic(self.options.topic), self.options.topic, self._partitions(start),
                        self._partitions(end), self.options)

    def read(self, partition: OffsetRange) -> Iterator[pa.RecordBatch]:
        return read_range(partition)

    def commit(self, end: dict) -> None:
        if self.options.subscription is None:
            return
        with open_log(self.options.path) as log:
            topic = log.topic(self.options.topic)
            with topic.subscribe(self.options.subscription, initial_position="earliest") as consumer:
                for partition, offset in self._partitions(end).items():
                    if offset > 0:
                        consumer.ack_cumulative(offset - 1, partition=partition)

    def _json(self, offsets: dict[int, int]) -> dict:
        return {self.options.topic: {str(p): offsets[p] for p in sorted(offsets)}}

    def _partitions(self, offsets: dict) -> dict[int, int]:
        return {int(p): int(o) for p, o in offsets[self.options.topic].items()}


def _create_subscription(topic, name: str, starts: dict[int, int]) -> None:
    """A new subscription starts where the query starts; an existing one keeps its cursor."""
    if name in topic.subscriptions():
        return
    with topic.subscribe(name, initial_position="earliest") as consumer:
        for partition, offset in starts.items():
            consumer.seek(offset, partition=partition)


def rate_limited(starts: dict[int, int], ends: dict[int, int], max_rows: int) -> dict[int, int]:
    """Ends that take at most `max_rows` offsets in all, shared in proportion to what each partition has
    waiting (as Spark's Kafka source shares maxOffsetsPerTrigger); the shares' remainders go one each to
    the partitions with the most left over."""
    waiting = {p: ends[p] - starts[p] for p in starts}
    total = sum(waiting.values())
    if total <= max_rows:
        return dict(ends)
    shares = {p: max_rows * w // total for p, w in waiting.items()}
    left_over = sorted(waiting, key=lambda p: (-(max_rows * waiting[p] % total), p))
    for p in left_over[:max_rows - sum(shares.values())]:
        shares[p] += 1
    return {p: starts[p] + shares[p] for p in starts}
