"""Delayed delivery's index (Pulsar's DelayedDeliveryTracker, in buckets as its PIP-195): the messages a
shared or key_shared subscription read before their delivery time, kept until that time comes.

Dispatch reads a delayed batch, hands its messages here and reads on; once due they are delivered before
new messages, as redeliveries are (redelivery.py releases them), without counting as redelivered. An entry
is two int64s: its time and its offset. A partition's newest entries gather in memory, up to
BUCKET_ENTRIES; a full bucket is sorted by time and written to an unlinked file in the spill directory,
which the kernel frees whatever ends the process, and is read back through a memory map from its head.
So a process holds one open bucket a partition in its own memory however many messages wait, and the
sealed buckets' pages are file pages the kernel may drop.

Nothing here is durable, and need not be: delayed messages stay unacknowledged, so after a restart dispatch
reads them again from the mark-delete position and indexes them anew, as Pulsar's in-memory tracker does.
Every call is made holding the subscription's mutex."""

from __future__ import annotations

import mmap
import tempfile
from pathlib import Path

import numpy as np

BUCKET_ENTRIES = 1 << 16  # an open bucket's most entries (1 MiB), sealed to a file when full
_FIRST_CAPACITY = 64
_NEVER = np.iinfo(np.int64).max


class _SealedBucket:
    """A full bucket on disk: times ascending (offsets in the same order), read from `head` on."""

    def __init__(self, times: np.ndarray, offsets: np.ndarray, directory: Path) -> None:
        order = np.lexsort((offsets, times))
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory) as file:  # unlinked at once: freed however the process ends
            file.write(times[order].tobytes())
            file.write(offsets[order].tobytes())
            file.flush()
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)  # (outlives the descriptor)
        entries = len(times)
        self.times = np.frombuffer(self._map, dtype=np.int64, count=entries)
        self.offsets = np.frombuffer(self._map, dtype=np.int64, count=entries, offset=8 * entries)
        self.head = 0

    @property
    def remaining(self) -> int:
        return len(self.times) - self.head

    @property
    def next_time(self) -> int:
        return int(self.times[self.head])

    def take_due(self, now: int, limit: int) -> np.ndarray:
        stop = min(int(np.searchsorted(self.times, now, side="right")), self.head + limit)
        due = np.array(self.offsets[self.head:stop])  # (a copy: the map goes with the bucket)
        self.head = max(stop, self.head)
        return due


class PartitionDelays:
    """One partition's delayed messages: the open bucket in memory, the sealed ones on disk."""

    def __init__(self, spill_directory: Path) -> None:
        self.spill_directory = spill_directory
        self._times = np.empty(0, dtype=np.int64)
        self._offsets = np.empty(0, dtype=np.int64)
        self._open = 0  # entries in the open bucket
        self._sealed: list[_SealedBucket] = []
        self.next_time = _NEVER  # the earliest time of any entry

    @property
    def count(self) -> int:
        return self._open + sum(bucket.remaining for bucket in self._sealed)

    def add(self, offsets: np.ndarray, deliver_at: int) -> None:
        start = 0
        while start < len(offsets):
            if self._open == BUCKET_ENTRIES:
                self._seal()
            room = min(len(offsets) - start, BUCKET_ENTRIES - self._open)
            self._reserve(self._open + room)
            self._times[self._open:self._open + room] = deliver_at
            self._offsets[self._open:self._open + room] = offsets[start:start + room]
            self._open += room
            start += room
        if len(offsets):
            self.next_time = min(self.next_time, deliver_at)

    def take_due(self, now: int, limit: int) -> np.ndarray:
        """The offsets due by `now`, earliest first, at most `limit`, taken out of the index."""
        if now < self.next_time:
            return np.empty(0, dtype=np.int64)
        taken: list[np.ndarray] = []
        for bucket in self._sealed:
            if limit > 0 and bucket.next_time <= now:
                taken.append(bucket.take_due(now, limit))
                limit -= len(taken[-1])
        self._sealed = [bucket for bucket in self._sealed if bucket.remaining]
        if limit > 0 and self._open:
            taken.append(self._take_open(now, limit))
        self.next_time = min([bucket.next_time for bucket in self._sealed]
                             + [int(self._times[:self._open].min()) if self._open else _NEVER])
        return np.concatenate(taken) if taken else np.empty(0, dtype=np.int64)

    def _take_open(self, now: int, limit: int) -> np.ndarray:
        times, offsets = self._times[:self._open], self._offsets[:self._open]
        due = np.flatnonzero(times <= now)
        if len(due) > limit:
            due = due[np.argsort(times[due], kind="stable")[:limit]]
        keep = np.ones(self._open, dtype=bool)
        keep[due] = False
        taken = offsets[due]
        kept = int(keep.sum())
        self._times[:kept], self._offsets[:kept] = times[keep], offsets[keep]
        self._open = kept
        return taken

    def _reserve(self, entries: int) -> None:
        if entries <= len(self._times):
            return
        capacity = min(BUCKET_ENTRIES, max(_FIRST_CAPACITY, 2 * len(self._times), entries))
        for name in ("_times", "_offsets"):
            grown = np.empty(capacity, dtype=np.int64)
            grown[:self._open] = getattr(self, name)[:self._open]
            setattr(self, name, grown)

    def _seal(self) -> None:
        self._sealed.append(_SealedBucket(self._times[:self._open], self._offsets[:self._open],
                                          self.spill_directory))
        self._open = 0


class DelayedDeliveries:
    """The delayed messages of one subscription, per partition."""

    def __init__(self, partitions: int, spill_directory: Path) -> None:
        self.spill_directory = spill_directory
        self.partitions = [PartitionDelays(spill_directory) for _ in range(partitions)]

    @property
    def count(self) -> int:
        """Messages waiting for their time (Pulsar's msgDelayed)."""
        return sum(partition.count for partition in self.partitions)

    def add(self, partition: int, offsets: np.ndarray, deliver_at: int) -> None:
        """Hold the messages at `offsets` until `deliver_at` (ms since the epoch, by the log's clock)."""
        self.partitions[partition].add(offsets, deliver_at)

    def take_due(self, partition: int, now: int, limit: int) -> np.ndarray:
        return self.partitions[partition].take_due(now, limit)

    def clear(self, partition: int | None = None) -> None:
        """Forget a partition's delayed messages, or all (dispatch reads them again from where it restarts)."""
        for p in range(len(self.partitions)) if partition is None else [partition]:
            self.partitions[p] = PartitionDelays(self.spill_directory)
