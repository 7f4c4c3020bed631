"""A partition as readers see it: its segments mapped read-only and followed through their indexes, from
any process, while a writer (in this process or another) appends. A published index entry means its batch
is complete; a segment whose writer is gone is read by the commit rule (segment.Commit). Batches come out
as pyarrow RecordBatches over the mapped pages; a map lives until the last batch pointing into it is gone,
whatever happens to the view, the log or the segment file."""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from seglog._core import _format
from seglog._core._format import ScanStatus
from seglog._core._index import ENTRY_BYTES, IndexView
from seglog._core._mapping import Mapping
from seglog._core._messages import batch_attribute
from seglog.errors import CorruptLogError, IndexMismatchError, InvalidArgumentError
from seglog.storage.compacted import CompactedView
from seglog.storage.lock import unattended
from seglog.storage.segment import (
    CLEAN_MARKER,
    LOCK_FILE,
    SegmentPaths,
    committed,
    in_memory_index,
    index_arrays,
    index_matches_log,
    index_sound,
    list_segments,
    map_file,
    read_index_files,
    scan_log,
)
from seglog.storage.segment_table import SegmentFacts, first_offset_at_or_after, listed_again_if_deleted

logger = logging.getLogger(__name__)

# Segments a PartitionView keeps mapped (three maps each), and how old a directory's mtime must be
# before an unchanged mtime proves an unchanged directory (see rescan).
MAX_OPEN_SEGMENTS = 256
MTIME_SETTLED_NS = 1_000_000_000

