"""One compaction of one partition: the previous compacted view and the log's messages from its horizon up to
a new horizon, merged into the next generation of the view (storage.compacted), each key's latest message
kept with its offset (docs/LIFECYCLE.md, Compaction).

The passes (lifecycle.compaction_map, seglog._core._compact): the map of the new range's keys; the previous
view's messages looked up in it; the new range's verdicts; then the kept messages of both copied into the
next file as compacted batches, in offset order, the previous view's first. Kept: each key's latest message
with a value; its tombstone (null value) only where `delete_retention_ms` says to keep it (Kafka), never
for Pulsar's model (None); messages without a key never (Pulsar's compactor leaves them out of its view
since 3.2.0; Kafka's cleaner drops them as invalid). One compaction of a partition at a time: a second gets
CompactionRunningError."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from seglog._core._compact import Verdict
from seglog._core._mapping import Mapping
from seglog._core._messages import batch_offsets
from seglog.errors import SeglogError
from seglog.lifecycle.compaction_map import build_compaction_map
from seglog.storage.compacted import (
    CompactedFile,
    CompactedState,
    CompactedWriter,
    commit_state,
    compacted_directory,
    newest_timestamps,
    read_state,
    remove_unnamed,
)
from seglog.storage.lock import ExclusiveFileLock
from seglog.storage.partition_view import PartitionView

# The offset map's bound on the keys of one compaction's new range: 30 bytes a key (32 MiB here). A range
# with more keys is compacted as far as the map holds, the rest at the next compaction (Kafka's cleaner
# works the same way with log.cleaner.dedupe.buffer.size).
MAP_KEYS = (32 << 20) // 30
LOCK_NAME = ".lock"


class CompactionRunningError(SeglogError):
    """Another compaction of the partition is running (in this process or another)."""

    def __init__(self, path: str, holder: int | None, what: str = "partition") -> None:
        by = f" by process {holder}" if holder is not None else ""
        super().__init__(f"{path}: a compaction of this {what} is running{by}")
        self.holder = holder


@dataclass(frozen=True)
class CompactionOutcome:
    """What one compaction did: the view's horizon before and after, the messages it read (the previous
    view's and the new range's), kept and left out, and how long it took."""
    previous_horizon: int
    horizon: int
    read: int
    kept: int
    size: int
    duration_ms: int
    state: CompactedState

    @property
    def removed(self) -> int:
        return self.read - self.kept


def compact_partition(view: PartitionView, *, horizon: int, now_ms: int, delete_retention_ms: int | None,
                      max_keys: int = MAP_KEYS, log_compacted: bool = False,
                      expire_before_ms: int = 0) -> CompactionOutcome:
    """Compact the partition `view` shows up to `horizon` (a batch boundary: the end offset, or a segment's
    base offset), at `now_ms` by the log's clock. The new view's horizon may stop short of `horizon` when the
    range holds more than `max_keys` keys (the outcome says where). A horizon at or below the current one
    leaves the view as it is, unless tombstones are due to go (Kafka's delete_retention). `log_compacted`:
    Kafka's model, whose caller deletes the segments below the new horizon (CompactedState.log_compacted).
    `expire_before_ms`: Kafka's compact,delete, whose retention deletes compacted data too: a stored batch
    whose newest message is older than this keeps nothing in the view (Kafka deletes a cleaned segment by its
    newest timestamp; a batch is a finer grain)."""
    directory = view.directory
    if not directory.is_dir():  # a partition never written to: nothing to compact
        return CompactionOutcome(0, 0, 0, 0, 0, 0, CompactedState())
    compacted_directory(directory).mkdir(exist_ok=True)
    lock = ExclusiveFileLock(compacted_directory(directory) / LOCK_NAME, busy=CompactionRunningError)
    try:
        return _compact(view, directory, horizon, now_ms, delete_retention_ms, max_keys, log_compacted,
                        expire_before_ms)
    finally:
        lock.release()


def _compact(view: PartitionView, directory: Path, horizon: int, now_ms: int, delete_retention_ms: int | None,
             max_keys: int, log_compacted: bool, expire_before_ms: int) -> CompactionOutcome:
    started = time.monotonic()
    state = read_state(directory) or CompactedState()
    remove_unnamed(compacted_directory(directory), state)  # what a crash left of an unfinished run
    previous = None
    if state.records:
        assert state.file_name is not None
        previous = CompactedFile(compacted_directory(directory) / state.file_name, state)
    start, end = max(state.horizon, view.earliest_offset()), view.end_offset()
    horizon = min(horizon, end)
    drop_tombstones_below = (end if delete_retention_ms is None
                             else state.cleaned_before(now_ms - delete_retention_ms))
    tombstones_due = 0 <= state.oldest_tombstone < drop_tombstones_below
    expiring = previous is not None and expire_before_ms > 0 and previous.holds_older_than(expire_before_ms)
    if horizon <= start and not tombstones_due and not expiring:
        return CompactionOutcome(state.horizon, state.horizon, 0, 0, state.size, 0, state)
    horizon = max(horizon, start)
    result = build_compaction_map(view, start, horizon, max_keys=max_keys, cut_when_full=True, previous=previous)
    horizon = result.end
    writer = CompactedWriter(directory, state.generation + 1)
    try:
        read, oldest_tombstone = 0, -1
        if previous is not None:
            assert result.previous_verdicts is not None
            file = previous
            keep, oldest_tombstone = _kept(result.previous_verdicts, lambda: _file_offsets(file),
                                           drop_tombstones_below, oldest_tombstone)
            writer.append(previous.data, previous.positions,
                          _unexpired(keep, previous.data, previous.positions, previous.counts, expire_before_ms))
            read += previous.records
        for part in result.segments():
            keep, oldest_tombstone = _kept(part.verdicts, part.offsets, drop_tombstones_below, oldest_tombstone)
            if part.skipped or part.trailing:  # (the range begins or ends inside a batch: the rest is not its)
                keep = np.concatenate((np.zeros(part.skipped, dtype=np.uint8), keep,
                                       np.zeros(part.trailing, dtype=np.uint8)))
            writer.append(part.data, part.batch_positions,
                          _unexpired(keep, part.data, part.batch_positions, part.batch_counts, expire_before_ms))
            read += len(part.verdicts)
        writer.finish()
    except BaseException:
        writer.abort()
        raise
    kept = writer.records
    duration_ms = int((time.monotonic() - started) * 1000)
    new_state = state.after_run(horizon=horizon, records=kept, size=writer.size, removed=read - kept,
                                duration_ms=duration_ms, finished_ms=now_ms, oldest_tombstone=oldest_tombstone,
                                log_compacted=log_compacted)
    commit_state(directory, new_state)
    return CompactionOutcome(state.horizon, horizon, read, kept, writer.size, duration_ms, new_state)


def _kept(verdicts: npt.NDArray[np.uint8], offsets: Callable[[], npt.NDArray[np.int64]], drop_tombstones_below: int,
          oldest_tombstone: int) -> tuple[npt.NDArray[np.uint8], int]:
    """One item a message, non-zero to keep: each key's latest with a value, and its latest tombstone where
    it is not yet due to go; and the offset of the oldest tombstone kept so far (-1: none). `offsets()`
    gives the messages' offsets (only asked when a tombstone is there)."""
    keep = verdicts == Verdict.LATEST
    tombstones = verdicts == Verdict.LATEST_TOMBSTONE
    if tombstones.any():
        at = offsets()
        kept_tombstones = tombstones & (at >= drop_tombstones_below)
        if oldest_tombstone < 0 and kept_tombstones.any():
            oldest_tombstone = int(at[np.argmax(kept_tombstones)])
        keep |= kept_tombstones
    return keep.view(np.uint8), oldest_tombstone


def _unexpired(keep: npt.NDArray[np.uint8], data: Mapping, positions: npt.NDArray[np.int64],
               counts: npt.NDArray[np.int64], expire_before_ms: int) -> npt.NDArray[np.uint8]:
    """`keep` (one item a message of the batches at `positions`, `counts` messages each) with the messages
    of the batches whose newest timestamp is before `expire_before_ms` not kept (0: none expire)."""
    if expire_before_ms <= 0:
        return keep
    return keep & np.repeat(newest_timestamps(data, positions) >= expire_before_ms, counts).view(np.uint8)


def _file_offsets(file: CompactedFile) -> npt.NDArray[np.int64]:
    """The offset of every message of a compacted file, in order (each batch's offsets column)."""
    columns = [batch_offsets(file.data, position) for position in file.positions.tolist()]
    return np.concatenate(columns) if columns else np.empty(0, np.int64)
