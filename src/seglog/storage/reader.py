"""Reading a partition from a start position onwards, without acknowledging anything: RecordBatches over
the log's own memory, or Message objects (storage.partition_view does the mapping and following)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Iterator, NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from seglog._core._arrow import indexed_batch
from seglog._core._index import IndexView, sound_entries
from seglog._core._messages import Message, batch_attributes, batch_offsets, messages_from_batch
from seglog._wait import wait_until
from seglog.errors import ClosedError, CorruptLogError, InvalidArgumentError, OffsetOutOfRangeError
from seglog.storage.batch import to_record_batch
from seglog.storage.compacted import CompactedFile, CompactedView, ViewReach
from seglog.storage.fence import TopicFence
from seglog.storage.notification import AppendSignal
from seglog.storage.partition_view import MAX_OFFSET, PartitionView, SegmentView, is_offset, start_offset
from seglog.units import parse_timeout

# What locating the next batch answers when compaction deleted the segments under the reader and the partition's
# compacted view stands for them (Kafka's model): read the view there.
_IN_THE_VIEW = object()

# Messages are built a chunk at a time while iterating: a whole 64k-message batch of fresh objects would
# fall out of the CPU caches (and fault in new heap pages) before the first one is used.
_ITERATION_CHUNK = 1024


class BatchInfo(NamedTuple):
    """A stored batch as Reader.batch_infos gives it: where it is and the attributes its writer gave.
    Immutable: shared freely."""
    base_offset: int
    record_count: int
    attributes: Mapping[str, str]  # read-only; empty when the batch has none


class Reader:
    """Reads one partition from a start position onwards, without acknowledging anything.

    Use `read_batch()` for pyarrow RecordBatches over the log's own memory (zero copy), or iterate for
    Message objects. A reader sees messages as soon as the writer publishes them, in any process. Waiting
    with a timeout, it is woken by `appended`, the partition's append notification, when this process
    writes the partition, and polls for appends by other processes (seglog._wait).

    Thread safety: a reader keeps its position, so it is used by one thread at a time; give each thread its
    own (the readers of a partition share its mapped segments). Readers may run in any number of processes
    while another process writes. A RecordBatch it returns is immutable and may be read by any thread; it
    keeps its segment's map alive, so it stays valid after the reader or the log is closed.

    With `compacted` (read_compacted), offsets below the partition's compaction horizon are read from its
    compacted view: each key's latest message there, with its own offset, tombstones left out; then the log
    from the horizon on (docs/LIFECYCLE.md, Compaction). 'earliest' is then the view's first message.
    Every reader reads the view, tombstones included, where the log no longer has the messages and the view
    stands for it (Kafka's model: CompactedState.log_compacted)."""

    def __init__(self, segments: PartitionView, partition: int, start: Any, *, verify_crc: bool = True,
                 fence: TopicFence, appended: AppendSignal | None = None,
                 compacted: CompactedView | None = None) -> None:
        self.partition = partition
        self._compacted = compacted
        self._fence = fence
        self._signals = () if appended is None else (appended,)
        self.verify_crc = verify_crc
        self._view = segments
        self._verified: tuple[IndexView, int] | None = None  # the last batch this reader checked
        self._last: tuple[SegmentView, IndexView, int, int] | None = None  # the last one located, its end offset
        self._offset = 0 if start == "earliest" and (compacted is not None or _log_compacted(segments)) \
            else start_offset(segments, start)
        self._compacted_cursor: _CompactedCursor | None = None  # where reading the compacted view goes on
        self._closed = False
        self.skipped = 0  # messages deleted before this reader got to them (it went on at the earliest)

    @property
    def compacted_view(self) -> CompactedView:
        """The partition's compacted view (whether or not this reader reads compacted)."""
        return self._view.compacted

    @property
    def offset(self) -> int:
        """The offset of the next message this reader returns."""
        return self._offset

    def seek(self, offset: int) -> None:
        """Continue reading at `offset`."""
        if not is_offset(offset):
            raise InvalidArgumentError("offset", offset, f"an int from 0 to {MAX_OFFSET}")
        self._offset = offset

    def read_batch(self, max_messages: int | None = None, timeout: float | None = None) -> pa.RecordBatch | None:
        """The next messages as a RecordBatch (columns offset, timestamp, key, value, properties), at most
        `max_messages` and at most one stored batch; None when there is nothing new.

        With `timeout` it waits up to that long for new messages (seconds, math.inf or a duration such as
        '500ms', see units.parse_timeout; ClosedError if the log is closed meanwhile); without, it returns at
        once."""
        while True:
            if self._compacted is not None or self.below_log():
                batch = self._compacted_batch(max_messages)
                if batch is not None:
                    return batch
            batch = self._following_batch() if timeout is None else None
            if batch is not None:
                base, count = self._offset, batch.num_rows
                break
            located = self._next_batch(timeout)
            if located is None:
                return None
            if located is not _IN_THE_VIEW:
                view, position, base, count = located
                batch = to_record_batch(view.data, position)
                break
        skip = self._offset - base
        take = count - skip if max_messages is None else min(count - skip, max_messages)
        self._offset += take
        return batch if skip == 0 and take == count else batch.slice(skip, take)

    def _following_batch(self) -> pa.RecordBatch | None:
        """The stored batch right after the last one this reader located, when it goes on there and nothing
        changed since: same segment, its index already naming the batch (sequential reading, the common
        case). One native call, no lookup; None otherwise, or when the batch fails a check, and read_batch
        then takes the general way (which reports the damage, or reads on after choosing the index again)."""
        if self._closed or self._fence.deleted:
            return None
        following = self._after_last(self._offset)
        if following is None:
            return None
        view, index, entry = following
        batch = indexed_batch(view.data, index, entry, self.verify_crc)
        if batch is not None:
            self._last = (view, index, entry, self._offset + batch.num_rows)
            if self.verify_crc:
                self._verified = (index, entry)
        return batch

    def read_messages(self, max_messages: int | None = None, timeout: float | None = None) -> list[Message]:
        """Like read_batch, as a list of Message objects (empty when there is nothing new)."""
        while True:
            if self._compacted is not None or self.below_log():
                compacted = self._compacted_messages(max_messages)
                if compacted:
                    return compacted
            located = self._next_batch(timeout)
            if located is None:
                return []
            if located is not _IN_THE_VIEW:
                break
        view, position, base, count = located
        skip = self._offset - base
        stop = count if max_messages is None else min(count, skip + max_messages)
        messages = messages_from_batch(view.data, position, self.partition, skip, stop)
        self._offset += len(messages)
        return messages

    def below_log(self) -> bool:
        """Whether the read position is below the log's first segment (as last listed: no system call), where
        a view that stands for the log is read."""
        bases = self._view.bases
        return not bases or self._offset < bases[0]

    def _compacted_reach(self) -> ViewReach | None:
        """What this reader takes of the compacted view at its read position (CompactedView.reach), or None
        when it reads the log there."""
        reach = self._view.compacted.reach(self._compacted is not None, self._view.earliest_offset)
        return reach if reach is not None and self._offset < reach.limit else None

    def _compacted_rows(self, max_messages: int | None):
        """(the compacted file, its batch's position, first row, rows, whether its null values are left out)
        of the next messages of the compacted view at the read position, which moves past them; None once
        the view is not read there (the position moved to where it stops when it holds nothing more before
        it). The view's state is asked each time (a compaction may have replaced it); reading on in the same
        generation where the last call stopped, the rows come from the cursor kept, without a search."""
        if self._closed:
            raise ClosedError("reader is closed")
        reach = self._compacted_reach()
        if reach is None:
            self._compacted_cursor = None
            return None
        file, stop = reach.file, reach.limit
        cursor = self._compacted_cursor
        if cursor is None or cursor.file is not file or cursor.stop != stop or cursor.offset != self._offset \
                or not cursor.advance():
            self._compacted_cursor = cursor = self._locate_compacted(file, stop,
                                                                     drop_null_values=reach.drop_null_values)
            if cursor is None:
                self._offset = stop
                return None
        row, rows = cursor.take(max_messages)
        self._offset = cursor.offset
        return file, cursor.position, row, rows, cursor.drop_null_values

    def _locate_compacted(self, file: CompactedFile | None, stop: int, *,
                          drop_null_values: bool) -> _CompactedCursor | None:
        """A cursor at the read position in `file`, reading it up to `stop`; None when it holds nothing more
        before `stop`."""
        index = file.find(self._offset) if file is not None else 0
        if file is None or index == file.batches or int(file.bases[index]) >= stop:
            return None
        cursor = _CompactedCursor(file, stop, drop_null_values=drop_null_values, index=index)
        return cursor if cursor.seek(self._offset) else None

    def _compacted_batch(self, max_messages: int | None) -> pa.RecordBatch | None:
        while (located := self._compacted_rows(max_messages)) is not None:
            file, position, row, rows, drop_null_values = located
            batch = to_record_batch(file.data, position)
            if row or rows != batch.num_rows:
                batch = batch.slice(row, rows)
            if drop_null_values and batch.column(3).null_count:  # tombstones: not part of the compacted view
                batch = batch.filter(batch.column(3).is_valid())
            if batch.num_rows:
                return batch
        return None

    def _compacted_messages(self, max_messages: int | None) -> list[Message]:
        while (located := self._compacted_rows(max_messages)) is not None:
            file, position, row, rows, drop_null_values = located
            messages = messages_from_batch(file.data, position, self.partition, row, row + rows)
            if drop_null_values:
                messages = [m for m in messages if m.value is not None]
            if messages:
                return messages
        return []

    def batch_infos(self) -> Iterator[BatchInfo]:
        """(base_offset, record_count, attributes) of each stored batch from the one holding the current
        position to the end of the partition as it is now, without decoding its messages (each batch's
        header and attribute sections are read, its CRC checked when this reader checks CRCs). The reader
        moves past each batch given. The newest batch of a partition: `reader(end_offset - 1)`, once."""
        while True:
            located = self._next_batch(None)
            if located is None:
                return
            if located is _IN_THE_VIEW:  # (the compacted view's batches are no stored batches of the log)
                self._offset = self._view.earliest_offset()
                continue
            view, position, base, count = located
            self._offset = base + count
            yield BatchInfo(base, count, batch_attributes(view.data, position))

    def __iter__(self) -> Iterator[Message]:
        """Every message from the current position to the end of the partition as it is now."""
        while True:
            messages = self.read_messages(_ITERATION_CHUNK)
            if not messages:
                return
            yield from messages

    def _next_batch(self, timeout: float | None):
        seconds = 0 if timeout is None else parse_timeout(timeout, none=0)
        if self._closed:
            raise ClosedError("reader is closed")
        self._fence.check()
        if seconds == 0:
            return self._locate_next()
        return wait_until(time.monotonic() + seconds, self._locate_waiting, self._signals)

    def _locate_waiting(self):
        """_locate_next for a wait, which may see the topic deleted meanwhile."""
        self._fence.check()
        return self._locate_next()

    def _locate_next(self):
        """locate(self.offset); an offset deleted by the lifecycle rules under this reader moves it on to the
        earliest retained offset, as a Kafka consumer with auto.offset.reset=earliest does (docs/LIFECYCLE.md,
        When the rules run)."""
        while True:
            try:
                return self.locate(self._offset)
            except OffsetOutOfRangeError:
                if self._compacted_reach() is not None:  # compaction deleted them: the view stands for them
                    return _IN_THE_VIEW
                earliest = self._view.earliest_offset()
                self.skipped += earliest - self._offset
                self._offset = earliest

    def locate(self, offset: int, *, retry: bool = True):
        """(segment view, position, base offset, count) of the stored batch holding `offset`, its CRC checked
        (when this reader checks CRCs), or None if it is not written yet. Raises OffsetOutOfRangeError for
        an offset no longer retained."""
        try:
            return self._locate(offset, retry)
        except FileNotFoundError:  # a segment deleted (by the lifecycle rules) since it was listed
            if not retry:
                raise OffsetOutOfRangeError(f"partition {self.partition}: offset {offset} was deleted") from None
            self._view.rescan(force=True)
            return self.locate(offset, retry=False)

    def locate_run(self, offset: int, max_messages: int, max_bytes: int,
                   min_batches: int = 0) -> list[tuple[SegmentView, int, int, int]] | None:
        """locate(offset)'s batch, then the sound batches right after it in its segment while those before
        hold fewer than `max_messages` messages from `offset` (or are fewer than `min_batches`) and
        `max_bytes` stored bytes, each as locate gives it: a dispatcher's read of many batches in one lookup
        and one native call. None, and the errors, as locate. The reader goes on after the last (a next
        locate of where it ends needs no lookup); reading elsewhere looks up as before."""
        located = self.locate(offset)
        if located is None:
            return None
        view, position, _, _ = located
        assert self._last is not None
        _, index, entry, end_offset = self._last
        following = sound_entries(view.data, index, entry + 1, max_messages - (end_offset - offset),
                                  max_bytes - (index.entry(entry)[3] - position), self.verify_crc, min_batches - 1)
        if following:
            _, base, count, _ = following[-1]
            entry += len(following)
            self._last = (view, index, entry, base + count)
            if self.verify_crc:
                self._verified = (index, entry)
        return [located, *((view, start, base, count) for start, base, count, _ in following)]

    def _after_last(self, offset: int) -> tuple[SegmentView, IndexView, int] | None:
        """(segment view, its index, entry) of the stored batch right after the last one located, when
        `offset` is where it starts, the index already names it and nothing changed since (sequential
        reading, the common case: no lookup); None otherwise."""
        last = self._last
        if last is None or offset != last[3]:
            return None
        view, index, entry, _ = last
        if entry + 1 >= index.count or view.index is not index \
                or self._view.views.get(view.base_offset) is not view:  # moved, or the segment let go
            return None
        return view, index, entry + 1

    def _locate(self, offset: int, retry: bool):
        following = self._after_last(offset)
        if following is not None:
            view, _, entry = following
            return self._checked(view, entry, offset, retry)
        segments = self._view
        base = segments.segment_for(offset)
        if base is None:
            segments.rescan()
            base = segments.segment_for(offset)
            if base is None:
                if segments.bases and offset < segments.bases[0]:
                    raise OffsetOutOfRangeError(f"partition {self.partition}: offset {offset} is before the "
                                                f"earliest retained offset {segments.bases[0]}")
                return None
        view = segments.view(base)
        entry = view.index.find_offset(offset)
        if entry < 0:
            view.refresh()
            entry = view.index.find_offset(offset)
        if entry < 0:
            # Past this segment's entries: the offset is not written yet, or a newer segment holds it.
            segments.rescan()
            if segments.segment_for(offset) != base:
                return self._locate(offset, retry)
            next_base = segments.next_base(base)
            if next_base is None:
                return None
            view.settle(next_base)  # sealed before the next segment was created: entries are final
            entry = view.index.find_offset(offset)
            if entry < 0:
                raise view.damage_at_end() or CorruptLogError(
                    str(view.paths.log), view.index.end_position,
                    f"offsets {view.index.next_offset} to {next_base - 1} are missing")
        return self._checked(view, entry, offset, retry)

    def _checked(self, view: SegmentView, entry: int, offset: int, retry: bool):
        """Batch `entry` of `view`, which holds `offset`, as locate gives it, its CRC checked."""
        checked = (view.index, entry)  # CRC checked once per batch, however it is sliced
        verify = self.verify_crc and self._verified != checked
        try:
            position, _, batch_base, count = view.batch_at(entry, verify_crc=verify)
            if verify:
                self._verified = checked
        except CorruptLogError as error:
            if retry and view.reconsider(error):
                self._verified = None
                return self._locate(offset, retry=False)
            raise
        self._last = (view, *checked, batch_base + count)
        return view, position, batch_base, count

    def close(self) -> None:
        """Stop reading (the log closes its readers when it closes). The segment maps belong to the log and
        are released when it closes; batches returned stay valid after both."""
        self._closed = True
        self._last = self._verified = None  # they hold a segment's index, which keeps its maps
        self._compacted_cursor = None

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _CompactedCursor:
    """A read position in one generation of a compacted view: row `row` of batch `index` of `file`, and
    `offset`, the offset after the last row taken; reading stops before offset `stop`. A batch's offsets
    column is read only where a row within it is looked for (a seek, `stop` or a cut inside it)."""

    def __init__(self, file: CompactedFile, stop: int, *, drop_null_values: bool, index: int) -> None:
        self.file, self.stop, self.drop_null_values = file, stop, drop_null_values
        self.offset = 0
        self._enter(index)

    def _enter(self, index: int) -> None:
        self.index, self.row = index, 0
        self.position = int(self.file.positions[index])
        self.count = int(self.file.counts[index])
        self._offsets: npt.NDArray[np.int64] | None = None

    def _batch_offsets(self) -> npt.NDArray[np.int64]:
        if self._offsets is None:
            self._offsets = batch_offsets(self.file.data, self.position)
        return self._offsets

    def seek(self, offset: int) -> bool:
        """Move to the first row at or after `offset` in this batch; False when none is before `stop`."""
        self.row = 0 if offset <= int(self.file.bases[self.index]) else \
            int(np.searchsorted(self._batch_offsets(), offset))
        self.offset = offset
        return self.row < self._rows_before_stop()

    def advance(self) -> bool:
        """Go on to the next batch once this one is read; False when none is before `stop` (or past the file)."""
        if self.row < self.count:
            return self.row < self._rows_before_stop()
        index = self.index + 1
        if index == self.file.batches or int(self.file.bases[index]) >= self.stop:
            return False
        self._enter(index)
        return self.row < self._rows_before_stop()

    def take(self, max_messages: int | None) -> tuple[int, int]:
        """(first row, rows) of the next rows before `stop`, at most `max_messages`; the cursor moves past them."""
        row = self.row
        rows = self._rows_before_stop() - row
        if max_messages is not None:
            rows = min(rows, max_messages)
        self.row = row + rows
        self.offset = int(self.file.nexts[self.index]) if self.row == self.count else \
            int(self._batch_offsets()[self.row - 1]) + 1
        return row, rows

    def _rows_before_stop(self) -> int:
        if int(self.file.nexts[self.index]) <= self.stop:  # (the whole batch: the common case, no search)
            return self.count
        return int(np.searchsorted(self._batch_offsets(), self.stop))


def _log_compacted(view: PartitionView) -> bool:
    """Whether the partition's compacted view stands for its log below the horizon (Kafka's model)."""
    current = view.compacted.current()
    return current is not None and current[0].log_compacted
