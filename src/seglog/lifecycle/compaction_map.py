"""Each key's latest message over a range of a partition's offsets, and every message's verdict: what a
compactor needs before it rewrites segments (Kafka's cleanup.policy=compact, Pulsar's topic compaction).

`build_compaction_map(view, start, end, max_keys=...)` is pass 1: it walks the partition's segments over
[start, end), one kernel call per segment over its mapped batches (seglog._core._compact has the design:
the 128-bit key hash, the offset map's 24-byte slots, its sizing), and keeps the sorted offsets of each
key's latest message; the map itself is released at once. `CompactionMap.segments()` is pass 2: per
segment, one Verdict a message (SUPERSEDED, LATEST, LATEST_TOMBSTONE, KEYLESS) and the stored batches they
fall in, so a compactor holds one segment's verdicts at a time (at most VERDICT_CHUNK of them: a long
segment comes in parts).

A compactor that has a compacted view of older offsets passes its file as `previous`: before the map is
released, each of the file's messages is looked up in it (SUPERSEDED when the range has its key again), so
the map holds the keys of the new range only, as Kafka's cleaner holds the dirty range's.

Sizing: `max_keys` bounds the range's distinct keys; the map takes 30 bytes a key of the bound (24 a slot,
at most 80% of the slots used), 28.6 MiB for a million keys, and the sorted offsets 8 bytes a key found.
The range's message count is always a bound, so the map is never sized above it; a caller with a memory
budget passes budget // 30 (Kafka sizes its cleaner's map from log.cleaner.dedupe.buffer.size the same
way). A range with more keys than the bound is refused with InvalidArgumentError naming the bound: a key
is never dropped or merged to make room. With `cut_when_full`, the map covers the range up to the stored
batch where it filled instead (a shorter range, built again over exactly that prefix), as Kafka's cleaner
cleans what its map holds and leaves the rest for its next round."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from seglog._core._compact import (
    MAP_DONE,
    MAP_FULL,
    SLOT_BYTES,
    OffsetMap,
    Verdict,
    capacity_for,
    classify_segment,
)
from seglog._core._index import IndexView
from seglog._core._mapping import Mapping
from seglog.errors import CorruptLogError, InvalidArgumentError
from seglog.storage.compacted import CompactedFile
from seglog.storage.partition_view import MAX_OFFSET, PartitionView, SegmentView, is_offset

__all__ = ["CompactionMap", "SegmentVerdicts", "Verdict", "build_compaction_map", "map_bytes"]

VERDICT_CHUNK = 1 << 20  # messages' verdicts a SegmentVerdicts holds at most (unless one batch has more)


def map_bytes(max_keys: int) -> int:
    """The anonymous memory of the offset map for a bound of `max_keys` keys (touched as keys land)."""
    return SLOT_BYTES * capacity_for(max_keys)


@dataclass(frozen=True)
class _SegmentRange:
    """The indexed batches of one segment that hold offsets of a range: entries [first_entry, stop_entry)."""
    segment: SegmentView
    data: Mapping  # the segment's log, mapped up to the end of these batches
    index: IndexView
    first_entry: int
    stop_entry: int

    def batch_offsets(self, start: int) -> npt.NDArray[np.int64]:
        """The first offset of each of these batches within the range (the first one's is `start` when the
        range starts inside it)."""
        bases = self.batch_bases()
        bases[0] = max(int(bases[0]), start)
        return bases

    def batch_bases(self) -> npt.NDArray[np.int64]:
        """The base offset of each of these batches."""
        return self._starts(self.index.arrays()[0], self.index.base_offset)

    def batch_positions(self) -> npt.NDArray[np.int64]:
        """Where each of these batches starts in the segment's log."""
        return self._starts(self.index.arrays()[1], 0)

    def _starts(self, ends: npt.NDArray[np.int64], first_start: int) -> npt.NDArray[np.int64]:
        """Where each of these batches starts, from an index column of where each ends (next offsets or end
        positions) and where the segment's first batch starts."""
        starts = np.empty(self.stop_entry - self.first_entry, dtype=np.int64)
        first = self.first_entry
        starts[0] = ends[first - 1] if first else first_start
        starts[1:] = ends[first:self.stop_entry - 1]
        return starts

    def parts(self, limit: int) -> Iterator[_SegmentRange]:
        """These batches in runs of about `limit` messages at most (a batch with more is a run of its own)."""
        if self.stop_entry - self.first_entry <= 1:
            yield self
            return
        bases = self.batch_bases()
        first = 0
        while first < len(bases):
            stop = max(int(np.searchsorted(bases, int(bases[first]) + limit)), first + 1)
            yield _SegmentRange(self.segment, self.data, self.index, self.first_entry + first, self.first_entry + stop)
            first = stop

    @property
    def next_offset(self) -> int:
        """The offset after the last of these batches."""
        return int(self.index.entry(self.stop_entry - 1)[1])


