"""The one wait for something to happen, by calling `attempt()` until it gives a result: for a message to
receive or read, for a quota held until a cursor moves.

What this process can signal (an append by its writer: storage.notification) wakes the wait at once. What
it cannot (an append by another process, a redelivery due by time, a cursor moved by another process) is
found by a back-off poll from POLL_START_S to POLL_MAX_S between attempts, the fallback, so nothing waits
longer for it than that cap."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from threading import Event
from typing import Protocol, TypeVar

from seglog.errors import ClosedError

T = TypeVar("T")

POLL_START_S = 0.0002
POLL_MAX_S = 0.01


class Signal(Protocol):
    """What wakes a wait (storage.notification.AppendSignal)."""
    closed: bool

    def watch(self, event: Event) -> None: ...

    def unwatch(self, event: Event) -> None: ...


def wait_until(deadline: float | None, attempt: Callable[[], T], signals: Sequence[Signal] = ()) -> T:
    """Call `attempt()` until it returns something truthy or the real-time `deadline` (monotonic seconds;
    None: forever) passes; returns its last result. Between attempts it waits for any of `signals` or the
    poll's current interval, whichever comes first; ClosedError when a signal is closed and the attempt
    after it found nothing. Nothing is registered unless the first attempt finds nothing."""
    result = attempt()
    if result or (deadline is not None and deadline <= time.monotonic()):
        return result
    delay = POLL_START_S
    if not signals:
        while True:
            time.sleep(delay if deadline is None else min(delay, max(deadline - time.monotonic(), 0)))
            result = attempt()
            if result or (deadline is not None and deadline <= time.monotonic()):
                return result
            delay = min(delay * 2, POLL_MAX_S)
    event = Event()
    for signal in signals:
        signal.watch(event)
    try:
        while True:
            event.clear()  # before the attempt: what is appended after it sets the event again
            result = attempt()
            if result:
                return result
            if any(signal.closed for signal in signals):
                raise ClosedError("the log was closed while waiting")
            if deadline is None:
                event.wait(delay)
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return result
                event.wait(min(delay, remaining))
            delay = min(delay * 2, POLL_MAX_S)
    finally:
        for signal in signals:
            signal.unwatch(event)
