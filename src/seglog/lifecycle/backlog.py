"""A subscription's backlog on one partition, from the segment index and the cursor, never per message.

Cost: O(log segments) to place the mark-delete position, plus O(batches) of the window where individual
acks are (the AckSet kernel sums them per batch). Byte figures count whole stored batches; a batch partly
acknowledged (or partly before the mark-delete position) counts its bytes in proportion to its messages,
as the index knows batches, not messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seglog._core._acks import AckSet
from seglog.storage.partition_view import PartitionView
from seglog.storage.segment_table import SegmentTable


@dataclass(frozen=True)
class PartitionBacklog:
    messages: int
    bytes: int
    oldest_timestamp: int | None  # timestamp of the oldest unacknowledged message; None without backlog


def batches_between(view: PartitionView, table: SegmentTable, start: int, stop: int):
    """(first offsets, next offsets, byte sizes) of the stored batches overlapping [start, stop)."""
    firsts, nexts, sizes = [], [], []
    i = max(int(np.searchsorted(table.bases, start, side="right")) - 1, 0)
    while i < len(table) and table.bases[i] < stop:
        segment = view.view(int(table.bases[i]))
        segment.refresh()
        next_offsets, ends, _ = segment.index.arrays()
        first_offsets = np.concatenate(([table.bases[i]], next_offsets[:-1]))
        starts = np.concatenate(([0], ends[:-1]))
        keep = (next_offsets > start) & (first_offsets < stop)
        firsts.append(first_offsets[keep])
        nexts.append(next_offsets[keep])
        sizes.append((ends - starts)[keep])
        i += 1
    if not firsts:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(firsts), np.concatenate(nexts), np.concatenate(sizes)


def bytes_from(view: PartitionView, table: SegmentTable, offset: int) -> int:
    """Bytes of the messages from `offset` to the end of the partition."""
    if offset >= table.end_offset:
        return 0
    offset = max(offset, table.earliest_offset)
    i = int(np.searchsorted(table.bases, offset, side="right")) - 1
    later_segments = int(table.log_sizes[i + 1:].sum())
    firsts, nexts, sizes = batches_between(view, table, offset, int(table.next_offsets[i]))
    if not len(firsts):
        return later_segments
    head = sizes[0] * (nexts[0] - offset) / (nexts[0] - firsts[0])  # the batch holding `offset`, pro rata
    return later_segments + int(head) + int(sizes[1:].sum())


def backlog_count(table: SegmentTable, acks: AckSet) -> int:
    """The messages of the partition that `acks` has not acknowledged (and retention has not deleted)."""
    end = table.end_offset
    floor = max(acks.floor, table.earliest_offset)
    return 0 if floor >= end else end - floor - acks.acked_count(floor, end)


def partition_backlog(view: PartitionView, table: SegmentTable, acks: AckSet) -> PartitionBacklog:
    end = table.end_offset
    floor = max(acks.floor, table.earliest_offset)
    if floor >= end:
        return PartitionBacklog(0, 0, None)
    messages = backlog_count(table, acks)
    size = bytes_from(view, table, floor)
    high = min(acks.high, end)
    if high > floor:
        firsts, nexts, sizes = batches_between(view, table, floor, high)
        bounds = np.append(firsts, nexts[-1]) if len(firsts) else np.zeros(1, dtype=np.int64)
        bounds[0] = max(int(bounds[0]), floor)
        weights = sizes / (nexts - firsts) if len(firsts) else np.zeros(0)
        size -= int(acks.weighted_acked(bounds.astype(np.int64), weights.astype(np.float64)))
    oldest = acks.next_unacked(floor)
    return PartitionBacklog(messages, max(size, 0), timestamp_of(view, oldest) if oldest < end else None)


def timestamp_of(view: PartitionView, offset: int) -> int:
    """The timestamp of the message at `offset` (which must be stored)."""
    base = view.segment_for(offset)
    assert base is not None, f"offset {offset} is stored, so some segment holds it"
    return view.view(base).timestamp_of(offset)


def offset_within_bytes(view: PartitionView, table: SegmentTable, target: int) -> int:
    """The smallest offset from which the rest of the partition holds at most `target` bytes."""
    from_end = np.cumsum(table.log_sizes[::-1])[::-1]  # bytes from the start of each segment to the end
    i = int(np.searchsorted(-from_end, -target, side="left"))  # first segment whose tail fits
    if i == 0:
        return table.earliest_offset
    i -= 1  # the segment in which the cut falls
    budget = target - (int(from_end[i + 1]) if i + 1 < len(table) else 0)
    firsts, nexts, sizes = batches_between(view, table, int(table.bases[i]), int(table.next_offsets[i]))
    tails = np.cumsum(sizes[::-1])[::-1]
    j = int(np.searchsorted(-tails, -budget, side="left"))
    if j == 0:
        return int(table.bases[i])
    j -= 1  # the batch in which the cut falls: keep as many of its last messages as fit
    spare = budget - (int(tails[j + 1]) if j + 1 < len(tails) else 0)
    per_message = sizes[j] / (nexts[j] - firsts[j])
    return int(nexts[j]) - int(spare // per_message)
