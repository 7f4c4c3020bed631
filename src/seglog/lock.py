"""The writer lock of a partition: one writing process per partition, any number of readers.

An flock on `<partition>/.lock`, taken without waiting; the holder's pid is written into the file so the
error a second process gets names who holds it. The kernel drops the lock when the holder dies, so a
SIGKILLed writer never leaves a stale lock behind."""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from seglog.errors import PartitionLockedError
from seglog.segment import open_no_follow


class WriterLock:
    """An flock held by one process. `busy` makes the error raised when another process holds it, from
    the lock's path and the holder's pid (default: PartitionLockedError; subscriptions use their own)."""

    def __init__(self, path: Path, busy: Callable[[str, int | None], Exception] = PartitionLockedError) -> None:
        self.path = path
        fd = open_no_follow(path, os.O_RDWR | os.O_CREAT)  # the pid is written into it: never through a link
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise busy(str(path), holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except ValueError:
        return None


@contextmanager
def writer_locks(paths: Iterable[Path]) -> Iterator[list[WriterLock]]:
    """Hold the writer locks of several partitions; if any is held elsewhere, release those already taken
    and raise PartitionLockedError before anything has been changed."""
    locks: list[WriterLock] = []
    try:
        for path in paths:
            locks.append(WriterLock(path))
        yield locks
    finally:
        for lock in locks:
            lock.release()
