"""The one back-off poll: for waits on another process (a quota held until a cursor moves, a message to
receive), where nothing in this process can signal the change."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(deadline: float | None, attempt: Callable[[], T], poll_start: float = 0.0002,
               poll_max: float = 0.01) -> T:
    """Call `attempt()` until it returns something truthy or the real-time `deadline` (monotonic seconds;
    None: forever) passes; returns its last result."""
    delay = poll_start
    while True:
        result = attempt()
        if result:
            return result
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return result
            time.sleep(min(delay, remaining))
        else:
            time.sleep(delay)
        delay = min(delay * 2, poll_max)
