"""A subscription's backlog on one partition, from the segment index and the cursor, never per message.

Cost: O(log segments) to place the mark-delete position, plus O(batches) of the window where individual
acks are (the AckSet kernel sums them per batch). Byte figures count whole stored batches; a batch partly
acknowledged (or partly before the mark-delete position) counts its bytes in proportion to its messages,
as the index knows batches, not messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seglog._core._acks import AckSet
from seglog._core._messages import batch_offsets, messages_from_batch
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
        try:
            segment = view.view(int(table.bases[i]))
            segment.refresh()
        except FileNotFoundError:  # deleted since `table` was made: its messages are no backlog any more
            i += 1
            continue
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
    """The partition's backlog: its log's, and where the compacted view stands for the log (Kafka's model),
    the view's messages below the log that the subscription is still to be given."""
    in_log = _log_backlog(view, table, acks)
    in_view = view_backlog(view, acks, table.earliest_offset)
    if in_view.messages == 0:
        return in_log
    return PartitionBacklog(in_log.messages + in_view.messages, in_log.bytes + in_view.bytes,
                            in_view.oldest_timestamp)


def view_backlog(view: PartitionView, acks: AckSet, earliest: int) -> PartitionBacklog:
    """The messages of the partition's compacted view below the log's `earliest` offset that `acks` has not
    acknowledged, when the view stands for the log (Kafka's model; else none): counted from the view's
    per-batch message counts, with a walk of the batches only where individual acks are and at the edge,
    as the log's; bytes in proportion to each batch's messages."""
    reach = view.compacted.reach(False, lambda: earliest)
    if reach is None or reach.file is None:
        return PartitionBacklog(0, 0, None)
    file, floor, limit = reach.file, acks.floor, reach.limit
    if floor >= limit:
        return PartitionBacklog(0, 0, None)
    sizes = np.diff(np.append(file.positions, len(file.data)))
    first, last = file.find(floor), min(file.find(limit), file.batches - 1)  # batches that may hold [floor, limit)
    walked = min(file.find(max(acks.high, floor)), last)  # batches up to this one may hold individual acks
    messages, size, oldest = 0, 0.0, None
    for index in [*range(first, walked + 1), *([last] if last > walked else [])]:
        position = int(file.positions[index])
        offsets = batch_offsets(file.data, position)
        rows = np.flatnonzero((offsets >= floor) & (offsets < limit))
        if len(rows):
            rows = rows[acks.unacked_mask(int(offsets[0]), int(offsets[-1]) + 1)[offsets[rows] - offsets[0]]]
        if oldest is None and len(rows) and index <= walked:
            oldest = messages_from_batch(file.data, position, 0, int(rows[0]), int(rows[0]) + 1)[0].timestamp
        messages += len(rows)
        size += float(sizes[index]) * len(rows) / len(offsets)
    if last > walked + 1:  # between them, whole batches no ack has touched
        messages += int(file.counted_before[last] - file.counted_before[walked + 1])
        size += float(sizes[walked + 1:last].sum())
        if oldest is None:
            oldest = messages_from_batch(file.data, int(file.positions[walked + 1]), 0, 0, 1)[0].timestamp
    if oldest is None and messages:  # (only the last batch has some)
        position = int(file.positions[last])
        offsets = batch_offsets(file.data, position)
        row = int(np.searchsorted(offsets, floor))
        oldest = messages_from_batch(file.data, position, 0, row, row + 1)[0].timestamp
    return PartitionBacklog(messages, int(size), oldest)


def _log_backlog(view: PartitionView, table: SegmentTable, acks: AckSet) -> PartitionBacklog:
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
