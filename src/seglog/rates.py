"""Rates over a sliding window, as Pulsar's stats report them (msgRateIn, msgThroughputOut, ...): counts added
as they happen, read as per-second rates over the last WINDOW_S seconds, and running totals (the *Counter
keys). Cheap enough for every SEND: one add per event into a ring of one-second buckets. And the form of a
time in those stats."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timezone

WINDOW_S = 10


class RateMeter:
    """Messages and bytes per second over the last WINDOW_S seconds of `clock` (ms), and their totals."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: list[list[int]] = [[-1, 0, 0] for _ in range(WINDOW_S)]  # [second, messages, bytes]
        self.messages = 0
        self.bytes = 0

    def add(self, messages: int, nbytes: int) -> None:
        second = self._clock() // 1000
        with self._lock:
            bucket = self._buckets[second % WINDOW_S]
            if bucket[0] != second:
                bucket[:] = [second, 0, 0]
            bucket[1] += messages
            bucket[2] += nbytes
            self.messages += messages
            self.bytes += nbytes

    def rates(self) -> tuple[float, float]:
        """(messages per second, bytes per second) over the last WINDOW_S whole seconds and this one."""
        now = self._clock() // 1000
        with self._lock:
            recent = [b for b in self._buckets if now - WINDOW_S < b[0] <= now]
        return sum(b[1] for b in recent) / WINDOW_S, sum(b[2] for b in recent) / WINDOW_S


def iso_time(ms: int) -> str:
    """A time as Pulsar's stats show one (connectedSince): ISO 8601 in UTC."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()
