"""Segment files: `<base offset, 20 digits>.log` with its `.index` and `.timeindex` beside it, as Kafka
names them. This module maps them, creates and trims them, and rebuilds an index from its log.

A writer sizes a segment's files to their full capacity (sparse) but allocates their blocks only ahead of
what it writes (Reserved): a small first step, growing with what the file holds up to a cap, extended with
posix_fallocate before an append would need more, so a full disk fails that append before any byte of it is
written. The logical end is the end position of the last index entry. Sealing trims the log to its
logical size and the index files to one empty slot past their last entry, so a reader that probes for the
next entry still reads inside the file."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seglog._core import _format
from seglog._core._format import ScanStatus
from seglog._core._index import ENTRY_BYTES, IndexView
from seglog._core._mapping import MADV_RANDOM, Mapping
from seglog.errors import SymbolicLinkError

LOG_SUFFIX = ".log"
CLEAN_MARKER = ".clean-shutdown"  # in a partition directory: its writer closed cleanly
LOCK_FILE = ".lock"  # in a partition directory: the writer lock (lock.py)
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
SPARE_STEM, SPARE_SUFFIX = "next", ".spare"  # the next segment made ahead of its roll: next.log.spare, ...

# An index slot per batch; a batch is at least a header and one 8-byte timestamp. The cap keeps a huge
# segment's index at 16 MiB per file; a segment whose index fills up rolls early, as Kafka's does.
MIN_BATCH_BYTES = _format.HEADER_BYTES + 8
MAX_BATCH_BYTES = 1 << 31  # data offsets are int32, as in Arrow's binary arrays
MAX_INDEX_SLOTS = 1 << 20

# A writer's allocation ahead of what a file holds (Reserved): as much again as the file holds, at least
# the first figure and at most the second. 1,000 partitions with a message each hold 40 KiB apiece; a busy
# log is extended once per 8 MiB written, and holds at most 16 MiB it has not written. A spare segment
# (writer.SpareSegment) is made only for a partition that filled three quarters of a segment, so its log
# takes the largest step at once: the prefault thread faults its first 4 MiB in before the roll.
LOG_RESERVE = (32 << 10, 16 << 20)
SPARE_LOG_RESERVE = (16 << 20, 16 << 20)
INDEX_RESERVE = (4 << 10, 1 << 20)


def segment_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def list_segments(directory: Path) -> list[int]:
    """Base offsets of the segments in a partition directory, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    # String tests rather than a regex: a partition of 10,000 segments has 30,000 names to sift.
    stem = len(segment_stem(0))
    return sorted(int(name[:stem]) for name in names
                  if len(name) == stem + len(LOG_SUFFIX) and name.endswith(LOG_SUFFIX)
                  and name[:stem].isascii() and name[:stem].isdigit())


def index_slots(capacity: int, max_messages: int | None) -> int:
    slots = min(capacity // MIN_BATCH_BYTES + 1, MAX_INDEX_SLOTS)
    return min(slots, max_messages) if max_messages else slots


@dataclass(frozen=True)
class SegmentPaths:
    log: Path
    index: Path
    timeindex: Path

    @classmethod
    def of(cls, directory: Path, base_offset: int) -> SegmentPaths:
        stem = directory / segment_stem(base_offset)
        return cls(stem.with_suffix(LOG_SUFFIX), stem.with_suffix(INDEX_SUFFIX),
                   stem.with_suffix(TIMEINDEX_SUFFIX))

    @classmethod
    def spare(cls, directory: Path) -> SegmentPaths:
        """The files of a spare segment (writer.SpareSegment), made before its base offset is known: no
        base-offset stem and a .spare suffix, so list_segments, recovery and readers never take them for a
        segment. A roll renames them into place (rename_to); recovery removes any a crash left."""
        return cls(*(directory / f"{SPARE_STEM}{suffix}{SPARE_SUFFIX}"
                     for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)))

    def rename_to(self, other: SegmentPaths) -> None:
        """Give the files `other`'s names, the .log last: readers must never find a segment without its index."""
        for source, target in ((self.index, other.index), (self.timeindex, other.timeindex), (self.log, other.log)):
            os.rename(source, target)

    def remove(self) -> None:
        """Delete the segment's files, the .log first: readers find segments by it, and one that still
        has the segment mapped keeps reading it."""
        for path in (self.log, self.index, self.timeindex):
            path.unlink(missing_ok=True)