class SegmentView:
    """A segment mapped for reading. Remaps when the writer has grown the files past the maps.

    Which index it follows (docs/FORMAT.md, Recovery): a sealed segment's file index when it ends exactly at
    the end of the log and at the next segment's base offset, else the log indexed in memory as far as it
    is sound. The newest segment's file index while a writer publishes it or after a clean close; after an
    unclean stop with no writer yet, the commit rule applied in memory (segment.committed), exactly what
    the next writer's recovery will keep. Every entry used is checked against its batch header."""

    def __init__(self, directory: Path, base_offset: int, next_base: int | None) -> None:
        self.directory = directory
        self.paths = SegmentPaths.of(directory, base_offset)
        self.base_offset = base_offset
        self.next_base = next_base
        self.data: Mapping | None = None
        self._log_inode: int | None = None  # of the log as mapped
        self.index: IndexView
        self._file_index: IndexView | None = None
        self._index_identity: tuple | None = None  # (inode, size) of both index files as mapped
        # Set while following the commit rule in memory: the file's published count then. A writer that
        # recovers the partition publishes after it, and the file index becomes the one to follow again.
        self._recovered_from: int | None = None
        self.settled = False  # a newer segment exists: no writer will append here again
        self._map_data()
        self._map_index()
        if next_base is not None or (directory / CLEAN_MARKER).exists():
            self.settle(next_base)

    def _map_data(self) -> None:
        # The inode first: a log replaced between the look and the map is seen as replaced, and mapped again.
        self._log_inode = os.stat(self.paths.log).st_ino
        self.data = map_file(self.paths.log, writable=False)

    def _map_index(self) -> None:
        # A recovery that lost published batches renames a copy of the kept ones over the log (and rewrites
        # the index, which is how the view comes here): the old map holds the old file's bytes.
        if os.stat(self.paths.log).st_ino != self._log_inode:
            self._map_data()
        self._index_identity = self._current_identity()
        self._file_index = self._open_file_index() if self._index_identity is not None else None
        self._recovered_from = None
        if self.next_base is None and not self.settled:
            with unattended(self.directory / LOCK_FILE, self.directory / CLEAN_MARKER) as stopped:
                if stopped:  # the shared lock keeps a recovering writer from cutting the log meanwhile
                    self.index = self._committed_index()
                    self._recovered_from = self._file_index.count if self._file_index is not None else 0
                    return
        self.index = self._file_index if self._file_index is not None else self._scanned_index()

    def _open_file_index(self) -> IndexView | None:
        try:
            offsets_map = map_file(self.paths.index, writable=False, random_access=True)
            times_map = map_file(self.paths.timeindex, writable=False, random_access=True)
        except FileNotFoundError:
            return None
        offsets, times = index_arrays(offsets_map), index_arrays(times_map)
        return IndexView(offsets, times, self.base_offset) if len(offsets) == len(times) else None

    def _committed_index(self) -> IndexView:
        """The commit rule in memory, from the same input the next writer's recovery will read. The scan reads
        the whole map, so the map must be the file's size: a map taken before a recovery cut the file (then
        stopped short of marking it clean) reaches past its end, where a touch is a SIGBUS."""
        if self.data is None or len(self.data) != os.path.getsize(self.paths.log):
            self._map_data()
        commit = committed(self.data, self.base_offset, *read_index_files(self.paths))
        return in_memory_index(commit.entries(), self.base_offset)

    def _scanned_index(self) -> IndexView:
        size = os.path.getsize(self.paths.log)
        self._ensure_mapped(size)
        end = size if self.data is None else min(size, len(self.data))  # never past the file: SIGBUS
        return in_memory_index(scan_log(self.data, self.base_offset, verify_crc=False, end=end), self.base_offset)

    def refresh(self) -> int:
        """Pick up entries the writer has published since; returns the entry count.

        While a writer may still append, the index file is remapped when it is no longer the one mapped:
        re-extended after a clean close, replaced by a recovering writer, or created after this view."""
        count = self.index.refresh()
        if self.settled:
            return count
        if self._recovered_from is not None:
            moved = self._current_identity() != self._index_identity or (
                self._file_index is not None and self._file_index.refresh() > self._recovered_from)
        else:
            moved = self._index_identity is None or self._current_identity() != self._index_identity
        if moved:
            self._map_index()
            count = self.index.refresh()
        return count

    def _current_identity(self) -> tuple | None:
        """(inode, size) of .index and .timeindex; None unless both exist with the same size, since a
        writer creating a segment or a recovery rewriting its index has not finished with them yet."""
        index, timeindex = _identity(self.paths.index), _identity(self.paths.timeindex)
        if index is None or timeindex is None or index[1] != timeindex[1]:
            return None
        return index + timeindex

    def settle(self, next_base: int | None) -> None:
        """No writer appends here now: a newer segment exists (created after this one's last entry), or,
        with `next_base` None, the partition was closed cleanly. Keep the file index if it is sound and
        covers the log, else index the log in memory as far as it is sound. A sound index that ends past
        the end of the file is kept: the log was cut short, and reading the missing batch reports it."""
        self.next_base = next_base
        self.refresh()
        self.settled = next_base is not None  # a cleanly closed partition may get a writer again
        size = os.path.getsize(self.paths.log)
        if index_matches_log(self.index, size, next_base):
            return
        if index_sound(self.index, size) and self.index.end_position > size:
            return
        self.index = self._scanned_index()

    def reconsider(self, error: CorruptLogError) -> bool:
        """A read found the batch of an entry damaged, or sound but not the one the entry names (an
        IndexMismatchError): choose the index again (True), or give up (False). Where the log decides
        (a sealed segment, a cleanly closed partition) a damaged index gives way to the log indexed in
        memory; the newest segment otherwise follows its writer's index again or, with no writer, the
        commit rule, which leaves a damaged last batch out."""
        log_decides = self.settled or (self.directory / CLEAN_MARKER).exists()
        if isinstance(error, IndexMismatchError) and log_decides:
            logger.warning("%s; reading %s by its log (`seglog repair` rebuilds the index)", error,
                           self.paths.log.name)
            self.index = self._scanned_index()  # kept until the index files change
            return True
        if not self.settled:
            self._map_index()
            return True
        return False

    def damage_at_end(self) -> CorruptLogError | None:
        """Why the log goes on past the last indexed batch of this settled segment, if it does."""
        size = os.path.getsize(self.paths.log)
        end = self.index.end_position
        if end >= size:
            return None
        status = _format.verify_batch(self._mapped(size), end, size)
        reason = _format.SCAN_REASONS[status] if status != ScanStatus.SCAN_END else "batch out of sequence"
        return CorruptLogError(str(self.paths.log), end, reason)

    def _ensure_mapped(self, end: int) -> None:
        if self.data is None or len(self.data) < end:
            self._map_data()

    def _mapped(self, end: int) -> Mapping:
        """The log's map, reaching `end` (bytes [0, end) of the log are known to be written)."""
        self._ensure_mapped(end)
        assert self.data is not None, f"{self.paths.log} is empty, not {end} bytes long"
        return self.data

    def batch_at(self, entry: int, *, verify_crc: bool = False) -> tuple[int, int, int, int]:
        """(position, end, base_offset, count) of indexed batch `entry`, its header checked against the
        entry and, with `verify_crc`, its CRC32C (CorruptLogError if the log is damaged there,
        IndexMismatchError if the index is)."""
        base, next_offset, start, end = self.index.entry(entry)
        data = self._mapped(end)
        status = _format.check_entry(data, start, end, base, next_offset - base, verify_crc)
        if status != _format.ENTRY_SOUND:
            raise self._entry_error(entry, status)
        return start, end, base, next_offset - base

    def batch_timestamps(self, position: int, count: int) -> np.ndarray:
        """The timestamp column of the `count`-message batch at `position`, over the map (no copy)."""
        data = self._mapped(position + _format.HEADER_BYTES)  # (batch_at() took the map)
        column = _format.batch_layout(data, position)["timestamps"]
        # numpy's stubs take only the built-in buffers before Python 3.12 (no PEP 688 protocol)
        return np.frombuffer(data, dtype=np.int64, count=count,  # type: ignore[call-overload]
                             offset=position + column)

    def batch_attribute(self, position: int, name: bytes) -> str | None:
        """The attribute `name` (UTF-8) of the batch at `position`, or None when it has none: one attribute,
        without making the batch's mapping of them (dispatch asks each batch it reads)."""
        return batch_attribute(self._mapped(position + _format.HEADER_BYTES), position, name)

    def timestamp_of(self, offset: int) -> int:
        """The timestamp of the message at `offset` (which must be in this segment)."""
        entry = self.index.find_offset(offset)
        if entry < 0:  # written since the index was last looked at
            self.refresh()
            entry = self.index.find_offset(offset)
        position, _, base, count = self.batch_at(entry)
        return int(self.batch_timestamps(position, count)[offset - base])

    def first_offset_at_or_after(self, timestamp: int) -> int | None:
        """The first offset of this segment whose timestamp is >= `timestamp`, None if it holds none: the
        index finds the first batch whose running maximum reaches it, its timestamp column the message."""
        self.refresh()
        entry = self.index.find_timestamp(timestamp)
        if entry < 0:
            return None
        position, _, base, count = self.batch_at(entry)
        return base + int(np.argmax(self.batch_timestamps(position, count) >= timestamp))

    def _entry_error(self, entry: int, status: int) -> CorruptLogError:
        base, next_offset, start, end = self.index.entry(entry)
        if status == _format.ENTRY_PAST_DATA:
            return CorruptLogError(str(self.paths.log), start, f"the index places a batch up to byte {end}, past "
                                   "the end of the file (the log was cut short)")
        if status == _format.ENTRY_DIFFERS:
            return IndexMismatchError(str(self.paths.index), entry * ENTRY_BYTES,
                                      f"entry {entry} names offsets {base} to {next_offset - 1} at bytes {start} "
                                      f"to {end} of {self.paths.log.name}, but the sound batch there differs")
        return CorruptLogError(str(self.paths.log), start, _format.SCAN_REASONS[status])


