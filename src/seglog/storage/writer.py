"""The single writer of a partition: recovery when it opens, appends into the active segment, rolls.

Crash safety: a batch is written into the map, then its index entry is published. A process that dies
leaves the page cache intact, so everything appended survives it; the next writer to open the partition
scans the active segment (unless the last close was clean), cuts a torn or corrupt tail at the last sound
batch and rebuilds the index from the log. Sealed segments are trusted when their index is consistent with
their size and rebuilt from the log when not.

After an append (send_batch's, or the batch send() gathered) has published its index entries, the writer
signals the partition's AppendSignal if anyone in this process waits for it (notification.py)."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple, Protocol

from seglog._core import _format
from seglog._core._accumulator import Accumulator
from seglog._core._format import Prefaulter
from seglog._core._index import ENTRY_BYTES, IndexView
from seglog._core._mapping import Mapping
from seglog._core._writer import BatchSource, append_all, measure
from seglog.clock import Clock
from seglog.errors import TopicNotFoundError
from seglog.rates import RateMeter
from seglog.storage.batch import make_source
from seglog.storage.fence import TopicFence
from seglog.storage.linger import LingerFlusher
from seglog.storage.lock import ExclusiveFileLock
from seglog.storage.notification import AppendSignal
from seglog.storage.recovery import recover_partition
from seglog.storage.segment import (
    CLEAN_MARKER,
    INDEX_RESERVE,
    LOCK_FILE,
    LOG_RESERVE,
    SPARE_LOG_RESERVE,
    Reserved,
    SegmentPaths,
    close_map,
    index_arrays,
    index_slots,
    list_segments,
    newest_timestamp,
    open_no_follow,
    refuse_symbolic_links,
    sync_directory,
    truncate_file,
)
from seglog.storage.value_bytes import value_bytes

logger = logging.getLogger(__name__)


def map_segment(paths: SegmentPaths, capacity: int, slots: int, *, spare: bool = False) -> SegmentFiles:
    """A segment's files sized and mapped writable at `capacity` bytes of log and `slots` index entries, their
    blocks allocated only a first step ahead of what they hold (Reserved; a spare's log a larger one). The
    reserves are read at each call, so that bench/bench_append.py can compare whole segments allocated at
    once. Index files first: readers find segments by their .log, and must never find one without its
    index. A failure (a full disk) unmaps what was mapped, so that its blocks are freed with its files."""
    made: list[Reserved] = []
    try:
        for path, size, reserve in ((paths.index, slots * ENTRY_BYTES, INDEX_RESERVE),
                                    (paths.timeindex, slots * ENTRY_BYTES, INDEX_RESERVE),
                                    (paths.log, capacity, SPARE_LOG_RESERVE if spare else LOG_RESERVE)):
            made.append(Reserved(path, size, reserve, random_access=path != paths.log))
    except BaseException:
        for file in made:
            close_map(file.mapping)
        raise
    return SegmentFiles(*made)


class SegmentFiles(NamedTuple):
    """A segment's three files, mapped by its writer (map_segment)."""
    offsets: Reserved
    times: Reserved
    log: Reserved

    def rename_to(self, paths: SegmentPaths) -> None:
        """Follow a rename of the files (SegmentPaths.rename_to): their allocations are extended by path."""
        self.offsets.path, self.times.path, self.log.path = paths.index, paths.timeindex, paths.log


class ActiveSegment:
    """The segment that takes the writes: its log mapped writable, its index beside it, each allocated
    ahead of the writer in steps (Reserved) and extended before an append that needs more.

    The log is prefaulted ahead of the writer by a C thread (bench/experiments/bench_page_faults.py measured the
    alternatives), as far as it is allocated: the thread is pointed at the new allocation after each
    extension. It makes the pages by writing zeros into the allocated blocks past the writer's end, which
    costs a tenth of faulting them in (a fault's read-around made and zeroed 8 MiB of page cache first), and
    before each write the writer makes those the thread has not reached yet itself (Prefaulter.reach: a new
    segment's first pages, say), so that its copy never faults (issue 31)."""

    def __init__(self, paths: SegmentPaths, base_offset: int, capacity: int, files: SegmentFiles, created_ms: int,
                 prefaulter: Prefaulter, last_write_ms: int | None = None) -> None:
        self.paths = paths
        self.base_offset = base_offset
        self.capacity = capacity
        self.created_ms = created_ms
        # By the log's clock; written as the file's mtime when the segment is closed, for the lifecycle
        # rules measured from a segment's last write (Fluvio's retention_time, Pulsar's retention time).
        self.last_write_ms = last_write_ms
        self._files = files
        self.data = files.log.mapping
        self.index: IndexView | None = IndexView(index_arrays(files.offsets.mapping),
                                                 index_arrays(files.times.mapping), base_offset, writable=True)
        self._sealed_next_offset = base_offset  # what next_offset was when the segment was sealed
        self._prefaulter = prefaulter
        self._name_synced = False  # the directory entry of a new or renamed segment, by the first sync
        self._prefault_from(self.end_position)

    def _prefault_from(self, position: int) -> None:
        """Point the prefault thread at the log from `position`, with the file, whose pages past it it then
        makes by writing zeros (Prefaulter.target), or without it if it cannot be opened."""
        try:
            fd = open_no_follow(self.paths.log, os.O_RDWR)
        except OSError:  # (an optimisation lost: the thread faults the pages in instead)
            self._prefaulter.target(self._files.log.allocated_view(), position)
            return
        try:
            self._prefaulter.target(self._files.log.allocated_view(), position, fd)
        finally:
            os.close(fd)

    @property
    def end_position(self) -> int:
        return self._open_index.end_position

    @property
    def _open_index(self) -> IndexView:
        """The index of the segment, which a sealed segment no longer has (its callers check `sealed`)."""
        index = self.index
        assert index is not None, f"segment {self.base_offset} is sealed"
        return index

    @property
    def sealed(self) -> bool:
        """Closed: trimmed and unmapped. The writer keeps a sealed segment as its active one when the roll
        that sealed it found no space for the next segment; the next write tries again."""
        return self.index is None

    @property
    def next_offset(self) -> int:
        return self._sealed_next_offset if self.index is None else self.index.next_offset

    @property
    def index_full(self) -> bool:
        """Whether the index has no slot left for another batch."""
        return self._open_index.full

    @property
    def index_slots_free(self) -> int:
        index = self._open_index
        return index.capacity - index.count

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.end_position

    @property
    def message_count(self) -> int:
        return self.next_offset - self.base_offset

    def write(self, source: BatchSource, start: int, stop: int, base_offset: int) -> None:
        """Append records [start, stop) as one batch, the files extended first if it needs more of them
        (OSError naming the file, a full disk say, before anything is written)."""
        self._make_room(source.size(start, stop), 1)
        source.append_to(self.data, self._open_index, self._prefaulter, base_offset, start, stop)

    def write_all(self, sources: list[BatchSource], size: int, base_offset: int) -> int:
        """Append each of `sources` whole as one batch, numbered on from `base_offset`; `size`: the bytes they
        take (measure). As `write`, the files are extended first if need be. Returns the bytes of their
        values."""
        self._make_room(size, len(sources))
        return append_all(sources, self.data, self._open_index, self._prefaulter, base_offset)

    def _make_room(self, nbytes: int, batches: int) -> None:
        """Before a write of `batches` batches of `nbytes`: the files extended if they need more blocks, and
        the pages the prefault thread has not made yet made now, not by faults."""
        files = self._files
        index = self._open_index
        position = index.end_position
        end = position + nbytes
        if files.log.ensure(end):
            self._prefaulter.target(files.log.allocated_view(), position)
        slots_end = (index.count + batches) * ENTRY_BYTES
        if files.offsets.ensure(slots_end):
            files.times.ensure(slots_end)  # same sizes, same steps
        self._prefaulter.reach(position, end)

    def allocated_for(self, nbytes: int, batches: int) -> bool:
        """Whether `batches` batches of `nbytes` in all fit in what the files have allocated, so that writing
        them allocates nothing (a posix_fallocate can take milliseconds)."""
        index = self._open_index
        slots_end = (index.count + batches) * ENTRY_BYTES
        return self._files.log.allocated_for(index.end_position + nbytes) and \
            self._files.offsets.allocated_for(slots_end) and self._files.times.allocated_for(slots_end)

    def sync(self) -> None:
        """Write the log and index pages to disk (fsync policy); a sealed segment was synced as it was sealed."""
        if self.sealed:
            return
        self.data.flush()
        self._files.offsets.mapping.flush()
        self._files.times.mapping.flush()
        if not self._name_synced:  # a synced segment must not vanish with its directory entry (Kafka: flushDir)
            sync_directory(self.paths.log.parent)
            self._name_synced = True

    def close(self) -> None:
        """Trim the files to their contents and unmap: the log to its logical size, the index files to one
        zero slot past the last entry (a reader probing for the next entry still reads inside the file).

        What the log loses is the reserve allocated after its last batch, which no reader touches: readers
        touch published batches only, and a writer only ever opens a log that holds nothing else (a recovery
        that loses published batches seals their segment in a new file, docs/FORMAT.md, Recovery)."""
        if self.sealed:
            return
        end, count = self.end_position, self._open_index.count
        self._sealed_next_offset = self.next_offset
        self.index = None
        self._unmap()
        truncate_file(self.paths.log, end)
        truncate_file(self.paths.index, (count + 1) * ENTRY_BYTES)
        truncate_file(self.paths.timeindex, (count + 1) * ENTRY_BYTES)
        if self.last_write_ms is not None:
            os.utime(self.paths.log, ns=(self.last_write_ms * 1_000_000,) * 2, follow_symlinks=False)

    def _unmap(self) -> None:
        close_map(self._files.offsets.mapping)
        close_map(self._files.times.mapping)
        unmap_in_background(self.data, self._prefaulter)

    def abandon(self) -> None:
        """Unmap without trimming or touching the files (their topic was deleted)."""
        if not self.sealed:
            self._sealed_next_offset = self.next_offset
            self.index = None
            self._unmap()


class SpareSegment:
    """The next segment's files, made before the roll that takes them (SpareMaker) and their first pages
    faulted in by the prefault thread whenever the active segment needs nothing, so that a roll renames them
    into place instead of creating, allocating and mapping three files and then faulting on their first
    pages. Named SegmentPaths.spare until then: nothing takes them for a segment (docs/FORMAT.md)."""

    def __init__(self, directory: Path, capacity: int, slots: int, prefaulter: Prefaulter) -> None:
        self.paths = SegmentPaths.spare(directory)
        self.capacity, self.slots = capacity, slots
        try:
            self.files = map_segment(self.paths, capacity, slots, spare=True)
        except OSError:
            self.paths.remove()
            raise
        self._prefaulter = prefaulter
        prefaulter.prepare(self.files.log.allocated_view())

    def rename_to(self, paths: SegmentPaths) -> None:
        """Give the files `paths`' names, for the caller's new active segment (its maps go with them). If a
        rename fails, the spare is discarded (an index file renamed already holds only zeros)."""
        try:
            self.paths.rename_to(paths)
        except OSError:
            self.discard()
            raise
        self.files.rename_to(paths)

    def discard(self) -> None:
        self.abandon()
        self.paths.remove()

    def abandon(self) -> None:
        """Unmap, leaving the files as they are."""
        close_map(self.files.offsets.mapping)
        close_map(self.files.times.mapping)
        unmap_in_background(self.files.log.mapping, self._prefaulter)


class SpareMaker:
    """A writer's spare segments: each made in the background (the log's LingerFlusher thread) once the active
    segment is three quarters full, so that neither making it nor the roll that takes it holds up a write.
    One at a time. A roll never waits for one being made (it makes its segment itself); a close does, so that
    nothing of this writer touches the files once another writer may own the partition."""

    def __init__(self, directory: Path, prefaulter: Prefaulter, size: Callable[[], tuple[int, int]]) -> None:
        self._directory = directory
        self._prefaulter = prefaulter
        self._size = size  # (capacity, index slots) of a new segment, by the topic's settings now
        self._lock = threading.Lock()  # held while a spare is made, taken or dropped
        self._spare: SpareSegment | None = None
        self._asked = False  # asked for since the last roll (made, being made, or refused)
        self._closed = False

    def ask(self, writer: PartitionWriter, background: LingerFlusher) -> None:
        """The active segment is three quarters full: have the spare made, once per segment (the writer's lock
        held)."""
        if not self._asked:
            self._asked = True
            background.run_soon(writer, self._make)

    def _make(self) -> None:
        with self._lock:
            if self._closed or self._spare is not None:
                return
            try:
                self._spare = SpareSegment(self._directory, *self._size(), self._prefaulter)
            except OSError as error:  # an optimisation: the next roll makes its segment itself, as without
                logger.info("%s: no spare segment (%s)", self._directory, error)

    @property
    def ready(self) -> bool:
        """A spare is made and waits for the next roll."""
        return self._spare is not None

    def take(self, paths: SegmentPaths) -> SpareSegment | None:
        """The spare for a roll, its files renamed to `paths`: None if none is ready, or if it is not the size
        a new segment has now (the topic's settings changed: it is discarded). The renames are made holding
        the lock, so the next spare is never made under the names of files still being renamed away."""
        if not self._lock.acquire(blocking=False):  # being made: the roll does not wait for it
            return None
        try:
            spare, self._spare = self._spare, None
            if spare is None:
                return None
            if (spare.capacity, spare.slots) != self._size():
                spare.discard()
                return None
            spare.rename_to(paths)
            return spare
        finally:
            self._lock.release()

    def rolled(self) -> None:
        """A new segment is active: its spare is to be asked for when it is half full."""
        self._asked = False

    def close(self, *, abandon: bool = False) -> None:
        """No more spares: the one there is deleted (with `abandon`, unmapped and its files left as they are,
        since the topic was deleted), after one being made is done. A failure to delete is logged: the next
        writer's recovery removes it."""
        with self._lock:
            self._closed = True
            spare, self._spare = self._spare, None
        if spare is None:
            return
        if abandon:
            spare.abandon()
            return
        try:
            spare.discard()
        except OSError as error:
            logger.warning("%s: the spare segment could not be removed (%s)", self._directory, error)


def unmap_in_background(mapped: Mapping, prefaulter: Prefaulter) -> None:
    """Have the prefault thread stop faulting a segment's log in and unmap it (Prefaulter.unmap_later), or,
    while a view still points into it, close_map it (unmapped when the last view is gone)."""
    try:
        prefaulter.unmap_later(mapped)
    except BufferError:
        close_map(mapped)


class WriterSettings(Protocol):
    """The topic settings a writer follows (catalog.config.TopicConfig has them), read at each write."""
    @property
    def segment_size(self) -> int: ...
    @property
    def segment_max_messages(self) -> int | None: ...
    @property
    def segment_roll_time(self) -> int | None: ...
    @property
    def fsync_interval_ms(self) -> int | None: ...
    @property
    def log_append_time(self) -> bool: ...


class PartitionWriter:
    """Appends to one partition. One per partition per process (the Log shares it among producers);
    holding it holds the partition's writer lock."""

    def __init__(self, directory: Path, partition: int, config: WriterSettings, clock: Clock,
                 background: LingerFlusher, fence: TopicFence, appended: AppendSignal,
                 written: RateMeter | None = None) -> None:
        """`written` counts the messages and value bytes of every write (stats' msgInCounter ...; rates.py)."""
        fence.check()
        refuse_symbolic_links(directory)  # before mkdir: through a linked topic directory it would make one outside
        try:
            directory.mkdir(exist_ok=True)  # in the topic's directory, which only create_topic makes
        except FileNotFoundError:
            raise TopicNotFoundError(f"topic {fence.name} was deleted") from None
        self.fence = fence
        self.directory = directory
        self.partition = partition
        self.config = config
        self.clock = clock
        self._lock = ExclusiveFileLock(directory / LOCK_FILE)
        self._prefaulter = Prefaulter()
        try:
            self.recovery = recover_partition(directory)
            (directory / CLEAN_MARKER).unlink(missing_ok=True)
            bases = list_segments(directory)
            self.active = self._open_segment(bases[-1] if bases else 0, reopen=bool(bases))
        except BaseException:
            self._lock.release()
            raise
        self.write_lock = threading.RLock()
        self._spares = SpareMaker(directory, self._prefaulter, self._new_segment_size)
        self.accumulator = Accumulator(self.active.next_offset)
        self._background = background
        self._last_sync = time.monotonic()
        self._unsynced = False  # written to since the last fsync
        self._sync_scheduled = False  # the background flusher will call sync_when_due
        self._linger_lock = threading.Lock()  # guards the two below
        self._lingering: tuple[int, float] = (-1, 0.0)  # (batch, due) of the last batch that asked to linger
        self._linger_call: float | None = None  # when the flusher's call to flush_lingering is due
        self.appended = appended  # signalled after each append, when someone waits (notification.py)
        self._waiting = appended.watchers  # tested without a lock after every append
        self.written = written
        self.closed = False

    @property
    def spare_ready(self) -> bool:
        """The next segment is made ahead and waits for the roll (SpareMaker)."""
        return self._spares.ready

    @property
    def end_offset(self) -> int:
        """The offset the next written message gets (published messages only)."""
        return self.active.next_offset

    def _open_segment(self, base_offset: int, *, reopen: bool, capacity: int | None = None) -> ActiveSegment:
        paths = SegmentPaths.of(self.directory, base_offset)
        size = paths.log.stat().st_size if reopen else 0
        # Read before the files are mapped: sizing them sets the log's mtime to the wall clock's now.
        last_write_ms = self._reopened_last_write(paths) if size else None
        capacity = max(capacity or self.config.segment_size, size)
        slots = index_slots(capacity, self.config.segment_max_messages)
        try:
            files = map_segment(paths, capacity, slots)
            segment = ActiveSegment(paths, base_offset, capacity, files, self.clock(), self._prefaulter)
        except OSError:
            if not reopen:  # a full disk: no part of a segment that could not be made is left
                paths.remove()
            raise
        if segment.message_count:  # reopened with batches: its age counts from the first one
            segment.created_ms = _format.read_header(segment.data, 0)[6]
            segment.last_write_ms = last_write_ms
        return segment

    def _reopened_last_write(self, paths: SegmentPaths) -> int:
        """After a clean close the file's mtime is its last write by the log's clock (ActiveSegment.close);
        after a crash, fall back on the newest timestamp it holds, as Kafka's time retention does."""
        if self.recovery.clean:
            return paths.log.stat().st_mtime_ns // 1_000_000
        newest = newest_timestamp(paths)
        return self.clock() if newest is None else newest

    def source(self, values, keys=None, timestamps=None, properties=None, event_times=None, ordering_keys=None,
               attributes=None) -> BatchSource:
        """One send_batch call checked and normalised for the encoder (InvalidArgumentError, naming the
        argument, if it cannot be written), stamped with the time now where timestamps are needed.
        `values` and `keys` may hold None (a null value, no key). `event_times`: event times apart from the
        timestamps; `ordering_keys`: one per value (None for none); `attributes`: a mapping of str to str
        stored with the batch, whole in each part if a full segment splits it (batch.make_source).

        Attributes belong to one append: pass the source to `append`, which writes it as batches of its
        own. send()'s accumulator never takes attributes, so no batch mixes messages of two appends."""
        return make_source(values, keys, timestamps, properties, now=self.clock(),
                           log_append_time=self.config.log_append_time, event_times=event_times,
                           ordering_keys=ordering_keys, attributes=attributes)

    def append(self, source: BatchSource, counted: RateMeter | None = None) -> int:
        """Write one send_batch call; returns its base offset. Messages queued by send() before it go first.
        `counted`: a meter of the producer's own that counts these messages and their value bytes too.

        The offsets are reserved with the queued messages taken in one step of the accumulator: a send()
        from another thread meanwhile (the copy runs without the GIL) is numbered after this batch."""
        with self.write_lock:
            queued, base = self.accumulator.reserve(source.count)
            if queued is not None:
                self._write_queued(queued)
            nbytes = self._write(source, base)
        if counted is not None:
            counted.add(source.count, nbytes)
        if self._waiting:
            self.appended.notify()
        return base

    def append_all(self, sources: list[BatchSource], counted: RateMeter | None = None) -> int | None:
        """Write each of `sources` whole as one batch, one after the other, if they all fit in the active
        segment as it is: no roll due (by size, index slots, messages or time) and nothing queued by send()
        to go first. Returns the first one's base offset (the others follow on), or None, with nothing
        written, when they do not fit: the caller appends them one by one. What `append` does per call
        (the lock, the clock, the meters, the fsync policy, the signal) is done once for all of them."""
        count, size = measure(sources)
        with self.write_lock:
            segment = self.active
            if self.accumulator.pending or not self._takes_whole(segment, count, size, len(sources)):
                return None
            _, base = self.accumulator.reserve(count)
            try:
                self.fence.check()
                nbytes = segment.write_all(sources, size, base)
                segment.last_write_ms = self.clock()
                self._unsynced = True
                self._sync_if_due()
            except BaseException:
                self._drop_queued()
                raise
            if 4 * segment.end_position >= 3 * segment.capacity:
                self._spares.ask(self, self._background)
        if self.written is not None:
            self.written.add(count, nbytes)
        if counted is not None:
            counted.add(count, nbytes)
        if self._waiting:
            self.appended.notify()
        return base

    def _takes_whole(self, segment: ActiveSegment, count: int, size: int, batches: int) -> bool:
        """Whether the active `segment` takes `batches` batches of `count` messages and `size` bytes without a
        roll, the rules of _segment_for_write and _write_records."""
        config = self.config
        if segment.sealed or size > segment.free_bytes or segment.index_slots_free < batches:
            return False
        if config.segment_max_messages and segment.message_count + count > config.segment_max_messages:
            return False
        return not (segment.message_count and config.segment_roll_time
                    and self.clock() - segment.created_ms >= config.segment_roll_time)

    def flush_pending(self) -> int:
        """Write what send() queued as one batch (split only where a segment is full); returns its count."""
        with self.write_lock:
            queued = self.accumulator.drain()
            if queued is None:
                return 0
            count = self._write_queued(queued)
        if self._waiting:
            self.appended.notify()
        return count

    def linger_until(self, due: float) -> bool:
        """The batch being gathered (its first message just queued) is to be written at `due`
        (time.monotonic()) if it is still waiting then. True if the background flusher must be asked to come
        at `due`: no call of it for this writer is due that early."""
        with self._linger_lock:  # not the write lock: a send() never waits for a write
            self._lingering = (self.accumulator.batches_taken, due)
            if self._linger_call is not None and self._linger_call <= due:
                return False
            self._linger_call = due
            return True

    def flush_lingering(self) -> float | None:
        """The background flusher's call (LingerFlusher.schedule): write the batch being gathered if its
        linger time has run out. Returns when to come again, for a batch whose time is still to come."""
        with self._linger_lock:
            self._linger_call = None
            batch, due = self._lingering
            if self.accumulator.batches_taken != batch:
                return None  # written since (full, or flushed), and no batch asked since
            if due > time.monotonic():
                self._linger_call = due
                return due
        self.flush_pending()
        return None

    def _write_queued(self, queued: tuple) -> int:
        base, values, keys, timestamps, properties = queued
        try:
            source = self.source(values, keys, timestamps, properties)
        except BaseException:
            self._drop_queued()
            raise
        self._write(source, base)
        return source.count

    def _write(self, source: BatchSource, base: int) -> int:
        """Write `source` at `base`; returns the bytes of its values, which `written` counted."""
        try:
            self.fence.check()  # a deleted topic's files are no one's to write (or another topic's now)
            if base != self.end_offset:
                raise RuntimeError(f"offset {base} assigned but the partition ends at {self.end_offset}")
            nbytes = self._write_records(source, base)
            self._sync_if_due()
        except BaseException:
            self._drop_queued()
            raise
        if self.written is not None:
            self.written.add(source.count, nbytes)
        return nbytes

    def _drop_queued(self) -> None:
        """After a write that failed: drop what send() queued since (numbered after it) and number on from
        the partition's end, so the offsets given out next are the ones the messages will get."""
        dropped = self.accumulator.discard(self.end_offset)
        if dropped:
            logger.error("%s: write failed; %d queued messages dropped", self.directory, dropped)

    def _write_records(self, source: BatchSource, base: int) -> int:
        """Write `source` as batches of the active segment, rolling where one is full; returns the bytes of
        its values (read from the batches written: the source's columns do not say)."""
        config = self.config
        start, count, nbytes = 0, source.count, 0
        while start < count:
            segment = self._segment_for_write()
            limit = count
            if config.segment_max_messages:
                limit = min(count, start + config.segment_max_messages - segment.message_count)
            stop = min(source.fit(start, segment.free_bytes), limit)
            if stop == start or (stop < limit and segment.end_position  # a part fits: would all of it, fresh?
                                 and source.size(start, limit) <= config.segment_size):
                if segment.end_position == 0:  # one record larger than a segment: a segment of its own
                    self._roll(capacity=source.size(start, start + 1))
                    continue
                self._roll()
                continue
            position = segment.end_position
            segment.write(source, start, stop, base + start)
            nbytes += value_bytes(segment.data, position, 0, stop - start)
            segment.last_write_ms = self.clock()
            self._unsynced = True
            start = stop
        if 4 * segment.end_position >= 3 * segment.capacity:  # late enough that few are made in vain
            self._spares.ask(self, self._background)
        return nbytes

    def _new_segment_size(self) -> tuple[int, int]:
        """(capacity, index slots) of the next segment, by the topic's settings now."""
        config = self.config
        return config.segment_size, index_slots(config.segment_size, config.segment_max_messages)

    def _segment_for_write(self) -> ActiveSegment:
        segment, config = self.active, self.config
        if segment.sealed:  # the roll that sealed it could not open the next segment (a full disk): again
            self._open_after(segment)
        elif segment.message_count and (
                segment.index_full
                or segment.free_bytes < _format.HEADER_BYTES + 16
                or (config.segment_max_messages and segment.message_count >= config.segment_max_messages)
                or (config.segment_roll_time and self.clock() - segment.created_ms >= config.segment_roll_time)):
            self._roll()
        return self.active

    def _roll(self, capacity: int | None = None) -> None:
        """Seal the active segment (trimmed to its contents) and start a new one at the next offset.

        The old segment is sealed first, so no reader or recovery ever finds a newer segment beside an
        untrimmed one. If the new one cannot be made (OSError, a full disk), the sealed segment stays
        active: the error goes to the sender and the next write tries again (_segment_for_write)."""
        old = self.active
        if old.message_count and self.config.fsync_interval_ms is not None:
            old.sync()
        old.close()
        self._open_after(old, capacity)

    def _open_after(self, sealed: ActiveSegment, capacity: int | None = None) -> None:
        """Make the segment that follows `sealed` (closed, so trimmed) the active one: a new segment at its
        next offset (the spare, renamed into place, when it has the size asked) or, if `sealed` holds
        nothing, itself again, its files extended to the new capacity."""
        base = sealed.next_offset
        paths = SegmentPaths.of(self.directory, base)
        spare = self._spares.take(paths) if sealed.message_count and capacity is None else None
        if spare is not None:
            self.active = ActiveSegment(paths, base, spare.capacity, spare.files, self.clock(), self._prefaulter)
        else:
            self.active = self._open_segment(base, reopen=sealed.message_count == 0, capacity=capacity)
        self._spares.rolled()

    def _sync_if_due(self) -> None:
        """fsync what was written once the fsync interval has passed since the last fsync (at once for
        'always'). Before then, the background flusher is asked to come back when it has: the partition
        may get no further write."""
        interval = self.config.fsync_interval_ms
        if interval is None or not self._unsynced:
            return
        due = self._last_sync + interval / 1000
        now = time.monotonic()
        if now >= due:
            self.active.sync()
            self._last_sync, self._unsynced = now, False
        elif not self._sync_scheduled:
            self._sync_scheduled = True
            self._background.schedule_sync(self, due)

    def sync_when_due(self) -> None:
        """The background flusher's call at the time _sync_if_due asked for."""
        with self.write_lock:
            self._sync_scheduled = False
            if not self.closed:
                self._sync_if_due()

    def close(self) -> None:
        """Flush queued messages, trim the active segment, mark the close clean and release the lock."""
        if self.closed:
            return
        if self.fence.deleted:
            self._abandon()
            return
        with self.write_lock:
            try:
                self.flush_pending()
                if self.config.fsync_interval_ms is not None:
                    self.active.sync()
            finally:
                self.active.close()
                self._spares.close()
                self._prefaulter.close()  # (after the maps it was handed are unmapped)
                (self.directory / CLEAN_MARKER).touch()
                self._lock.release()
                self.closed = True

    def _abandon(self) -> None:
        """Close a deleted topic's writer: drop what send() queued and leave the files as they are, since
        its paths may already hold a new topic of the same name."""
        with self.write_lock:
            self.accumulator.discard(self.end_offset)
            self.active.abandon()
            self._spares.close(abandon=True)
            self._prefaulter.close()
            self._lock.release()
            self.closed = True