def map_file(path: Path, *, writable: bool, size: int | None = None,
             random_access: bool = False) -> Mapping | None:
    """Map a whole file (None if it is empty). `size` extends the file first (writer only).

    The map holds no file descriptor (see _core/_mapping.pyx): a batch a caller keeps alive keeps its
    segment's pages, and however many are kept, they cost no descriptor.

    `random_access` turns off read-ahead for files probed at a few places, such as index files: the
    kernel otherwise fills read_ahead_kb of page cache (8 MiB on the test machine, 2.5 ms) at the first
    touch of a pre-sized, still empty index.

    A read-only map is taken at the size the file has when mapped; a writer trimming it meanwhile would
    leave pages past the new end (a SIGBUS when touched), so a file found shorter after mapping is mapped
    again at its new size."""
    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY)
    try:
        if size is not None and os.fstat(fd).st_size < size:
            os.posix_fallocate(fd, 0, size)
        for _ in range(100):
            length = os.fstat(fd).st_size
            if length == 0:
                return None
            mapped = Mapping(fd, length, writable)
            if os.fstat(fd).st_size < length:  # it shrank meanwhile
                mapped.close()
                continue
            if random_access:
                mapped.madvise(MADV_RANDOM)
            return mapped
        raise OSError(f"{path}: the file kept changing size while being mapped")
    except OSError as error:
        raise _naming(error, path) from None
    finally:
        os.close(fd)  # the map keeps the file open without it


