"""The background flusher: writes a partition's queued messages once the oldest has waited `linger_ms`,
as Kafka's sender thread does. Waits use real time (time.monotonic), never the log's clock."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seglog.writer import PartitionWriter

log = logging.getLogger("seglog.linger")


class LingerFlusher:
    def __init__(self) -> None:
        self._due: list[tuple[float, int, PartitionWriter]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def schedule(self, writer: PartitionWriter, linger_ms: int) -> None:
        """Flush `writer`'s queued messages `linger_ms` from now (earlier if its batch fills first)."""
        with self._wake:
            heapq.heappush(self._due, (time.monotonic() + linger_ms / 1000, next(self._order), writer))
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
                _, _, writer = heapq.heappop(self._due)
            if writer.closed:
                continue
            try:
                writer.flush_pending()
            except Exception:  # the writer dropped and logged the batch; keep serving the other partitions
                log.exception("background flush of %s failed", writer.directory)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join()
