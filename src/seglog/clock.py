"""The one clock every age-dependent decision reads (timestamps, roll time, retention, TTL, quotas).

`seglog.open(path, clock=...)` takes any callable returning milliseconds since the epoch, so a test can move
time by days with a ManualClock. Waits (linger, timeouts) use real time, never this clock."""

from __future__ import annotations

import threading
import time
from typing import Callable

Clock = Callable[[], int]


def system_clock() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to: `clock.advance(days=7)`.

    Thread safe (advance and set hold a lock); a clock belongs to its process. Starts at `start_ms`
    (default 2024-01-01T00:00:00Z, so timestamps look like real ones)."""

    def __init__(self, start_ms: int = 1_704_067_200_000) -> None:
        self._now = int(start_ms)
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self._now

    def advance(self, ms: int = 0, *, seconds: float = 0, minutes: float = 0, hours: float = 0,
                days: float = 0) -> int:
        """Move forward by the sum of the amounts given; returns the new time in ms."""
        step = int(ms + 1000 * (seconds + 60 * minutes + 3600 * hours + 86400 * days))
        if step < 0:
            raise ValueError(f"a clock only moves forward; advance by {step} ms refused")
        with self._lock:
            self._now += step
            return self._now

    def set(self, now_ms: int) -> None:
        """Jump to `now_ms` (forward only, as a real clock would)."""
        with self._lock:
            if now_ms < self._now:
                raise ValueError(f"a clock only moves forward: {now_ms} is before {self._now}")
            self._now = int(now_ms)
