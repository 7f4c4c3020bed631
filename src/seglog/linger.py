"""The background flusher: writes a partition's queued messages once the oldest has waited `linger_ms`,
as Kafka's sender thread does, and fsyncs a partition whose fsync interval has run out on unsynced
writes, so an idle partition is synced within its interval too. Waits use real time (time.monotonic),
never the log's clock."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from seglog.writer import PartitionWriter

log = logging.getLogger("seglog.linger")


class LingerFlusher:
    def __init__(self) -> None:
        self._due: list[tuple[float, int, PartitionWriter, Callable[[], object]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def schedule(self, writer: PartitionWriter, linger_ms: int) -> None:
        """Flush `writer`'s queued messages `linger_ms` from now (earlier if its batch fills first)."""
        self._run_at(time.monotonic() + linger_ms / 1000, writer, writer.flush_pending)

    def schedule_sync(self, writer: PartitionWriter, due: float) -> None:
        """Let `writer` fsync what it has written at `due` (time.monotonic()), if it still needs to then."""
        self._run_at(due, writer, writer.sync_when_due)

    def _run_at(self, due: float, writer: PartitionWriter, task: Callable[[], object]) -> None:
        with self._wake:
            heapq.heappush(self._due, (due, next(self._order), writer, task))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="seglog-linger", daemon=True)
                self._thread.start()
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
                task()
            except Exception:  # logged (a failed flush's batch was dropped by the writer); serve the others
                log.exception("background %s of %s failed", task.__name__, writer.directory)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
