"""The append notification of a partition (as Kafka's LogOffsetsListener): this process's writer of the
partition signals it after an append publishes its index entries, and this process's readers and
consumers waiting for new messages are woken by it instead of polling with sleeps.

PartitionStore owns one AppendSignal per partition in use. A waiter puts a threading.Event in `watchers`
(watch) before it looks for new messages, so an append made after that look wakes it. The writer tests
`watchers` without a lock after every append and signals only when someone waits: the append path costs
one test of a set. Appends by another process signal nothing here: waiters also wake on a capped poll
(seglog._wait), which finds those and whatever else is due by time (negative acks, ack timeouts).
Closing the store (or deleting the topic) closes its signals, which wakes every waiter."""

from __future__ import annotations

import asyncio
import threading


class AppendSignal:
    """Woken after each append to one partition, for as long as anyone waits."""

    def __init__(self) -> None:
        self.watchers: set[threading.Event] = set()  # never replaced: the writer keeps a reference to it
        self.closed = False
        self.notified = 0  # appends signalled to waiters
        self._lock = threading.Lock()

    def watch(self, event: threading.Event) -> None:
        """Set `event` after every append from now on (or at once, if closed)."""
        with self._lock:
            self.watchers.add(event)
            if self.closed:
                event.set()

    def unwatch(self, event: threading.Event) -> None:
        with self._lock:
            self.watchers.discard(event)

    def notify(self) -> None:
        """Messages were appended: wake the waiters."""
        with self._lock:
            self.notified += 1
            for event in self.watchers:
                event.set()

    def close(self) -> None:
        """The partition is no longer this process's to read (store closed, topic deleted): wake every
        waiter, now and later."""
        with self._lock:
            self.closed = True
            for event in self.watchers:
                event.set()


class LoopWake(threading.Event):
    """A watcher for an asyncio task: an AppendSignal sets it from the writer's thread, which sets `wake` on
    the task's loop. Appends made while a wake is on its way to the loop add none of their own: each would
    cost the loop a trip through its self-pipe, one an append for a topic of unbatched messages."""

    def __init__(self, loop: asyncio.AbstractEventLoop, wake: asyncio.Event) -> None:
        super().__init__()
        self._loop = loop
        self._wake = wake
        self._on_its_way = False

    def set(self) -> None:
        if self._on_its_way:
            return
        self._on_its_way = True
        try:
            self._loop.call_soon_threadsafe(self._arrive)
        except RuntimeError:  # the loop closed meanwhile
            pass

    def _arrive(self) -> None:
        # (cleared before `wake` is set: an append that found the wake on its way was made before this, so
        # the task, woken after this, sees it)
        self._on_its_way = False
        self._wake.set()