class Reserved:
    """A file its writer maps writable at `length` bytes (a segment's capacity) and allocates only ahead of
    what it writes.

    The file is sized to `length` at once, as a sparse file, and its blocks [0, allocated) are allocated with
    posix_fallocate in steps that grow with what it holds, extended by `ensure` before the writer writes up
    to a new end. Allocating ahead in steps keeps what an idle partition holds small and what a busy one
    holds proportional to what it wrote, and keeps the promise a whole pre-allocated segment made: a full
    disk fails `ensure` (OSError naming the file) before anything is written, never a write into the map
    (a write fault on a hole the disk has no block for is a SIGBUS). The size stays whole so that what
    readers map never changes while the segment is active, and so that the page cache faults pages in as
    cheaply as in a wholly allocated file: populating pages just below the end of a file, which a file
    grown by steps always is, cost the prefault thread 2.5x the CPU in large folios it could not use."""

    def __init__(self, path: Path, length: int, reserve: tuple[int, int], *, random_access: bool = False) -> None:
        """Map `path` at `length` bytes (or its size, if larger). A file that holds less than the first step
        is allocated to it at once, so that a full disk refuses the writer as it opens; one that holds more
        (a reopened segment) gets its reserve at its first write."""
        self.path = path
        self._first, self._cap = reserve
        fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)
        try:
            holds = self.allocated = os.fstat(fd).st_size
            self.length = max(length, holds)
            self._allocate(fd, min(self.length, max(holds, self._first)))
            self._extend_at = max(holds, self.allocated - self._reserve(holds) // 2)
            if holds < self.length:
                os.ftruncate(fd, self.length)
            self.mapping = Mapping(fd, self.length, True)
            if random_access:  # no read-ahead: see map_file
                self.mapping.madvise(MADV_RANDOM)
        except OSError as error:
            raise _naming(error, path) from None
        finally:
            os.close(fd)

    def ensure(self, end: int) -> bool:
        """Allocate the file's blocks up to `end` (at most its length) and a reserve after it, if less than
        half a reserve would be left after `end`; whether more was allocated. On a disk too full for the
        reserve, only up to `end`: the write fails only if its own bytes cannot be had."""
        if end <= self._extend_at:
            return False
        allocated = self.allocated
        reserve = self._reserve(end)
        fd = open_no_follow(self.path, os.O_RDWR)
        try:
            self._allocate(fd, min(self.length, end + reserve))
            self._extend_at = self.allocated - reserve // 2
        except OSError as error:
            if error.errno != errno.ENOSPC:
                raise _naming(error, self.path) from None
            try:
                self._allocate(fd, end)
            except OSError as again:
                raise _naming(again, self.path) from None
            self._extend_at = self.allocated  # the reserve is tried again when a write needs more
        finally:
            os.close(fd)
        if self.allocated == self.length:
            self._extend_at = self.length
        return self.allocated != allocated

    def allocated_for(self, end: int) -> bool:
        """Whether a write up to `end` finds its blocks allocated, ensure() allocating nothing."""
        return end <= self._extend_at

    def _reserve(self, holds: int) -> int:
        return min(max(holds, self._first), self._cap)

    def _allocate(self, fd: int, end: int) -> None:
        if end > self.allocated:
            os.posix_fallocate(fd, self.allocated, end - self.allocated)
            self.allocated = end

    def allocated_view(self) -> memoryview:
        """The allocated part of the map, for the prefault thread: faulting a hole in would allocate its
        blocks past the reserve, unchecked."""
        return memoryview(self.mapping)[:self.allocated]


def _naming(error: OSError, path: Path) -> OSError:
    """`error` naming `path`, when the call that failed named no file (posix_fallocate, mmap)."""
    if error.errno is None or error.filename is not None:
        return error
    return OSError(error.errno, error.strerror, str(path))


def open_no_follow(path: Path, flags: int) -> int:
    """os.open, refusing a symbolic link (O_NOFOLLOW) with SymbolicLinkError: a link in a partition could
    point anywhere, and recovery cuts and rewrites the files it opens."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SymbolicLinkError(str(path)) from None
        raise


def sync_directory(directory: Path) -> None:
    """fsync a directory, so that the files created or renamed in it survive a power loss (an fsync of a
    file makes its contents durable, not its name)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def symbolic_links(partition_directory: Path) -> list[Path]:
    """What seglog will not follow in a partition: the partition directory, or the topic, namespace or
    tenant directory above it (topics/<tenant>/<namespace>/<topic>/<partition>, log.py), if one is a
    symbolic link; otherwise the symbolic links among the partition's files. The data directory itself
    may be a link: it is above these levels."""
    for directory in (partition_directory, *partition_directory.parents[:3]):
        if directory.is_symlink():
            return [directory]
    try:
        with os.scandir(partition_directory) as entries:
            return sorted(Path(entry.path) for entry in entries if entry.is_symlink())
    except FileNotFoundError:
        return []


def refuse_symbolic_links(partition_directory: Path) -> None:
    """SymbolicLinkError naming the first of symbolic_links(partition_directory), if there is one."""
    links = symbolic_links(partition_directory)
    if links:
        raise SymbolicLinkError(str(links[0]))


def close_map(mapped: Mapping | None) -> None:
    """Unmap now, or, while a view still points into the map, when the last view is gone."""
    if mapped is not None:
        try:
            mapped.close()
        except BufferError:
            pass


def truncate_file(path: Path, size: int) -> None:
    fd = open_no_follow(path, os.O_RDWR)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def index_arrays(mapped: Mapping | None) -> np.ndarray:
    if mapped is None:
        return np.zeros((0, 2), dtype=np.int64)
    # numpy's stubs take only the built-in buffers before Python 3.12 (no PEP 688 protocol)
    return np.frombuffer(mapped, dtype=np.int64,  # type: ignore[call-overload]
                         count=len(mapped) // ENTRY_BYTES * 2).reshape(-1, 2)


@dataclass
class ScanResult:
    """What a scan of a segment's log found: the entries of every sound batch, and where and why it stopped."""
    next_offsets: np.ndarray
    end_positions: np.ndarray
    max_timestamps: np.ndarray
    stop_position: int
    status: int

    @property
    def count(self) -> int:
        return len(self.next_offsets)

    @property
    def reason(self) -> str:
        return _format.SCAN_REASONS[self.status]

    @property
    def clean(self) -> bool:
        return self.status == ScanStatus.SCAN_END


def scan_log(data: Mapping | None, base_offset: int, *, verify_crc: bool, slots: int | None = None,
             start: int = 0, end: int | None = None) -> ScanResult:
    """Walk the batches of a mapped log from `start` and return an entry for each sound one."""
    if data is None:
        empty = np.zeros(0, dtype=np.int64)
        return ScanResult(empty, empty, empty, 0, ScanStatus.SCAN_END)
    end = len(data) if end is None else end
    capacity = slots if slots is not None else max(1, (end - start) // MIN_BATCH_BYTES + 1)
    next_offsets, end_positions, max_timestamps = (np.zeros(capacity, dtype=np.int64) for _ in range(3))
    count, stop, status, _ = _format.scan_batches(data, start, end, base_offset, verify_crc, next_offsets,
                                                  end_positions, max_timestamps)
    return ScanResult(next_offsets[:count], end_positions[:count], max_timestamps[:count], stop, status)


def write_index_files(paths: SegmentPaths, base_offset: int, scan: ScanResult, slots: int) -> None:
    """Replace a segment's index files with the entries of a scan, pre-sized to `slots`.

    Written beside and renamed over the old files: a reader in another process may have the old ones
    mapped, and truncating a mapped file under it would make its next look a SIGBUS."""
    for path, columns in ((paths.index, (scan.next_offsets, scan.end_positions)),
                          (paths.timeindex, (scan.max_timestamps, scan.next_offsets))):
        staging = path.with_name(path.name + ".tmp")
        staging.unlink(missing_ok=True)
        mapped = map_file(staging, writable=True, size=slots * ENTRY_BYTES, random_access=True)
        entries = index_arrays(mapped)
        entries[:scan.count, 1] = columns[1]
        entries[:scan.count, 0] = columns[0]
        del entries
        close_map(mapped)
        os.replace(staging, path)


def index_sound(index: IndexView, log_size: int) -> bool:
    """Whether the entries can describe real batches: each at least a header and one record long, at most
    2 GiB, holding between one record and one per 8 body bytes (so both columns strictly increase), and all
    but the last inside the file (a log cut short leaves its last batch past the end). A flipped bit that
    keeps all of this true is caught where the entry is used: readers compare it with the batch header."""
    if index.count == 0:
        return True
    next_offsets, ends, _ = index.arrays()
    starts = np.concatenate(([0], ends[:-1]))
    lengths = ends - starts
    records = next_offsets - np.concatenate(([index.base_offset], next_offsets[:-1]))
    return bool((lengths >= MIN_BATCH_BYTES).all() and (lengths <= MAX_BATCH_BYTES).all()
                and (records >= 1).all() and (records * 8 <= lengths - _format.HEADER_BYTES).all()
                and (ends[:-1] <= log_size).all() and starts[-1] < log_size)


def index_matches_log(index: IndexView, log_size: int, next_base: int | None) -> bool:
    """The index can be trusted for a segment no writer appends to: sound, ending exactly at the end of
    the log and (when a newer segment exists) at its base offset."""
    return (index_sound(index, log_size) and index.end_position == log_size
            and (index.count > 0 or log_size == 0)
            and (next_base is None or index.next_offset == next_base))


def index_file_matches_log(paths: SegmentPaths, base_offset: int, next_base: int | None) -> bool:
    """index_matches_log for the index files on disk; False if they are missing or of unequal size."""
    if not (paths.index.exists() and paths.timeindex.exists()):
        return False
    offsets_map = map_file(paths.index, writable=False, random_access=True)
    times_map = map_file(paths.timeindex, writable=False, random_access=True)
    try:
        offsets, times = index_arrays(offsets_map), index_arrays(times_map)
        if len(offsets) != len(times):
            return False
        view = IndexView(offsets, times, base_offset)
        matches = index_matches_log(view, paths.log.stat().st_size, next_base)
        del view, offsets, times
        return matches
    finally:
        close_map(offsets_map)
        close_map(times_map)


def published_count(offsets: np.ndarray) -> int:
    """The entries a writer published in an index file's `(next_offset, end_position)` rows: up to the last
    non-zero next_offset. Readers stop at the first zero slot; recovery looks further, so that a slot
    zeroed by damage is rebuilt from the log rather than taken for the end."""
    written = np.flatnonzero(offsets[:, 0])
    return int(written[-1]) + 1 if len(written) else 0


@dataclass(frozen=True)
class Commit:
    """What the newest segment of a partition holds (docs/FORMAT.md, Recovery).

    While a writer runs, a batch is committed when its index entry is published: the writer acknowledges
    a write only after that. So after an unclean stop the segment holds the batches its index published,
    as far as its log holds them soundly (header, CRC32C and column sections checked), with the entries as
    the log has them (a damaged entry is taken from the log); bytes after them are an unfinished append (never
    acknowledged) or damage. After a clean close (`clean`) the close had trimmed the log to its last
    batch, so the log is authoritative and the index mere derived data: the segment holds the log's sound
    batches. Writers' recovery, readers of an unattended partition, `seglog check` and `seglog repair`
    all apply this one rule."""
    scan: ScanResult           # the log's sound prefix
    log_size: int              # the size of the log scanned
    published: int | None      # entries the index files name; None when they are missing or unusable
    published_end: int         # the byte after the last batch the index names (0 when none)
    agrees: bool               # the index names exactly the committed batches, as the log has them
    clean: bool                # the partition was closed cleanly: the log decides

    @property
    def count(self) -> int:
        if self.published is None or self.clean:
            return self.scan.count
        return min(self.published, self.scan.count)

    @property
    def end_position(self) -> int:
        return int(self.scan.end_positions[self.count - 1]) if self.count else 0

    @property
    def damaged(self) -> bool:
        """Whether committed batches were lost: batches the index published that the log no longer holds
        soundly (damage, or a power loss without fsync), or, after a clean close, unsound bytes."""
        lost = self.published is not None and self.published > self.scan.count
        return lost or (self.clean and not self.scan.clean)

    def entries(self) -> ScanResult:
        """The committed batches' entries, as a scan result ending at the commit point."""
        n = self.count
        scan = self.scan
        return ScanResult(scan.next_offsets[:n], scan.end_positions[:n], scan.max_timestamps[:n],
                          self.end_position, ScanStatus.SCAN_END)


def committed(data: Mapping | None, base_offset: int, offsets: np.ndarray | None,
              times: np.ndarray | None, *, clean: bool = False) -> Commit:
    """Apply the commit rule (Commit) to a segment's mapped log and its index rows (None: no usable index
    files). Checks every CRC of the log: this runs once per unclean stop, not on every open."""
    scan = scan_log(data, base_offset, verify_crc=True)
    size = 0 if data is None else len(data)
    published = _plausible_count(offsets, times, base_offset, size)
    if offsets is None or times is None or published is None:  # no index to go by (missing, or damaged past
        # belief): the log decides
        return Commit(scan, size, None, 0, False, clean)
    published_end = int(offsets[published - 1, 1]) if published else 0
    count = scan.count if clean else min(published, scan.count)
    agrees = published == count and _rows_agree(offsets, times, scan, count)
    return Commit(scan, size, published, published_end, agrees, clean)


def _plausible_count(offsets: np.ndarray | None, times: np.ndarray | None, base_offset: int,
                     log_size: int) -> int | None:
    """The published count of index rows that could describe real batches (index_sound, no zero slot
    among them), else None."""
    if offsets is None or times is None or len(offsets) != len(times):
        return None
    published = published_count(offsets)
    view = IndexView(offsets, times, base_offset)
    return published if view.count == published and index_sound(view, log_size) else None


def last_batch_matches(paths: SegmentPaths, base_offset: int) -> bool:
    """Whether the newest segment's files are as a clean close left them, judged without a scan: its
    index fits its log (index_file_matches_log) and the header of its last batch is the one the index
    names (a log zeroed by a power loss after the close is not)."""
    if not index_file_matches_log(paths, base_offset, None):
        return False
    offsets, times = read_index_files(paths)
    if offsets is None or times is None:  # empty index files: no batch to check
        return True
    view = IndexView(offsets, times, base_offset)
    if view.count == 0:
        return True
    base, next_offset, start, end = view.entry(view.count - 1)
    with open(paths.log, "rb") as log_file:
        log_file.seek(start)
        header = log_file.read(_format.HEADER_BYTES)
    return len(header) == _format.HEADER_BYTES and _format.header_agrees(
        header + bytes(end - start - _format.HEADER_BYTES), 0, end - start, base, next_offset - base)


def _rows_agree(offsets: np.ndarray, times: np.ndarray, scan: ScanResult, n: int) -> bool:
    return bool((offsets[:n, 0] == scan.next_offsets[:n]).all() and (offsets[:n, 1] == scan.end_positions[:n]).all()
                and (times[:n, 0] == scan.max_timestamps[:n]).all() and (times[:n, 1] == scan.next_offsets[:n]).all())


def read_index_files(paths: SegmentPaths) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """A segment's index rows, copied out of its files; (None, None) if either is missing or empty.

    Files of unequal size are read to the shorter: a crash between the two trims of a roll leaves them so,
    and what a trim removes is empty slots."""
    try:
        offsets, times = _read_int64s(paths.index), _read_int64s(paths.timeindex)
    except FileNotFoundError:
        return None, None
    rows = min(len(offsets), len(times)) // 2
    if rows == 0:
        return None, None
    return offsets[:rows * 2].reshape(-1, 2), times[:rows * 2].reshape(-1, 2)


def newest_timestamp(paths: SegmentPaths) -> int | None:
    """The largest timestamp a segment's time index holds (None when it holds none)."""
    _, times = read_index_files(paths)
    if times is None:
        return None
    written = times[times[:, 1] != 0]
    return int(written[-1, 0]) if len(written) else None


def _read_int64s(path: Path) -> np.ndarray:
    with os.fdopen(open_no_follow(path, os.O_RDONLY), "rb") as file:
        return np.fromfile(file, dtype=np.int64)


def copy_prefix(source: Path, target: Path, length: int) -> None:
    """Write the first `length` bytes of `source` to a new file `target`, synced to disk: it is about to
    replace `source`, whose pages stay with the maps of it."""
    with os.fdopen(open_no_follow(source, os.O_RDONLY), "rb") as reader, \
            os.fdopen(open_no_follow(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as writer:
        copied = 0
        while copied < length:
            step = os.copy_file_range(reader.fileno(), writer.fileno(), length - copied, copied, copied)
            if step == 0:
                raise OSError(errno.EIO, f"{source} ended at byte {copied}, before byte {length}", str(source))
            copied += step
        os.fsync(writer.fileno())


def make_empty_segment(directory: Path, base_offset: int) -> None:
    """A segment that holds nothing yet, its files as a writer that closed it unwritten leaves them: the
    index files (one zero slot each) first, then the .log, which readers find segments by."""
    paths = SegmentPaths.of(directory, base_offset)
    for path, size in ((paths.index, ENTRY_BYTES), (paths.timeindex, ENTRY_BYTES), (paths.log, 0)):
        fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
    sync_directory(directory)


def in_memory_index(scan: ScanResult, base_offset: int) -> IndexView:
    """An index built by scanning a log, for a reader that found the file index missing or short."""
    offsets = np.zeros((scan.count + 1, 2), dtype=np.int64)
    times = np.zeros((scan.count + 1, 2), dtype=np.int64)
    offsets[:scan.count, 0] = scan.next_offsets
    offsets[:scan.count, 1] = scan.end_positions
    times[:scan.count, 0] = scan.max_timestamps
    times[:scan.count, 1] = scan.next_offsets
    return IndexView(offsets, times, base_offset)


def delete_segments(directory: Path, bases: list[int]) -> None:
    """Delete whole segments, oldest first (the caller holds the partition's writer lock).

    Index files left by a crash between the unlinks of SegmentPaths.remove have no .log; they are swept
    here too."""
    for base in bases:
        SegmentPaths.of(directory, base).remove()
    logs = set(list_segments(directory))
    for name in os.listdir(directory):
        stem, _, suffix = name.partition(".")
        if suffix in ("index", "timeindex") and stem.isdigit() and int(stem) not in logs \
                and (not logs or int(stem) < min(logs)):
            (directory / name).unlink(missing_ok=True)