class PartitionView:
    """The segments of one partition, as readers see them. One per partition per open log, shared by its
    readers, so a segment is mapped, faulted in and validated once per process, not once per reader.

    At most MAX_OPEN_SEGMENTS segments stay mapped, the least recently used are let go: reading a partition
    of 10,000 segments from start to end would otherwise keep 30,000 maps (vm.max_map_count is 65,530).

    Thread-safe: the listing and the segments' views change under a lock (readers in the thread pool and
    the lifecycle's deletions rescan the same view at once)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.bases: list[int] = []
        self.views: OrderedDict[int, SegmentView] = OrderedDict()
        self._listed_mtime_ns: int | None = None  # the directory's mtime when its listing can be trusted
        self._lock = threading.RLock()
        self.facts = SegmentFacts(self)  # the segments as rows of arrays, sealed ones read once
        self.compacted = CompactedView(directory)  # its compacted view (read_compacted), when it has one
        self.rescan()

    def rescan(self, *, force: bool = False) -> None:
        """List the segments again, unless the directory is unchanged since a listing that can be trusted.

        A file created or deleted sets the directory's mtime, but only to a coarse clock: a change in
        the same tick as the listing would leave it as it was. So a listing is trusted only when the mtime
        it saw was already older than MTIME_SETTLED_NS (git's "racy" rule)."""
        try:
            mtime = os.stat(self.directory).st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime is not None and mtime == self._listed_mtime_ns and not force:
            return
        with self._lock:
            listed_at = time.time_ns()
            bases = list_segments(self.directory)
            if bases != self.bases:  # the same list object while unchanged lets SegmentFacts reuse its arrays
                self.bases = bases
            settled = mtime is not None and listed_at - mtime > MTIME_SETTLED_NS
            self._listed_mtime_ns = mtime if settled else None
            present = set(self.bases)
            for base in [base for base in self.views if base not in present]:
                del self.views[base]  # deleted: batches already returned keep their own map alive

    def close(self) -> None:
        """Let go of every segment's maps now (the log closes; its readers are closed first): the view and
        its SegmentFacts refer to each other, so dropping the view alone would leave them to the cycle
        collector."""
        with self._lock:
            self.views.clear()

    def view(self, base: int) -> SegmentView:
        with self._lock:
            view = self.views.get(base)
            if view is None:
                view = self.views[base] = SegmentView(self.directory, base, self.next_base(base))
                if len(self.views) > MAX_OPEN_SEGMENTS:
                    self.views.popitem(last=False)  # a reader still on it keeps its own reference
            else:
                self.views.move_to_end(base)
            return view

    def next_base(self, base: int) -> int | None:
        """The base offset of the segment after `base`, or None if `base` is the newest."""
        i = bisect.bisect_right(self.bases, base)
        return self.bases[i] if i < len(self.bases) else None

    def segment_for(self, offset: int) -> int | None:
        """The base offset of the segment that holds (or will hold) `offset`."""
        i = bisect.bisect_right(self.bases, offset) - 1
        return self.bases[i] if i >= 0 else None

    def earliest_offset(self) -> int:
        """The first offset still stored: listed again first, as end_offset is, since the lifecycle rules of
        this process or another may have deleted the oldest segments since the last listing."""
        self.rescan()
        return self.bases[0] if self.bases else 0

    def end_offset(self) -> int:
        """The offset the next message written gets: listed again first, and again when the newest segment
        listed was sealed and deleted before it was opened (segment_table.listed_again_if_deleted)."""
        return listed_again_if_deleted((self,), self._end_offset)

    def _end_offset(self) -> int:
        self.rescan()
        if not self.bases:
            return 0
        view = self.view(self.bases[-1])
        view.refresh()
        return view.index.next_offset

    def offset_for_timestamp(self, timestamp: int) -> int:
        """The first offset whose timestamp is >= `timestamp` (the end offset if none is)."""
        return first_offset_at_or_after(self, self.facts.table(), timestamp)


def start_offset(view: PartitionView, start: Any) -> int:
    """The offset a read (or a subscription's seek) starts at: 'earliest', 'latest', an offset, or
    {'timestamp': ms}, the first message whose timestamp is >= it."""
    if start == "earliest":
        return view.earliest_offset()
    if start == "latest":
        return view.end_offset()
    if isinstance(start, dict) and set(start) == {"timestamp"} and is_offset(start["timestamp"]):
        return view.offset_for_timestamp(start["timestamp"])
    if is_offset(start):
        return start
    raise InvalidArgumentError("start", start, f"'earliest', 'latest', an offset (an int from 0 to {MAX_OFFSET}) "
                               "or a dict whose 'timestamp' is ms since the epoch")


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_ino, status.st_size


MAX_OFFSET = 2**63 - 1  # offsets and timestamps are int64


def is_offset(value: Any) -> bool:
    """Whether `value` is an int an offset (or a timestamp) can be: from 0 to MAX_OFFSET."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_OFFSET