@dataclass(frozen=True)
class SegmentVerdicts:
    """Pass 2's answer for one segment (or a part of one, VERDICT_CHUNK): `verdicts[i]` is the Verdict of
    the message at `first_offset + i`, for the messages of the range in this segment; `batch_offsets` the
    first offset of each stored batch they fall in (ascending, the first one clipped to the range),
    `batch_positions` where each starts in `data`, the segment's mapped log, `skipped` how many messages
    of the first batch lie before the range and `trailing` how many of the last lie past it."""
    base_offset: int
    first_offset: int
    verdicts: npt.NDArray[np.uint8]
    batch_offsets: npt.NDArray[np.int64]
    batch_positions: npt.NDArray[np.int64]
    data: Mapping
    skipped: int = 0
    trailing: int = 0

    def batches(self) -> Iterator[tuple[int, npt.NDArray[np.uint8]]]:
        """(first offset, verdicts of its messages) of each stored batch, a view of `verdicts` each."""
        bounds = [*(int(b) - self.first_offset for b in self.batch_offsets), len(self.verdicts)]
        for first, stop in zip(bounds, bounds[1:]):
            yield self.first_offset + first, self.verdicts[first:stop]

    @property
    def batch_counts(self) -> npt.NDArray[np.int64]:
        """The messages of each stored batch, those before and past the range included."""
        counts = np.diff(np.append(self.batch_offsets, self.first_offset + len(self.verdicts)))
        counts[0] += self.skipped
        counts[-1] += self.trailing
        return counts

    def offsets(self) -> npt.NDArray[np.int64]:
        """The offset of each message `verdicts` has a verdict for."""
        return self.first_offset + np.arange(len(self.verdicts), dtype=np.int64)

    def count(self, verdict: Verdict) -> int:
        return int(np.count_nonzero(self.verdicts == verdict))


@dataclass(frozen=True)
class CompactionMap:
    """Pass 1's answer over offsets [start, end) of a partition: `latest_offsets`, the offset of each key's
    latest message, ascending (one per key: `keys` of them); the messages walked, those without a key, and
    those with a key and a null value (tombstones, latest or not)."""
    view: PartitionView
    start: int
    end: int
    latest_offsets: npt.NDArray[np.int64]
    messages: int
    keyless: int
    tombstones: int
    map_bytes: int  # the offset map's memory while it was built
    # the previous compacted view's verdicts (CompactedFile order), when one was given
    previous_verdicts: npt.NDArray[np.uint8] | None = None

    @property
    def keys(self) -> int:
        return len(self.latest_offsets)

    def segments(self) -> Iterator[SegmentVerdicts]:
        """Pass 2: the verdicts of the range's messages, a segment at a time, in offset order."""
        latest_from = 0
        for segment_range in _segment_ranges(self.view, self.start, self.end):
            for part in segment_range.parts(VERDICT_CHUNK):
                batch_offsets = part.batch_offsets(self.start)
                first = int(batch_offsets[0])
                verdicts = np.empty(min(self.end, part.next_offset) - first, dtype=np.uint8)
                latest_from = classify_segment(part.data, part.index, part.first_entry, part.stop_entry,
                                               self.start, self.end, self.latest_offsets, latest_from, verdicts)
                if latest_from < 0:
                    _raise_damage(part.segment, -1 - latest_from)
                yield SegmentVerdicts(part.segment.base_offset, first, verdicts, batch_offsets,
                                      part.batch_positions(), part.data, first - int(part.batch_bases()[0]),
                                      max(0, part.next_offset - self.end))


