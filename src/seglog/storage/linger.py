"""The background flusher: writes a partition's queued messages once the oldest has waited `linger_ms`,
as Kafka's sender thread does, fsyncs a partition whose fsync interval has run out on unsynced writes, so
an idle partition is synced within its interval too, and makes writers' spare segments (writer.SpareMaker).
Waits use real time (time.monotonic), never the log's clock."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Callable, Protocol

from seglog.storage.fence import TopicFence

logger = logging.getLogger(__name__)


class FlushedWriter(Protocol):
    """What the flusher runs tasks of: a writer.PartitionWriter (which imports this module, so it is named
    here by what the flusher uses of it)."""
    closed: bool
    directory: Path
    fence: TopicFence

    def linger_until(self, due: float) -> bool: ...

    def flush_lingering(self) -> float | None: ...

    def sync_when_due(self) -> None: ...


class LingerFlusher:
    def __init__(self) -> None:
        self._due: list[tuple[float, int, FlushedWriter, Callable[[], float | None]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def schedule(self, writer: FlushedWriter, linger_ms: int) -> None:
        """Write the batch `writer` is gathering `linger_ms` from now, unless it is written before then (it
        filled up, or was flushed). A writer has one call at a time: when it comes, it follows the batch
        gathered since (PartitionWriter.flush_lingering), so a fast sender costs this thread a wakeup per
        linger time, not one per batch."""
        due = time.monotonic() + linger_ms / 1000
        if writer.linger_until(due):
            self._run_at(due, writer, writer.flush_lingering)

    def run_soon(self, writer: FlushedWriter, task: Callable[[], None]) -> None:
        """Run `task` (work of `writer` that need not hold up its caller, such as making its spare segment)
        as soon as this thread is free."""
        self._run_at(time.monotonic(), writer, task)

    def schedule_sync(self, writer: FlushedWriter, due: float) -> None:
        """Let `writer` fsync what it has written at `due` (time.monotonic()), if it still needs to then."""
        self._run_at(due, writer, writer.sync_when_due)

    def _run_at(self, due: float, writer: FlushedWriter, task: Callable[[], float | None]) -> None:
        entry = (due, next(self._order), writer, task)
        with self._wake:
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="seglog-linger", daemon=True)
                self._thread.start()
            elif self._due[0] is entry:  # else the thread waits for an earlier one: no need to wake it
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and (not self._due or self._due[0][0] > time.monotonic()):
                    self._wake.wait(self._due[0][0] - time.monotonic() if self._due else None)
                if self._stopping:
                    return
                _, _, writer, task = heapq.heappop(self._due)
            if writer.closed or writer.fence.deleted:  # a deleted topic's queued messages go with it
                continue
            try:
                again = task()
            except Exception:  # logged (a failed flush's batch was dropped by the writer); serve the others
                logger.exception("background %s of %s failed", task.__name__, writer.directory)
                continue
            if again is not None:  # the task asks to run again then
                self._run_at(again, writer, task)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
