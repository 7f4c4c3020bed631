"""spark.readStream.format("seglog"): micro-batches of offset ranges, as Spark's Kafka source.

Offsets are JSON {"TOPIC": {"0": next offset, "1": ...}, ...}, topics in order and partitions in numeric order
(Spark compares them as text). A micro-batch reads [start, end) of each partition, so a batch planned again reads
the same rows and a restart from the checkpoint neither skips nor repeats any. With `subscription`, commit(end)
acknowledges the subscription up to `end`: Spark calls it only once a batch is done (one batch late, and maybe
never for the last one), so the acknowledgement may lag, never lead."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from pyspark_seglog.offset_ranges import OffsetRange, Offsets, end_offsets, plan, read_range, snapshot, start_offsets
from pyspark_seglog.options import SourceOptions
from pyspark_seglog.sessions import connect
from pyspark_seglog.value_schema import TopicValueSchema


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runs in one long-lived driver process per query, except read(), which gets a pickled copy on the
    executors (so all it needs travels in the OffsetRange).

    Each micro-batch selects the topics again, so a topicsPattern stream reads the topics created since, and
    every stream the partitions added since (update_partitions), from their earliest offsets, as Spark's Kafka
    source does. `clock` (ms, for maxTriggerDelay) is time.time's unless a test gives its own."""

    def __init__(self, options: SourceOptions, value_schema: TopicValueSchema | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self.value_schema = value_schema  # valueSchema 'topic': the version of the topic's schema read with
        self._initial: dict | None = None  # resolved once: Spark asks for it more than once
        self._available_now: Offsets | None = None  # trigger availableNow: the ends to stop at
        self._latest: Offsets | None = None  # the end offsets the last latestOffset() found (reportLatestOffset)
        self._last_trigger_ms: float | None = None  # when minOffsetsPerTrigger last let a micro-batch go
        self._clock = clock
        self.location = options.location.resolved()  # (the server's Flight port, found once)

    def initialOffset(self) -> dict:
        """Where a query without a checkpoint starts; the subscription, if named, is created there on each topic
        (or, if it exists and has acknowledged past it, moved back to it: it must never lead Spark)."""
        if self._initial is None:
            with connect(self.location) as session:
                now = snapshot(session.admin, self.options.selection.resolve(session.admin),
                               read_compacted=self.options.read_compacted)
                starts = start_offsets(session.admin, self.options, now)
                for topic, offsets in starts.items():
                    self._start_subscription(session.admin, topic, offsets)
            self._initial = offset_dict(starts)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger's limit, else minOffsetsPerTrigger's, else all. Spark hands it back to
        latestOffset(), or ReadAllAvailable for triggers that must read everything (availableNow), which then
        ignores both. (PySpark has no composite limit: with both options, latestOffset() applies the minimum.)"""
        options = self.options
        if options.max_offsets_per_trigger is not None:
            return ReadMaxRows(options.max_offsets_per_trigger)
        if options.min_offsets_per_trigger is not None:
            return ReadMinRows(options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with connect(self.location) as session:
            now = snapshot(session.admin, self.options.selection.resolve(session.admin))
            self._available_now = end_offsets(session.admin, self.options, now)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: every partition's end now (the ends availableNow took), within
        the limit. Partitions and topics that `start` lacks begin at their earliest offsets."""
        starts = self._offsets_in(start)
        with connect(self.location) as session:
            topics = self._topics(session.admin, starts)
            offsets = snapshot(session.admin, topics)
            for topic in topics:
                if topic not in starts:
                    self._start_subscription(session.admin, topic, offsets[topic].earliest)
        ends = ({t: self._available_now[t] for t in topics if t in self._available_now}
                if self._available_now is not None else {t: o.end for t, o in offsets.items()})
        begins = {(t, p): starts.get(t, {}).get(p, offsets[t].earliest[p]) for t in ends for p in ends[t]}
        flat = {key: max(ends[key[0]][key[1]], begin) for key, begin in begins.items()}  # (data loss is read's)
        self._latest = _nested(flat)
        if not isinstance(limit, ReadAllAvailable):
            if self._wait_for_more(begins, flat):
                return start
            if isinstance(limit, ReadMaxRows):
                flat = rate_limited(begins, flat, limit.max_rows)
        return offset_dict(_nested(flat))

    def reportLatestOffset(self) -> dict | None:
        """The end offsets the last micro-batch found, which Spark reports as the source's latestOffset in the
        query's progress (beside endOffset, what was read): how far behind the stream is."""
        return None if self._latest is None else offset_dict(self._latest)

    def partitions(self, start: dict, end: dict) -> list[OffsetRange]:
        ends = self._offsets_in(end)
        with connect(self.location) as session:
            now = snapshot(session.admin, list(ends), read_compacted=self.options.read_compacted)
        return plan(now, self.location, self._offsets_in(start), ends, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition, self.value_schema)

    def commit(self, end: dict) -> None:
        """Spark has committed everything before `end`: acknowledge it on the subscription of each topic. If
        another process consumes the subscription now, it is left alone; a later commit catches up."""
        if self.options.subscription is None:
            return
        with connect(self.location) as session:
            for topic, offsets in self._offsets_in(end).items():
                acknowledged = {p: o - 1 for p, o in offsets.items() if o > 0}
                if acknowledged:
                    session.admin.topics.ack_cumulative(topic, self.options.subscription, acknowledged)

    def _wait_for_more(self, begins: dict, ends: dict) -> bool:
        """Whether the micro-batch waits for minOffsetsPerTrigger, as Spark's Kafka source decides: not once
        maxTriggerDelay passed since the last micro-batch (nor for the first), else while fewer are waiting."""
        minimum = self.options.min_offsets_per_trigger
        if minimum is None:
            return False
        now = self._clock() * 1000
        overdue = self._last_trigger_ms is None or now - self._last_trigger_ms >= self.options.max_trigger_delay_ms
        if not overdue and sum(ends[key] - begins[key] for key in ends) < minimum:
            return True
        self._last_trigger_ms = now
        return False

    def _topics(self, admin: Any, starts: Offsets) -> list[str]:
        """The topics selected now; a topic of `starts` the selection still names but that is gone (deleted)
        is data loss: the query fails, or with failOnDataLoss false goes on without it."""
        from seglog.errors import OffsetOutOfRangeError
        topics = self.options.selection.resolve(admin)
        gone = sorted(set(starts) - set(topics))
        if gone and self.options.fail_on_data_loss:
            raise OffsetOutOfRangeError(f"the topics {', '.join(gone)} of the query's offsets are gone (deleted): "
                                        "their messages not read yet are lost. Set failOnDataLoss to false to "
                                        "go on without them")
        return topics

    def _start_subscription(self, admin: Any, topic: str, starts: dict[int, int]) -> None:
        if self.options.subscription is not None:
            _start_subscription(admin, topic, self.options.subscription, starts)

    def _offsets_in(self, offsets: dict) -> Offsets:
        """{topic: {partition: offset}} from Spark's offsets; an error naming the option if the checkpoint has a
        topic the options do not select (they changed)."""
        from seglog.errors import InvalidArgumentError
        selection = self.options.selection
        others = [topic for topic in offsets if not selection.selects(topic)]
        if others:
            raise InvalidArgumentError(selection.option, selection.text,
                                       f"the topics of the query's checkpoint, {', '.join(sorted(offsets))} "
                                       "(or start a new query, with a new checkpoint)")
        return {topic: {int(p): int(o) for p, o in by_partition.items()} for topic, by_partition in offsets.items()}


def offset_dict(offsets: Offsets) -> dict:
    """The offsets as Spark stores them: JSON keys in topic order, then numeric partition order (Spark compares
    offsets as text)."""
    return {topic: {str(p): offsets[topic][p] for p in sorted(offsets[topic])} for topic in sorted(offsets)}


def _nested(flat: dict[tuple[str, int], int]) -> Offsets:
    nested: Offsets = {}
    for (topic, partition), offset in flat.items():
        nested.setdefault(topic, {})[partition] = offset
    return nested


def _start_subscription(admin, topic: str, name: str, starts: dict[int, int]) -> None:
    if name not in admin.topics.subscriptions(topic):
        admin.topics.create_subscription(topic, name, starts)
        return
    cursors = admin.topics.internal_stats(topic)["partitions"]
    ahead = {p: start for p, start in starts.items()
             if cursors[str(p)]["cursors"][name]["markDeletePosition"] + 1 > start}
    if ahead:
        admin.topics.reset_cursor(topic, name, ahead)


def rate_limited(starts: dict[Any, int], ends: dict[Any, int], max_rows: int) -> dict[Any, int]:
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