def build_compaction_map(view: PartitionView, start: int, end: int, *, max_keys: int, verify_crc: bool = True,
                         cut_when_full: bool = False, previous: CompactedFile | None = None) -> CompactionMap:
    """Pass 1 over offsets [start, end) of the partition `view` shows: each key's latest offset (module
    docstring). `max_keys` bounds the distinct keys (an int of at least 1); the range must be stored,
    from the earliest retained offset to the end offset. Batches are checked against the index, and their
    CRC32C with `verify_crc`; damage raises CorruptLogError. With `cut_when_full` a range with more keys
    is cut where the map filled (the answer's `end`); `previous`: a compacted view of offsets before
    `start`, whose messages get their verdicts too (`previous_verdicts`)."""
    _check_range(view, start, end)
    if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
        raise InvalidArgumentError("max_keys", max_keys, "an int of at least 1: a bound on the distinct keys of "
                                   "the range")
    offset_map = OffsetMap(max(1, min(max_keys, end - start)))
    try:
        for part in _segment_ranges(view, start, end):
            status = offset_map.add_segment(part.data, part.index, part.first_entry, part.stop_entry,
                                            start, end, verify_crc)
            if status == MAP_FULL:
                cut = _batch_start(part, offset_map.full_at)
                if cut <= start:  # one stored batch holds more keys than the map: cut inside it, as Kafka does
                    cut = offset_map.full_at
                if not cut_when_full or cut <= start:
                    raise InvalidArgumentError(
                        "max_keys", max_keys, f"at least the number of distinct keys in offsets {start} to "
                        f"{end - 1}", f"offset {offset_map.full_at} holds key number {max_keys + 1} of the range")
                offset_map.release()  # (its keys include some past the cut: built again over the prefix)
                return build_compaction_map(view, start, cut, max_keys=max_keys, verify_crc=verify_crc,
                                            previous=previous)
            if status != MAP_DONE:
                _raise_damage(part.segment, status)
        previous_verdicts = None if previous is None else _probe(offset_map, previous)
        nbytes = offset_map.nbytes
        latest = offset_map.latest_offsets()  # (which releases the map)
        return CompactionMap(view, start, end, latest, offset_map.messages, offset_map.keyless,
                             offset_map.tombstones, nbytes, previous_verdicts)
    finally:
        offset_map.release()


def _batch_start(part: _SegmentRange, offset: int) -> int:
    """The base offset of the stored batch of `part` that holds `offset`."""
    bases = part.batch_bases()
    return int(bases[int(np.searchsorted(bases, offset, side="right")) - 1])


def _probe(offset_map: OffsetMap, previous: CompactedFile) -> npt.NDArray[np.uint8]:
    verdicts = np.empty(previous.records, dtype=np.uint8)
    damaged = offset_map.probe_stored(previous.data, previous.positions, verdicts)
    if damaged >= 0:
        raise CorruptLogError(str(previous.path), int(previous.positions[damaged]),
                              "a compacted batch's sections do not fit it, or it holds more messages than the "
                              "compacted view's state says")
    return verdicts


def _check_range(view: PartitionView, start: int, end: int) -> None:
    earliest, end_offset = view.earliest_offset(), view.end_offset()
    if not is_offset(start) or not earliest <= start <= end_offset:
        raise InvalidArgumentError("start", start, f"an offset from the earliest retained, {earliest}, to the end "
                                   f"offset, {end_offset}")
    if not is_offset(end) or not start <= end <= end_offset:
        raise InvalidArgumentError("end", end, f"an offset from start, {start}, to the end offset, {end_offset}")


def _segment_ranges(view: PartitionView, start: int, end: int) -> Iterator[_SegmentRange]:
    """The segments holding offsets of [start, end), each with the entries of its batches that do."""
    if start == end:
        return
    view.rescan()
    for base in [b for b in view.bases if b < end and (view.next_base(b) or MAX_OFFSET) > start]:
        segment = view.view(base)
        segment.refresh()
        index = segment.index
        first_entry = index.find_offset(start) if start > base else 0
        last_entry = index.find_offset(end - 1)
        if last_entry < 0:
            last_entry = index.count - 1  # the range goes on in the next segment
        if first_entry < 0 or last_entry < first_entry:
            continue  # an empty segment (a writer rolled into it and wrote nothing yet)
        segment.batch_at(last_entry)  # checks the last batch's header and maps the log up to its end
        assert segment.data is not None, "batch_at maps the log"
        yield _SegmentRange(segment, segment.data, index, first_entry, last_entry + 1)


def _raise_damage(segment: SegmentView, entry: int) -> None:
    """Report the damage a kernel found in batch `entry` of `segment`, as a reader would."""
    segment.batch_at(entry, verify_crc=True)  # raises CorruptLogError, or IndexMismatchError
    base, next_offset, position, _ = segment.index.entry(entry)
    raise CorruptLogError(str(segment.paths.log), position,
                          f"the batch of offsets {base} to {next_offset - 1} changed while it was compacted")
