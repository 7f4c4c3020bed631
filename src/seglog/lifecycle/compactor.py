"""Compaction of whole topics on request, Pulsar's model (`admin.topics.compact`), and its status as Pulsar's
broker answers it (LongRunningProcessStatus): NOT_RUN until a compaction of the topic was asked of this
process, RUNNING, SUCCESS, or ERROR with the error's text in `lastError`. Like Pulsar's broker, the status
lives in the process that ran the compaction; the compacted view it made is on disk and outlives it.

A compaction of a topic compacts each partition up to the end offset it has when the compaction reaches it
(Pulsar's compactor reads up to the last message of the topic when it starts), one partition at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from seglog.catalog.topics import TopicRef
from seglog.lifecycle.compaction import CompactionOutcome, CompactionRunningError, compact_partition
from seglog.storage.store import PartitionStore

NOT_RUN, RUNNING, SUCCESS, ERROR = "NOT_RUN", "RUNNING", "SUCCESS", "ERROR"


@dataclass(frozen=True)
class CompactionStatus:
    """Pulsar's answer to GET .../compaction: the status, and lastError when it is ERROR (then `failed_ms`,
    by the log's clock, is when)."""
    status: str
    last_error: str | None = None
    failed_ms: int = 0

    def to_admin(self) -> dict[str, Any]:
        return {"status": self.status, "lastError": self.last_error or ""}


class Compactor:
    """Runs topic compactions and remembers how the last one of each topic went. Thread-safe."""

    def __init__(self, store: PartitionStore, clock: Callable[[], int]) -> None:
        self._store = store
        self._clock = clock
        self._status: dict[str, CompactionStatus] = {}
        self._lock = threading.Lock()

    def status(self, ref: TopicRef) -> CompactionStatus:
        with self._lock:
            return self._status.get(str(ref.name), CompactionStatus(NOT_RUN))

    def begin(self, ref: TopicRef) -> None:
        """Mark the topic's compaction RUNNING; CompactionRunningError if it already is."""
        with self._lock:
            if self._status.get(str(ref.name), CompactionStatus(NOT_RUN)).status == RUNNING:
                raise CompactionRunningError(str(ref.name), None, "topic")
            self._status[str(ref.name)] = CompactionStatus(RUNNING)

    def run(self, ref: TopicRef, delete_retention_ms: int | None = None) -> list[CompactionOutcome]:
        """Compact every partition of the topic now (after `begin`), recording SUCCESS or ERROR. Each
        partition's tombstones go at once (Pulsar), or per `delete_retention_ms` (Kafka's topics)."""
        try:
            outcomes = []
            for partition in range(ref.partitions):
                view = self._store.view(ref.name, partition)
                outcomes.append(compact_partition(view, horizon=view.end_offset(), now_ms=self._clock(),
                                                  delete_retention_ms=delete_retention_ms))
        except Exception as error:
            with self._lock:
                self._status[str(ref.name)] = CompactionStatus(ERROR, str(error), self._clock())
            raise
        with self._lock:
            self._status[str(ref.name)] = CompactionStatus(SUCCESS)
        return outcomes

    def compact(self, ref: TopicRef, delete_retention_ms: int | None = None) -> list[CompactionOutcome]:
        """begin + run: a compaction in the caller's thread."""
        self.begin(ref)
        return self.run(ref, delete_retention_ms)

    def forget(self, ref: TopicRef) -> None:
        """The topic was deleted: a new topic of its name starts at NOT_RUN."""
        with self._lock:
            self._status.pop(str(ref.name), None)
