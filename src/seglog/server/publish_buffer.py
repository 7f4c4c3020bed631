"""The bytes of SENDs received and not yet written, per connection and for the whole server (Pulsar's
maxPendingPublishRequestsPerConnection and maxMessagePublishBufferSizeInMB): while a connection holds more than
its share, or the server more than its whole, the connection stops reading, so producers slow down (TCP
back-pressure: their sends wait in their own queues) instead of the server's memory growing.

A SEND costs its frame's bytes plus what holding it costs the server besides (the parsed command, the queue
entry), so that a flood of tiny SENDs is bounded as surely as a few large ones. Used from the event loop's
thread only."""

from __future__ import annotations

import asyncio

# what holding one received SEND costs besides its metadata and payload: its parsed BaseCommand, the Frame
# and the queue entry (measured: RssAnon grew 1.56 KiB a SEND beside its frame, holding 100,000 unbatched ones)
SEND_OVERHEAD_BYTES = 1600


class PublishBuffer:
    """The server's publish buffer: `limit` bytes in all, `connection_limit` bytes per connection."""

    def __init__(self, limit: int, connection_limit: int) -> None:
        self.limit = limit
        self.connection_limit = connection_limit
        self.held = 0
        self._waiting: list[asyncio.Future[None]] = []  # connections that stopped reading, until bytes go

    def account(self) -> PublishAccount:
        """A new connection's account."""
        return PublishAccount(self)

    def release(self, size: int) -> None:
        """`size` bytes held by a connection went."""
        self.held -= size
        waiting, self._waiting = self._waiting, []
        for future in waiting:  # each looks again whether it may read
            if not future.done():
                future.set_result(None)

    async def next_release(self) -> None:
        """Wait until bytes are released anywhere."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        await future


class PublishAccount:
    """One connection's share of the publish buffer."""

    def __init__(self, buffer: PublishBuffer) -> None:
        self.buffer = buffer
        self.held = 0

    def hold(self, size: int) -> None:
        """A SEND that costs `size` bytes (send_cost) was received."""
        self.held += size
        self.buffer.held += size

    def release(self, size: int) -> None:
        """A SEND held with `size` bytes was written, answered or dropped."""
        self.held -= size
        self.buffer.release(size)

    @property
    def over(self) -> bool:
        """Whether the connection must stop reading until SENDs are written."""
        buffer = self.buffer
        return self.held > buffer.connection_limit or buffer.held > buffer.limit

    async def room(self) -> None:
        """Wait until the connection may read again."""
        while self.over:
            await self.buffer.next_release()


def send_cost(metadata: bytes | None, payload: bytes | None) -> int:
    """What holding a received SEND with this metadata and payload costs, as the publish buffer counts it."""
    return len(metadata or b"") + len(payload or b"") + SEND_OVERHEAD_BYTES
