"""PartitionStore: this process's partitions of one data directory, as a service for the layers above.

It knows where each topic's files are (topics/<tenant>/<namespace>/<topic>/<partition>/), keeps the shared
read-side view of every partition in use and its segment facts, the partition writers with a count of their
users (the last one closes a writer and lets its lock go), each partition's append notification (its writer
signals it, its readers wait on it: storage.notification), the background linger thread, each topic's fence,
and the file side of a topic's creation and deletion. Topics are named by TopicName and partitions by
number; whether a partition exists is the catalog's to say (TopicRef.check_partition)."""

from __future__ import annotations

import shutil
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any, Collection

from seglog.clock import Clock
from seglog.errors import ClosedError
from seglog.names import TopicName
from seglog.rates import Traffic
from seglog.storage.check import topic_directory, unowned_topics
from seglog.storage.fence import FENCE_FILE, TopicFence, create_fence, fence_deleted, has_fence, set_deleted
from seglog.storage.linger import LingerFlusher
from seglog.storage.lock import ExclusiveFileLock
from seglog.storage.notification import AppendSignal
from seglog.storage.partition_view import PartitionView, start_offset
from seglog.storage.reader import Reader
from seglog.storage.segment import LOCK_FILE, delete_segments, refuse_symbolic_links
from seglog.storage.writer import PartitionWriter, WriterSettings


