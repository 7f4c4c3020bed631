"""The durable cursor of a subscription (Pulsar's ManagedCursor): what it acknowledged on each partition, the
messages it skipped, and its file, which this process holds the lock of while it consumes the subscription.

On each partition an AckSet holds the mark-delete position (its floor - 1) and the individual acks above it.
The AckSets' calls that release the GIL (ack_many, the backlog and dispatch reads, see
subscription.reading) are made holding the subscription's `mutex`, which the cursor is given. A consumer's
per-message ack and is_acked, the hot paths, do not take it: they hold the GIL throughout, so they are
atomic for every other thread unless they meet one of those GIL-free loops (AckSetBusyError, nothing
changed), and then they wait for the mutex, which the loop's thread holds, and try again
(ack_holding_mutex)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from seglog._core._acks import AckSet, AckSetBusyError
from seglog.storage.fence import TopicFence
from seglog.storage.lock import ExclusiveFileLock
from seglog.subscriptions.cursor_file import CursorRecord, PartitionCursor, save


def unacknowledged(acks: AckSet, offsets: np.ndarray) -> np.ndarray:
    """Those of `offsets` (ascending, not empty) that `acks` has not acknowledged."""
    first = int(offsets[0])
    return offsets[acks.unacked_mask(first, int(offsets[-1]) + 1)[offsets - first]]


class Cursor:
    """A subscription's acknowledgements and their file. `dirty` says whether they changed since they were
    last persisted; a consumer's per-message ack (which changes the AckSet itself) sets it too."""

    def __init__(self, record: CursorRecord, path: Path | None, lock: ExclusiveFileLock | None, mutex: threading.RLock,
                 fence: TopicFence, *, fsync: bool) -> None:
        self.record = record
        self.path = path  # None: a non-durable cursor (a reader's), kept in memory only and never persisted
        self.lock = lock  # the cursor file's lock: this process consumes the subscription while it holds it
        self.mutex = mutex
        self.fence = fence
        self.fsync = fsync
        self.dirty = False
        self.closed = False

    @property
    def durable(self) -> bool:
        return self.path is not None

    @property
    def partitions(self) -> list[PartitionCursor]:
        return self.record.partitions

    @property
    def subscription_type(self) -> str:
        return self.record.subscription_type

    def set_subscription_type(self, subscription_type: str) -> None:
        if subscription_type != self.record.subscription_type:
            self.record.subscription_type = subscription_type
            self.dirty = True

    def set_replicated(self, partitions: Iterable[int], replicated: bool) -> bool:
        """Mark the partitions' positions replicated to the other clusters, or not; returns whether that
        changed anything."""
        with self.mutex:
            changed = False
            for partition in partitions:
                cursor = self.record.partitions[partition]
                changed |= cursor.replicated != replicated
                cursor.replicated = replicated
            self.dirty |= changed
            return changed

    def acks(self, partition: int) -> AckSet:
        return self.record.partitions[partition].acks

    # acknowledgements

    def is_acked(self, partition: int, offset: int) -> bool:
        try:
            return self.record.partitions[partition].acks.is_acked(offset)
        except AckSetBusyError:  # a GIL-free loop of a thread holding the mutex: see the module docstring
            with self.mutex:
                return self.record.partitions[partition].acks.is_acked(offset)

    def ack_holding_mutex(self, partition: int, offset: int) -> None:
        """Acknowledge one message once the mutex is free: the consumer's ack without it met a GIL-free
        loop (see the module docstring)."""
        with self.mutex:
            self.record.partitions[partition].acks.ack(offset)
            self.dirty = True

    def ack_many(self, partition: int, offsets: np.ndarray) -> None:
        with self.mutex:
            self.record.partitions[partition].acks.ack_many(offsets)
            self.dirty = True

    def ack_range(self, partition: int, start: int, stop: int) -> None:
        """Acknowledge offsets [start, stop): messages dispatch passed over for good (a compacted read's gaps)."""
        if start < stop:
            with self.mutex:
                self.record.partitions[partition].acks.ack_range(start, stop)
                self.dirty = True

    def ack_cumulative(self, partition: int, offset: int) -> None:
        with self.mutex:
            self.record.partitions[partition].acks.ack_cumulative(offset)
            self.dirty = True

    # moves

    def skip_to(self, partition: int, offset: int, *, counter: str | None = None) -> int:
        """Acknowledge everything before `offset`; returns how many of those messages were unacknowledged
        until now, and adds them to the partition's `counter` ('expired' or 'evicted') if given."""
        with self.mutex:
            cursor = self.record.partitions[partition]
            skipped = cursor.acks.ack_cumulative(offset - 1) if offset > cursor.acks.floor else 0
            if skipped:
                if counter is not None:
                    setattr(cursor, counter, getattr(cursor, counter) + skipped)
                self.dirty = True
            return skipped

    def skip(self, partition: int, count: int, end: int) -> int:
        """Acknowledge the `count` oldest unacknowledged messages of `partition` below `end` (its end
        offset), or as many as it has; returns how many."""
        with self.mutex:
            acks = self.record.partitions[partition].acks
            start, skipped = acks.floor, 0
            while skipped < count and start < end:
                stop = min(end, start + count - skipped)  # at most the messages still to skip
                offsets = np.arange(start, stop, dtype=np.int64)
                if acks.high > start:  # acknowledged ones in range: they are not skipped again
                    offsets = offsets[acks.unacked_mask(start, stop)]
                if len(offsets):
                    acks.ack_many(offsets)
                    skipped += len(offsets)
                start = stop
            if skipped:
                self.dirty = True
            return skipped

    def reset(self, partition: int, offset: int) -> None:
        """Everything before `offset` acknowledged, everything from it on not."""
        with self.mutex:
            self.record.partitions[partition].acks = AckSet(offset)
            self.dirty = True

    # the file

    def persist(self) -> None:
        with self.mutex:
            if self.fence.deleted or self.path is None:  # its files went with the topic; or it has none
                self.dirty = False
                return
            self.dirty = False  # before the save: an ack during it (it takes no mutex) marks it dirty again
            try:
                save(self.path, self.record, fsync=self.fsync)
            except BaseException:
                self.dirty = True
                raise

    def close(self) -> None:
        """Persist the whole state (individual acks included) and let the lock go."""
        with self.mutex:
            if self.closed:
                return
            try:
                self.persist()
            finally:
                self.closed = True
                if self.lock is not None:
                    self.lock.release()

    def abandon(self) -> None:
        """Let the lock go without persisting: the topic is being deleted, and its files with it."""
        self.closed = True
        if self.lock is not None:
            self.lock.release()

    def remove(self) -> None:
        """Delete the cursor file, then the lock file, while holding the lock (an unsubscribe)."""
        self.closed = True
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        if self.lock is not None:
            self.lock.remove_and_release()
