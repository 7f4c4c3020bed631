"""What the lifecycle rules know about a partition's segments, as arrays: one row per segment.

A maintenance pass looks at every segment of every partition, so the facts are cheap to gather: a sealed
segment never changes, and its row is read once (three stats and a 32-byte read of its time index, with
no mapping) and cached until it is deleted; only the active segment is looked at again on every pass.

Every last write is by the log's clock, never the wall clock (a ManualClock's ages are the clock's): a
sealed segment's is its log's mtime, which the writer sets to the clock's time of its last write when it
seals it (recovery to the newest timestamp it holds). The active segment's file is written through a map,
so its mtime is the wall clock's: its last write is the newest timestamp it holds, stamped by the writer's
clock (the rule recovery follows after a crash, and Kafka's time retention), in any process; 0 while it
holds none."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, TypeVar

import numpy as np

from seglog._core._index import ENTRY_BYTES, IndexView
from seglog.storage.segment import SegmentPaths

T = TypeVar("T")
# Times a read of a partition's segments is tried again when a segment it listed was deleted meanwhile: each
# retry means the writer rolled and compaction deleted the segment it sealed in between (Kafka's model with a
# small segment size does so every few ms; a reading thread waiting for the GIL may miss a dozen rolls).
LISTING_ATTEMPTS = 100


# What the facts read of a partition's segments: a partition_view.PartitionView, which owns its SegmentFacts
# (so partition_view.py imports this module, and this one names only what it uses).
class MappedSegment(Protocol):
    index: IndexView

    def refresh(self) -> int: ...

    def first_offset_at_or_after(self, timestamp: int) -> int | None: ...


class PartitionSegments(Protocol):
    directory: Path
    bases: list[int]

    def rescan(self, *, force: bool = False) -> None: ...

    def view(self, base: int) -> MappedSegment: ...

# A sealed segment whose time index cannot be read keeps its data: no minimum-timestamp rule deletes it.
UNKNOWN_TIMESTAMP = np.iinfo(np.int64).max


@dataclass(frozen=True)
class SegmentRow:
    size: int           # logical bytes of the log and its two index files (their entries)
    log_size: int       # bytes of the log: the record batches
    last_write_ms: int  # by the log's clock (the writer sets the file's mtime to it when it seals)
    max_timestamp: int  # newest message timestamp in the segment


@dataclass(frozen=True)
class SegmentTable:
    """The segments of one partition, oldest first; the last one is the active segment.

    `next_offsets[i]` is the offset after segment i (the next segment's base; the end offset for the last).
    All arrays are int64."""
    bases: np.ndarray
    next_offsets: np.ndarray
    sizes: np.ndarray
    log_sizes: np.ndarray
    last_write_ms: np.ndarray
    max_timestamps: np.ndarray

    def __len__(self) -> int:
        return len(self.bases)

    @property
    def end_offset(self) -> int:
        return int(self.next_offsets[-1]) if len(self.bases) else 0

    @property
    def earliest_offset(self) -> int:
        return int(self.bases[0]) if len(self.bases) else 0

    @property
    def total_size(self) -> int:
        return int(self.sizes.sum())


class SegmentFacts:
    """Builds a partition's SegmentTable, remembering the rows of sealed segments between calls."""

    def __init__(self, view: PartitionSegments) -> None:
        self.view = view
        self._sealed: dict[int, SegmentRow] = {}
        # The sealed rows as arrays, for the listing they were built from: the view keeps its `bases`
        # list while the directory is unchanged, and only the active segment's row is built again.
        self._sealed_arrays: tuple[list[int], np.ndarray] | None = None

    def table(self) -> SegmentTable:
        """The partition's segments as listed now. A segment listed and then deleted before it is read (by the
        lifecycle rules of this process or another: Kafka's model deletes a segment as soon as it is sealed
        and compacted, so the newest listed may be gone) has the partition listed again."""
        return listed_again_if_deleted((self.view,), self._table)

    def _table(self) -> SegmentTable:
        view = self.view
        view.rescan()
        bases = view.bases
        if not bases:
            return SegmentTable(*(np.zeros(0, dtype=np.int64) for _ in range(6)))
        active = view.view(bases[-1])
        active.refresh()
        index = active.index
        active_row = np.array([[bases[-1], index.next_offset, index.end_position + 2 * ENTRY_BYTES * index.count,
                                index.end_position, index.max_timestamp if index.count else 0,
                                index.max_timestamp if index.count else UNKNOWN_TIMESTAMP]], dtype=np.int64)
        columns = np.concatenate((self._sealed_columns(bases), active_row.T), axis=1)
        return SegmentTable(*columns)

    def _sealed_columns(self, bases: list[int]) -> np.ndarray:
        """(bases, next offsets, sizes, log sizes, last writes, max timestamps) of the sealed segments, as
        the rows of one int64 array."""
        if self._sealed_arrays is not None and self._sealed_arrays[0] is bases:
            return self._sealed_arrays[1]
        present = set(bases)
        for base in [b for b in self._sealed if b not in present]:
            del self._sealed[base]
        rows = [self._sealed_row(base) for base in bases[:-1]]
        columns = np.array([bases[:-1], bases[1:], [r.size for r in rows], [r.log_size for r in rows],
                            [r.last_write_ms for r in rows], [r.max_timestamp for r in rows]],
                           dtype=np.int64).reshape(6, len(rows))
        self._sealed_arrays = (bases, columns)
        return columns

    def _sealed_row(self, base: int) -> SegmentRow:
        row = self._sealed.get(base)
        if row is None:
            row = self._sealed[base] = _read_sealed_row(SegmentPaths.of(self.view.directory, base))
        return row


def listed_again_if_deleted(views: Iterable[PartitionSegments], read: Callable[[], T]) -> T:
    """read(), which opens segments of the listings of `views` (partitions); when one was deleted since it
    was listed (FileNotFoundError), the partitions are listed again and read() called again (at most
    LISTING_ATTEMPTS times: each attempt means the segments changed meanwhile)."""
    views = list(views)
    for attempt in range(LISTING_ATTEMPTS):
        try:
            return read()
        except FileNotFoundError:
            if attempt + 1 == LISTING_ATTEMPTS:
                raise
            for view in views:
                view.rescan(force=True)
    raise AssertionError("unreachable")


def _read_sealed_row(paths: SegmentPaths) -> SegmentRow:
    log_status = os.stat(paths.log)
    size = log_status.st_size
    max_timestamp = UNKNOWN_TIMESTAMP
    for path in (paths.index, paths.timeindex):
        try:
            size += max(os.stat(path).st_size - ENTRY_BYTES, 0)  # trimmed to its entries and one zero slot
        except FileNotFoundError:
            pass
    try:
        max_timestamp = _last_time_entry(paths.timeindex)
    except (FileNotFoundError, ValueError):
        pass
    return SegmentRow(size, log_status.st_size, log_status.st_mtime_ns // 1_000_000, max_timestamp)


def _last_time_entry(path: Path) -> int:
    """The running maximum timestamp of the last entry of a sealed segment's .timeindex, which the writer
    trimmed to its entries plus one zero slot (read from the end: the file is not mapped)."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size < 2 * ENTRY_BYTES:
            raise ValueError(f"{path}: no entries")
        tail = np.frombuffer(os.pread(file.fileno(), 2 * ENTRY_BYTES, size - 2 * ENTRY_BYTES), dtype=np.int64)
    if tail[1] == 0 or tail[3] != 0:
        raise ValueError(f"{path}: not trimmed after its last entry")
    return int(tail[0])


def first_offset_at_or_after(view: PartitionSegments, table: SegmentTable, timestamp: int) -> int:
    """The first offset whose timestamp is >= `timestamp` (the end offset if none is). The segments' newest
    timestamps skip, without opening them, every segment before the first that reaches it; a segment is
    searched by its index and timestamp column (one whose newest timestamp could not be read is searched
    too, and the search goes on after it)."""
    running = np.maximum.accumulate(table.max_timestamps) if len(table) else table.max_timestamps
    for i in range(int(np.searchsorted(running, timestamp, side="left")), len(table)):
        found = view.view(int(table.bases[i])).first_offset_at_or_after(timestamp)
        if found is not None:
            return found
    return table.end_offset
