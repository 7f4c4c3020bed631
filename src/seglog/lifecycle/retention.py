"""Which segments of a partition the lifecycle rules delete, and why each of the others is kept.

The rules (docs/LIFECYCLE.md: retention, segment eviction, minimum timestamp), checked for each sealed
segment, oldest first:
- Fluvio's `retention_time`: its last write is at least that long ago;
- Fluvio's `max_partition_size`: the partition, from this segment on, is larger than the limit;
- Kafka's `retention_min_timestamp`: its newest timestamp is below the minimum;
- Pulsar's retention, for segments every subscription has acknowledged: last write at least the retention
  time ago, or the acknowledged segments from this one on larger than the retention size.
The first three hold whatever the subscriptions say. Deletion takes a prefix, as in Kafka: the oldest
segment that must stay keeps every newer one, so a partition's offsets stay dense from its earliest on.
The active segment is never deleted. An age equal to a limit counts as reached (LIFECYCLE.md's worked
example deletes on day 7 a segment last written on day 0 under a 7-day retention_time)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seglog.catalog.policies import InForce, Retention
from seglog.storage.segment_table import SegmentTable
from seglog.units import format_duration, readable_size


@dataclass(frozen=True)
class Limits:
    """The limits in force for one topic."""
    retention: InForce  # Retention, and the level it was set at
    retention_time: int | None
    max_partition_size: int | None
    min_timestamp: int  # 0: off


@dataclass(frozen=True)
class AckFloor:
    """How far all the topic's subscriptions have acknowledged one partition (the lowest of their
    cursors' ack floors): every offset below `acked_until` is acknowledged by all of them (the end offset when
    there are none); `slowest` names the subscription that acknowledged least (None without subscriptions)."""
    acked_until: int
    slowest: str | None


def deletable(table: SegmentTable, limits: Limits, now: int, ack_floor: AckFloor) -> np.ndarray:
    """Per segment, whether some rule deletes it on its own (before the oldest-first prefix is taken)."""
    n = len(table)
    sizes = table.sizes
    sealed = np.arange(n) < n - 1
    older = np.concatenate(([0], np.cumsum(sizes)[:-1]))  # bytes in the segments before each one
    age = now - table.last_write_ms
    verdict = np.zeros(n, dtype=bool)
    if limits.retention_time is not None:
        verdict |= age >= limits.retention_time
    if limits.max_partition_size is not None:
        verdict |= table.total_size - older > limits.max_partition_size
    if limits.min_timestamp:
        verdict |= table.max_timestamps < limits.min_timestamp
    acked = sealed & (table.next_offsets <= ack_floor.acked_until)  # a prefix: next_offsets ascend
    retention: Retention = limits.retention.value
    if retention.time_ms >= 0:
        verdict |= acked & (age >= retention.time_ms)
    if retention.size_bytes >= 0:
        verdict |= acked & (sizes[acked].sum() - older > retention.size_bytes)
    return verdict & sealed


def deletable_prefix(table: SegmentTable, limits: Limits, now: int, ack_floor: AckFloor) -> int:
    """How many of the oldest segments this pass deletes."""
    if len(table) < 2:
        return 0
    return _prefix(deletable(table, limits, now, ack_floor))


def _prefix(verdict: np.ndarray) -> int:
    return int(np.argmin(verdict))  # the active segment is never deletable, so a False exists


@dataclass(frozen=True)
class SegmentFate:
    """One segment as `explain` reports it."""
    base_offset: int
    next_offset: int
    size: int
    last_write_ms: int
    deleted_next_pass: bool
    rule: str
    reason: str
    deleted_at_ms: int | None  # when a time rule deletes it if nothing else changes; None if no time rule will

    def to_dict(self) -> dict:
        return {"baseOffset": self.base_offset, "nextOffset": self.next_offset, "size": self.size,
                "lastWriteMs": self.last_write_ms, "deletedNextPass": self.deleted_next_pass,
                "rule": self.rule, "reason": self.reason, "deletedAtMs": self.deleted_at_ms}


def explain(table: SegmentTable, limits: Limits, now: int, ack_floor: AckFloor) -> list[SegmentFate]:
    """For each segment, the rule that deletes it at the next pass, or the rule that keeps it and when a
    time rule will delete it."""
    verdict = deletable(table, limits, now, ack_floor) if len(table) > 1 else np.zeros(len(table), dtype=bool)
    prefix = _prefix(verdict) if len(table) > 1 else 0
    fates = []
    for i in range(len(table)):
        rule, reason = (_why_deleted if i < prefix else _why_kept)(table, limits, now, ack_floor, i, verdict)
        fates.append(SegmentFate(int(table.bases[i]), int(table.next_offsets[i]), int(table.sizes[i]),
                                 int(table.last_write_ms[i]), i < prefix, rule, reason,
                                 _deleted_at(table, limits, ack_floor, i)))
    return fates


def _why_deleted(table, limits, now, ack_floor, i, verdict) -> tuple[str, str]:
    age = now - int(table.last_write_ms[i])
    older = int(table.sizes[:i].sum())
    retention: Retention = limits.retention.value
    acked = int(table.next_offsets[i]) <= ack_floor.acked_until
    if limits.retention_time is not None and age >= limits.retention_time:
        return "retention_time", (f"last written {format_duration(age)} ago, at least the topic's "
                                  f"retention_time of {format_duration(limits.retention_time)}")
    if limits.max_partition_size is not None and table.total_size - older > limits.max_partition_size:
        return "max_partition_size", (f"the partition holds {readable_size(table.total_size - older)} from this "
                                      f"segment on, more than max_partition_size "
                                      f"{readable_size(limits.max_partition_size)}")
    if limits.min_timestamp and table.max_timestamps[i] < limits.min_timestamp:
        return "retention_min_timestamp", (f"newest timestamp {int(table.max_timestamps[i])} is below "
                                           f"retention_min_timestamp {limits.min_timestamp}")
    assert acked
    if retention.time_ms >= 0 and age >= retention.time_ms:
        return "retention", (f"acknowledged, and last written {format_duration(age)} ago, at least the "
                             f"retention time of {format_duration(retention.time_ms)} "
                             f"(set at {limits.retention.level} level)")
    return "retention", (f"acknowledged, and the acknowledged segments hold more than the retention size "
                         f"of {readable_size(retention.size_bytes)} (set at {limits.retention.level} level)")


def _why_kept(table, limits, now, ack_floor, i, verdict) -> tuple[str, str]:
    if i == len(table) - 1:
        return "active", ("the active segment takes the writes and is never deleted; it starts to age when a "
                          "newer segment takes over")
    if verdict[i]:
        rule, reason = _why_deleted(table, limits, now, ack_floor, i, verdict)
        return "older segment kept", (f"{rule} would delete it ({reason}), but deletion goes oldest first and "
                                      "an older segment is kept")
    retention: Retention = limits.retention.value
    if int(table.next_offsets[i]) > ack_floor.acked_until:
        return "backlog", (f"subscription {ack_floor.slowest!r} has not acknowledged it: its backlog starts at "
                           f"offset {ack_floor.acked_until}")
    level = limits.retention.level
    if retention.infinite:
        return "retention", f"retention -1/-1 (set at {level} level) keeps acknowledged messages forever"
    parts = []
    if retention.time_ms >= 0:
        parts.append(f"time {format_duration(retention.time_ms)} not yet reached")
    if retention.size_bytes >= 0:
        parts.append(f"acknowledged data within size {readable_size(retention.size_bytes)}")
    return "retention", f"retention (set at {level} level): {', '.join(parts)}"


def _deleted_at(table: SegmentTable, limits: Limits, ack_floor: AckFloor, i: int) -> int | None:
    """The earliest time a time rule deletes sealed segment i if nothing else changes (the older segments
    and acknowledgements aside)."""
    if i == len(table) - 1:
        return None
    last_write = int(table.last_write_ms[i])
    deadlines = []
    if limits.retention_time is not None:
        deadlines.append(last_write + limits.retention_time)
    retention: Retention = limits.retention.value
    if retention.time_ms >= 0 and int(table.next_offsets[i]) <= ack_floor.acked_until:
        deadlines.append(last_write + retention.time_ms)
    return min(deadlines) if deadlines else None
