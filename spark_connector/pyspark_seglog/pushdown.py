"""Filters Spark pushes down to a batch read (DataSourceReader.pushFilters), turned into less to plan.

    topic = 'a', topic IN (...)             only those topics are planned            (exact: Spark drops them)
    partition = p, partition IN (...)       only those partitions                    (exact)
    offset =, >, >=, <, <= n                each partition's range cut to the offsets (exact)
    offset IN (...)                         the range from the least to the greatest (Spark keeps the filter)
    timestamp >= t, timestamp > t           each partition starts at its first message at or after t, found by
                                            the time index (Spark keeps the filter)

The time index answers "the first offset whose timestamp is at or after t" (admin.topics.offsets' offsetAtTimestamp:
the first batch whose running maximum timestamp reaches t, then the first of its messages that does), so every
message before that offset is older than t and leaving it out is exact. Messages after it may be older too
(producers set timestamps), so Spark applies the filter again to what is read. A partition that was ever compacted
(compactionHorizon above 0) is not cut by time: below its horizon a read may give the compacted view, whose log
may be gone (cleanup_policy=compact) and not searched by the index.

Streaming readers get no filters: PySpark 4.3 calls pushFilters on batch readers only."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, replace

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EXACT_SETS = {("topic",), ("partition",)}


@dataclass(frozen=True)
class PushedFilters:
    """What the pushed filters let a plan leave out: topics and partitions not named, offsets outside
    [offset_from, offset_until), and messages before each partition's first at or after `timestamp_from` (ms)."""
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    offset_from: int = 0
    offset_until: int | None = None
    timestamp_from: int | None = None

    def keeps_topic(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def keeps_partition(self, partition: int) -> bool:
        return self.partitions is None or partition in self.partitions

    def cut(self, start: int, end: int) -> tuple[int, int]:
        """[start, end) cut to the offsets the filters keep (empty: start >= end)."""
        until = end if self.offset_until is None else min(end, self.offset_until)
        return max(start, self.offset_from), until


def push(filters: Iterable[Filter]) -> tuple[PushedFilters, list[Filter]]:
    """The filters as PushedFilters, and those Spark must still apply (not pushed, or not exactly)."""
    pushed, left = PushedFilters(), []
    for found in filters:
        narrowed = _narrowed(pushed, found)
        if narrowed is None:
            left.append(found)
            continue
        pushed, exact = narrowed
        if not exact:
            left.append(found)
    return pushed, left


def _narrowed(pushed: PushedFilters, found: Filter) -> tuple[PushedFilters, bool] | None:
    """`pushed` narrowed by one filter and whether that is all it asks; None for a filter not pushed."""
    column, value = getattr(found, "attribute", None), getattr(found, "value", None)
    if column in _EXACT_SETS and isinstance(found, (EqualTo, In)):
        values = frozenset([value] if isinstance(found, EqualTo) else value or ())
        kind = str if column == ("topic",) else int
        if not all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
            return None
        if column == ("topic",):
            return replace(pushed, topics=values if pushed.topics is None else pushed.topics & values), True
        return replace(pushed, partitions=values if pushed.partitions is None else pushed.partitions & values), True
    if column == ("offset",) and isinstance(value, int) and not isinstance(value, bool):
        bounds = {EqualTo: (value, value + 1), GreaterThan: (value + 1, None), GreaterThanOrEqual: (value, None),
                  LessThan: (0, value), LessThanOrEqual: (0, value + 1)}.get(type(found))
        if bounds is None:
            return None
        return _offsets_within(pushed, *bounds), True
    if column == ("offset",) and isinstance(found, In) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return _offsets_within(pushed, min(value), max(value) + 1), False
    if column == ("timestamp",) and isinstance(found, (GreaterThan, GreaterThanOrEqual)) \
            and isinstance(value, dt.datetime):
        micros = (_utc(value) - _EPOCH) // dt.timedelta(microseconds=1)
        # stored times are ms: ms * 1000 >= micros from ceil(micros / 1000); > micros from floor(micros / 1000) + 1
        ms = -(-micros // 1000) if isinstance(found, GreaterThanOrEqual) else micros // 1000 + 1
        return replace(pushed, timestamp_from=max(ms, pushed.timestamp_from or 0)), False
    return None


def _offsets_within(pushed: PushedFilters, start: int, until: int | None) -> PushedFilters:
    ends = [u for u in (pushed.offset_until, until) if u is not None]
    return replace(pushed, offset_from=max(pushed.offset_from, start), offset_until=min(ends) if ends else None)


def _utc(value: dt.datetime) -> dt.datetime:
    """A filter's time, which PySpark gives in UTC (a naive one is read as UTC too)."""
    return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value
