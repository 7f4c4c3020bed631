"""A topic's fence: one byte in `<topic directory>/.fence`, mapped by every process that uses the topic and
set when the topic is deleted.

Deleting a topic must stop its users in every process at once: a producer must not write into a deleted
topic (or, once the name is reused, into the new topic of that name), a consumer must not persist a cursor
into it, a reader must not read on. A process cannot reach into another, but they share the page cache:
the deleter writes the byte, and every holder of the map sees it at its next send, ack or read and raises
TopicNotFoundError. Pulsar's broker fences a deleted topic's producers and consumers the same way. The
check is one memory read. A recreated topic gets a new file, so handles of the old one stay fenced."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from pathlib import Path

from seglog.errors import TopicNotFoundError
from seglog.storage.segment import close_map, map_file

FENCE_FILE = ".fence"
_LIVE = b"\0"
_DELETED = b"\1"


class TopicFence:
    """The fence of one topic as this process maps it."""

    def __init__(self, topic_directory: Path, name: str) -> None:
        """Map the fence of a topic; TopicNotFoundError if it has none (it was deleted)."""
        self.name = name
        try:
            self._map = map_file(topic_directory / FENCE_FILE, writable=False)
        except FileNotFoundError:
            raise TopicNotFoundError(f"topic {name} does not exist") from None
        if self._map is None:  # empty: never fully created
            raise TopicNotFoundError(f"topic {name} does not exist")
        # One byte, read-only: hot paths (send, ack) test `buffer[0]` and call check() only when it is set.
        self.buffer = memoryview(self._map)
        # the users that took `buffer` themselves (lend), told when the log closes; a user collected meanwhile
        # drops out by itself
        self._borrowers: set[weakref.WeakMethod] = set()

    @property
    def deleted(self) -> bool:
        return self.buffer[0] != 0

    def check(self) -> None:
        """Raise TopicNotFoundError if the topic was deleted since this handle was made."""
        if self.buffer[0]:
            raise TopicNotFoundError(f"topic {self.name} was deleted")

    def lend(self, on_close: Callable[[], None]) -> memoryview:
        """`buffer`, for a user that tests it on its hot path with no call (a producer's send, a consumer's
        ack). `on_close`, a method of the user (held weakly: the fence does not keep the user alive), is
        called when the log closes: it must drop the buffer, and whatever else of the data directory the user
        holds, since the log's close leaves no map to a user that lives on."""
        self._borrowers.add(weakref.WeakMethod(on_close, self._borrowers.discard))
        return self.buffer

    def close(self) -> None:
        """Let go of the map (the log closes): every user that borrowed the buffer is told to drop it first,
        and from here on the fence reads live, so a handle checked after the close is refused by the closed
        log instead. The page is unmapped at once, or when the last buffer into it is gone if a caller
        still holds one (a user that took it without lend)."""
        borrowers, self._borrowers = self._borrowers, set()
        for borrower in borrowers:
            on_close = borrower()
            if on_close is not None:
                on_close()
        self.buffer = memoryview(_LIVE)
        close_map(self._map)
        self._map = None


def create_fence(topic_directory: Path) -> None:
    """Make the topic directory and its fence, live (the caller creates the topic)."""
    topic_directory.mkdir(parents=True, exist_ok=True)
    path = topic_directory / FENCE_FILE
    staging = path.with_name(FENCE_FILE + ".tmp")
    staging.write_bytes(_LIVE)
    os.replace(staging, path)  # whole or absent: a reader never maps an empty fence


def fence_deleted(topic_directory: Path) -> bool:
    """Whether the topic directory's fence says deleted (a deletion a crash interrupted)."""
    try:
        return (topic_directory / FENCE_FILE).read_bytes()[:1] == _DELETED
    except FileNotFoundError:
        return False


def has_fence(topic_directory: Path) -> bool:
    return (topic_directory / FENCE_FILE).exists()


def set_deleted(topic_directory: Path) -> None:
    """Fence every user of the topic, in every process (the caller deletes the topic next)."""
    try:
        fd = os.open(topic_directory / FENCE_FILE, os.O_WRONLY)
    except FileNotFoundError:
        return  # never used, or made by a version without fences: nothing maps it
    try:
        os.pwrite(fd, _DELETED, 0)
        os.fsync(fd)  # a crash before the rest of the deletion finishes it at the next open
    finally:
        os.close(fd)
