"""Locks held by one process at a time: a partition's writer lock (one writing process per partition, any
number of readers), a subscription's cursor lock (one consuming process per subscription) and the server's
lock of its data directory (one server per directory) are each an ExclusiveFileLock.

An ExclusiveFileLock is an flock on a file (`<partition>/.lock`, `<subscription>.lock`, `<data>/serve.lock`), taken
without waiting; the holder's pid is written into the file so the error a second process gets names who holds
it. The kernel drops the lock when the holder dies, so a SIGKILLed holder never leaves a stale lock behind.
Readers of a partition take its lock shared, for a moment (`unattended`)."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from seglog.errors import PartitionLockedError
from seglog.storage.segment import open_no_follow

# How long a writer waits for readers that hold the lock shared (each for one scan of a segment).
SHARED_HOLDERS_WAIT_S = 30.0


class ExclusiveFileLock:
    """An flock on `path` held by one process. `busy` makes the error raised when another process holds it,
    from the lock's path and the holder's pid (default: PartitionLockedError, a partition's writer lock; the
    subscriptions and the server's data directory use their own)."""

    def __init__(self, path: Path, busy: Callable[[str, int | None], Exception] = PartitionLockedError) -> None:
        self.path = path
        for _ in range(100):  # bounded: each round means another process removed the file meanwhile
            fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)  # the pid is written into it: never through a link
            if not _lock_exclusive(fd):
                holder = _read_pid(fd)
                os.close(fd)
                raise busy(str(path), holder)
            if _still_linked(fd, path):
                break
            os.close(fd)  # locked a file its holder removed (remove_and_release): lock the new one
        else:
            raise OSError(f"{path}: the lock file kept being removed while being locked")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def remove_and_release(self) -> None:
        """Delete the lock file, then release it: a process that opened the file meanwhile finds, once it
        holds the lock, that the file is gone, and locks a new one (so no two processes ever hold it)."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            self.release()


def _still_linked(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _lock_exclusive(fd: int) -> bool:
    """Take the lock exclusively: at once, or after the readers holding it shared let go; False when
    another process holds it exclusively (a writer)."""
    deadline = time.monotonic() + SHARED_HOLDERS_WAIT_S
    delay = 0.0005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        try:  # a shared lock is granted only when nobody holds it exclusively
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


@contextmanager
def unattended(lock_path: Path, clean_marker: Path) -> Iterator[bool]:
    """Whether a partition stopped without a clean close and has no writer now. While the block runs with
    True, a shared lock keeps any writer from starting (and recovering the files under the caller)."""
    if clean_marker.exists():
        yield False
        return
    try:
        fd = open_no_follow(lock_path, os.O_RDONLY)
    except FileNotFoundError:  # no writer ever ran here
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # a writer holds it: its index is the partition
            yield False
            return
        # A writer may have closed cleanly between the look at the marker and the lock.
        yield not clean_marker.exists()
    finally:
        os.close(fd)  # drops the shared lock


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except ValueError:
        return None


@contextmanager
def writer_locks(paths: Iterable[Path]) -> Iterator[list[ExclusiveFileLock]]:
    """Hold the writer locks of several partitions; if any is held elsewhere, release those already taken
    and raise PartitionLockedError before anything has been changed."""
    locks: list[ExclusiveFileLock] = []
    try:
        for path in paths:
            locks.append(ExclusiveFileLock(path))
        yield locks
    finally:
        for lock in locks:
            lock.release()
