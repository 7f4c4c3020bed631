"""What a connection receives, handed over as the transport delivered it.

asyncio's StreamReader copies every byte received twice: into its buffer as it arrives, and out of it into
the bytes a read returns. A connection of SENDs reads 256 KiB at a time and copied 512 KiB for each: about a
tenth of the CPU its event loop spent producing batches of 100 messages. An Inbox keeps the chunks the
transport gave (bytes objects of up to its read size) and a read returns one whole: no copy. The writing
half stays asyncio's (StreamWriter, with its drain and flow control), through StreamReaderProtocol, whose
own reader then only carries the end of the stream and its errors."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable


class Inbox:
    """The bytes received and not read yet, as chunks. The transport stops reading once more than twice
    `limit` bytes wait, and reads again once at most `limit` do: a client that sends faster than the server
    reads holds that much of the server's memory, not more."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0  # bytes in _chunks
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._paused = False  # the Inbox paused the transport's reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def feed(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        self._wake()
        if not self._paused and self._size > 2 * self._limit and isinstance(self._transport, asyncio.ReadTransport):
            self._transport.pause_reading()
            self._paused = True

    def feed_eof(self) -> None:
        """No more bytes will come (the client closed its end, or the server stops reading)."""
        self._eof = True
        self._wake()

    def connection_lost(self, error: BaseException | None) -> None:
        if error is not None:
            self._error = error
        self.feed_eof()

    async def read(self, most: int) -> bytes:
        """What was received, up to `most` bytes, waiting for something; b"" at the end. The oldest chunk
        itself when it is all that waits (no copy), else the chunks waiting joined up to `most` (a busy
        loop then handles them in one read, as StreamReader gave them). The error the connection was lost
        with, if it was, first (as StreamReader.read raises it)."""
        while True:
            if self._error is not None:
                raise self._error
            if self._chunks or self._eof:
                break
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if not self._chunks:
            return b""
        chunk = self._chunks.popleft()
        if len(chunk) > most:  # (not with chunks of the transport's reads and reads of that size)
            self._chunks.appendleft(chunk[most:])
            chunk = chunk[:most]
        elif self._chunks and len(chunk) + len(self._chunks[0]) <= most:
            parts = [chunk]
            size = len(chunk)
            while self._chunks and size + len(self._chunks[0]) <= most:
                parts.append(self._chunks.popleft())
                size += len(parts[-1])
            chunk = b"".join(parts)
        self._size -= len(chunk)
        if self._paused and self._size <= self._limit and isinstance(self._transport, asyncio.ReadTransport):
            self._paused = False
            self._transport.resume_reading()
        return chunk

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class InboundProtocol(asyncio.StreamReaderProtocol):
    """StreamReaderProtocol whose received bytes go to an Inbox, and whose connection callback gets that
    Inbox with the StreamWriter: `connected(inbox, writer)`, a coroutine run as the connection's task."""

    def __init__(self, connected: Callable[[Inbox, asyncio.StreamWriter], Awaitable[None]], limit: int) -> None:
        self.inbox = Inbox(limit)
        super().__init__(asyncio.StreamReader(limit=limit),
                         lambda _reader, writer: connected(self.inbox, writer))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inbox.connection_made(transport)
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inbox.feed(data)

    def eof_received(self) -> bool:
        self.inbox.feed_eof()
        return bool(super().eof_received())

    def connection_lost(self, exc: Exception | None) -> None:
        self.inbox.connection_lost(exc)
        super().connection_lost(exc)