class PartitionStore:
    """The partitions of the data directory `path` that this process reads and writes."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path = path
        self.clock = clock
        self._fences: dict[str, TopicFence] = {}
        # the fences of deleted topics a new fence replaced: handles made before the deletion still hold them
        self._replaced_fences: weakref.WeakSet[TopicFence] = weakref.WeakSet()
        self._views: dict[Path, PartitionView] = {}
        self._readers: weakref.WeakSet[Reader] = weakref.WeakSet()  # closed with the store: they hold maps
        self._writers: dict[tuple[str, int], PartitionWriter] = {}
        self._writer_users: dict[tuple[str, int], int] = {}  # this process's producers using each writer
        # open producers of each (topic, whether they route): a deletion names them all, a growth the routing
        self._producers: dict[tuple[str, bool], int] = {}
        self._signals: dict[tuple[str, int], AppendSignal] = {}
        self._signals_lock = threading.Lock()
        self._writers_lock = threading.Lock()
        self._linger = LingerFlusher()
        self.traffic = Traffic(clock)  # the live rates and counters of this process's topics (stats)
        self._closed = False

    # files and fences

    def topic_directory(self, name: TopicName) -> Path:
        return topic_directory(self.path, name)

    def partition_directory(self, name: TopicName, partition: int) -> Path:
        """The partition's directory; TopicNotFoundError once the topic is deleted (its directories may be a
        new topic's of the same name)."""
        self.fence(name).check()
        return self.topic_directory(name) / str(partition)

    def fence(self, name: TopicName) -> TopicFence:
        """This process's map of the topic's fence (mapped again when the name is reused after a deletion).
        Once the store is closed, a map for the caller alone, let go of with it: the store keeps none."""
        known = self._fences.get(str(name))
        if known is not None and not known.deleted:
            return known
        fence = TopicFence(self.topic_directory(name), str(name))
        if not self._closed:
            if known is not None:
                self._replaced_fences.add(known)
            self._fences[str(name)] = fence
        return fence

    def has_fence(self, name: TopicName) -> bool:
        return has_fence(self.topic_directory(name))

    def create_fence(self, name: TopicName) -> None:
        create_fence(self.topic_directory(name))

    def is_deleted(self, name: TopicName) -> bool:
        """Whether a deletion of the topic set its fence (and may not have finished: a crash)."""
        return fence_deleted(self.topic_directory(name))

    def set_deleted(self, name: TopicName) -> None:
        """Fence the topic: from here on every user of it, in every process, fails."""
        set_deleted(self.topic_directory(name))

    def new_trash(self) -> Path:
        """A fresh folder name under trash/ (emptied at every open), made when something is moved there."""
        return self.path / "trash" / uuid.uuid4().hex

    def empty_trash(self) -> None:
        shutil.rmtree(self.path / "trash", ignore_errors=True)

    def move_to_trash(self, name: TopicName, trash: Path, *others: tuple[str, Path]) -> None:
        """Move the topic's directory, and the (kind, directory) pairs `others` of the layers above, into
        `trash` (atomic renames)."""
        _move_into(trash, ("topic", self.topic_directory(name)), *others)

    def empty_topic(self, name: TopicName, trash: Path, *others: tuple[str, Path]) -> None:
        """Move everything of the topic's directory but its fence, and the (kind, directory) pairs `others`,
        into `trash`: a deletion's step before its commit, which leaves the fence saying deleted where the
        next open looks for it should the commit never come."""
        directory = self.topic_directory(name)
        moved = [(f"topic-{entry.name}", entry) for entry in sorted(directory.iterdir()) if entry.name != FENCE_FILE] \
            if directory.is_dir() else []
        _move_into(trash, *moved, *others)

    def unowned_topics(self, listed: Collection[str]) -> list[TopicName]:
        """The topics with a directory that `listed` (the metadata's topic names) lacks (storage.check)."""
        return unowned_topics(self.path, listed)

    # reading

    def view(self, name: TopicName, partition: int) -> PartitionView:
        """The shared read-side view of a partition (readers, offsets, storage size)."""
        self._check_open()
        directory = self.partition_directory(name, partition)
        view = self._views.get(directory)
        if view is None:
            refuse_symbolic_links(directory)
            view = self._views[directory] = PartitionView(directory)
        return view

    def reader(self, name: TopicName, partition: int, start: Any, *, verify_crc: bool,
               read_compacted: bool = False) -> Reader:
        """A reader of the partition from `start`, closed when the store closes if not before; with
        `read_compacted`, of its compacted view below the compaction horizon, then of the log."""
        view = self.view(name, partition)
        reader = Reader(view, partition, start, verify_crc=verify_crc, fence=self.fence(name),
                        appended=self.append_signal(name, partition),
                        compacted=view.compacted if read_compacted else None)
        with self._writers_lock:
            self._readers.add(reader)
        return reader

    def append_signal(self, name: TopicName, partition: int) -> AppendSignal:
        """The partition's append notification: this process's writer of it signals every append."""
        self._check_open()
        key = (str(name), partition)
        with self._signals_lock:
            signal = self._signals.get(key)
            if signal is None:
                signal = self._signals[key] = AppendSignal()
            return signal

    def start_offset(self, name: TopicName, partition: int, start: Any) -> int:
        """Where a read from `start` ('earliest', 'latest', an offset or {'timestamp': ms}) begins."""
        return start_offset(self.view(name, partition), start)

    def earliest_offset(self, name: TopicName, partition: int) -> int:
        return self.view(name, partition).earliest_offset()

    def end_offset(self, name: TopicName, partition: int) -> int:
        return self.view(name, partition).end_offset()

    # writing

    def producer_opened(self, name: TopicName, *, routes: bool = True) -> None:
        """A producer of the topic opened. `routes`: it chooses among the topic's partitions (a growth would
        leave it spreading messages over the partitions it started with); False for one that writes each
        message where it is told (a geo-replicator: partition i of the origin to partition i)."""
        self._check_open()
        key = (str(name), routes)
        with self._writers_lock:
            self._producers[key] = self._producers.get(key, 0) + 1

    def producer_closed(self, name: TopicName, fence: TopicFence, *, routes: bool = True) -> None:
        """A producer of the topic closed; `fence` and `routes` as it was opened with."""
        key = (str(name), routes)
        with self._writers_lock:
            # Counted no more after the store closed or the topic was deleted (the name may be another's now).
            if not self._closed and not fence.deleted:
                self._producers[key] -= 1
                if not self._producers[key]:
                    del self._producers[key]

    def producers(self, name: TopicName, *, routing_only: bool = False) -> int:
        """This process's open producers of the topic (those that route among its partitions only)."""
        with self._writers_lock:
            routing = self._producers.get((str(name), True), 0)
            return routing if routing_only else routing + self._producers.get((str(name), False), 0)

    def acquire_writer(self, name: TopicName, partition: int, settings: WriterSettings) -> PartitionWriter:
        """This process's writer of one partition, opened (taking its writer lock) for its first user."""
        self._check_open()
        key = (str(name), partition)
        with self._writers_lock:
            writer = self._writers.get(key)
            if writer is None:
                writer = self._writers[key] = PartitionWriter(self.partition_directory(name, partition), partition,
                                                              settings, self.clock, self._linger, self.fence(name),
                                                              self.append_signal(name, partition),
                                                              self.traffic.topic(str(name)).inbound[partition])
            self._writer_users[key] = self._writer_users.get(key, 0) + 1
            return writer

    def release_writer(self, name: TopicName, partition: int, fence: TopicFence) -> None:
        """A user is done with a partition's writer (`fence`: the one the user was made with): the last one
        closes it (and lets its lock go)."""
        key = (str(name), partition)
        with self._writers_lock:
            if self._closed or fence.deleted:  # its writers went with the store or the topic
                return
            self._writer_users[key] -= 1
            if not self._writer_users[key]:
                del self._writer_users[key]
                self._writers.pop(key).close()

    def writes(self, name: TopicName, partition: int) -> bool:
        """Whether this process holds the partition's writer."""
        with self._writers_lock:
            return (str(name), partition) in self._writers

    def delete_segments(self, name: TopicName, partition: int, bases: list[int]) -> list[int]:
        """Delete sealed segments of a partition (never the one being written), as its writer: this
        process's, or holding the writer lock for the deletion (PartitionLockedError if another process
        writes the partition: its own maintenance deletes there). Returns the bases deleted."""
        directory = self.partition_directory(name, partition)
        with self._writers_lock:
            writer = self._writers.get((str(name), partition))
        if writer is not None:
            with writer.write_lock:
                bases = [b for b in bases if b != writer.active.base_offset]
                delete_segments(directory, bases)
        else:
            refuse_symbolic_links(directory)
            lock = ExclusiveFileLock(directory / LOCK_FILE)
            try:
                delete_segments(directory, bases)
            finally:
                lock.release()
        view = self._views.get(directory)
        if view is not None:  # let go of their maps now: a reader from a deleted offset goes on at the earliest
            view.rescan(force=True)
        return bases

    def lock_partition(self, name: TopicName, partition: int) -> ExclusiveFileLock | None:
        """Take the writer lock of a partition this process does not write, so that nobody starts writing it
        (PartitionLockedError naming the holder if another process does); None if it has no files yet."""
        directory = self.partition_directory(name, partition)
        if self.writes(name, partition) or not directory.is_dir():
            return None
        return ExclusiveFileLock(directory / LOCK_FILE)

    def spare_ready(self, name: TopicName, partition: int) -> bool | None:
        """Whether this process's writer of the partition has its next segment made ahead (None: it does
        not write the partition)."""
        with self._writers_lock:
            writer = self._writers.get((str(name), partition))
        return None if writer is None else writer.spare_ready

    def reconfigure(self, name: TopicName, settings: WriterSettings) -> None:
        """The topic's settings changed: its open writers take them."""
        with self._writers_lock:
            for (topic, _), writer in self._writers.items():
                if topic == str(name):
                    writer.config = settings

    def linger(self, writer: PartitionWriter, linger_ms: int) -> None:
        """Have the batch `writer` is gathering written `linger_ms` from now (LingerFlusher.schedule)."""
        self._linger.schedule(writer, linger_ms)

    def forget_topic(self, name: TopicName) -> None:
        """Let go of this process's writers and views of a deleted topic (fenced: its writers unmap and
        leave the files alone; batches already read keep their maps alive), and of its live figures."""
        self.traffic.forget(str(name))
        with self._writers_lock:
            for routes in (True, False):
                self._producers.pop((str(name), routes), None)
            for key in [k for k in self._writers if k[0] == str(name)]:
                self._writer_users.pop(key, None)
                self._writers.pop(key).close()
        directory = self.topic_directory(name)
        for partition_directory in [d for d in self._views if d.parent == directory]:
            del self._views[partition_directory]
        with self._signals_lock:  # its waiters wake, and find the topic deleted
            for key in [k for k in self._signals if k[0] == str(name)]:
                self._signals.pop(key).close()

    def flush(self) -> None:
        """Write every message queued by this process's producers."""
        with self._writers_lock:
            writers = list(self._writers.values())
        for writer in writers:
            writer.flush_pending()

    def close(self) -> None:
        """Stop the linger thread, close every writer (their partitions are marked cleanly closed), every
        reader and view, let go of every fence, and wake every waiter (ClosedError): no map or descriptor of
        the data directory is left to this store, whoever keeps it (batches already returned keep theirs)."""
        if self._closed:
            return
        self._closed = True
        self._linger.stop()
        with self._writers_lock:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()
            self._writer_users.clear()
            self._producers.clear()
            readers = list(self._readers)
        for reader in readers:
            reader.close()
        for view in self._views.values():
            view.close()
        self._views.clear()
        fences = [*self._fences.values(), *self._replaced_fences]
        self._fences.clear()
        self._replaced_fences.clear()
        for fence in fences:
            fence.close()
        with self._signals_lock:
            for signal in self._signals.values():
                signal.close()
            self._signals.clear()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"log {self.path} is closed")


def _move_into(trash: Path, *entries: tuple[str, Path]) -> None:
    """Rename each (name, path) of `entries` that exists to `trash/name` (made if needed)."""
    for kind, path in entries:
        if path.exists():
            trash.mkdir(parents=True, exist_ok=True)
            path.rename(trash / kind)
