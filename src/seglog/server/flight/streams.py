"""What bounds the Flight port's memory, whatever the number of clients: at most `max_streams` DoGet streams
read at once (the others wait their turn, up to `wait_s`), each holding one record batch at a time, no larger
than MAX_ROWS rows or MAX_BYTES bytes.

A batch is a view over the memory-mapped segment (no copy), and gRPC's flow control blocks the write of the
next one until the client has taken the last: a client that stops reading holds its stream's slot and one
batch, never the rest of its range."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pyarrow as pa
from pyarrow import flight

MAX_ROWS = 65_536
MAX_BYTES = 8 << 20
MAX_STREAMS = 8  # DoGet streams reading at once
WAIT_S = 60.0  # how long a DoGet waits for a stream's slot before it is refused


def wire_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`batches`, each larger than MAX_ROWS rows or MAX_BYTES bytes cut into slices within both (zero-copy
    views: the rows of a slice are the batch's memory)."""
    for batch in batches:
        rows, size = batch.num_rows, batch.nbytes
        if rows <= MAX_ROWS and size <= MAX_BYTES:
            yield batch
            continue
        # (rows of one batch vary in size: slicing by the average row keeps each slice near MAX_BYTES, and a
        # slice still over it is cut again)
        step = max(1, min(MAX_ROWS, rows * MAX_BYTES // max(size, 1)))
        for first in range(0, rows, step):
            piece = batch.slice(first, step)
            if piece.num_rows > 1 and piece.nbytes > MAX_BYTES:
                yield from wire_batches(iter([piece]))
            else:
                yield piece


class StreamSlots:
    """The slots of the streams that may read at once: `admitted` holds one for a stream's life. Closed (the
    server stopping), no stream is admitted and streams end before their next batch."""

    def __init__(self, max_streams: int = MAX_STREAMS, wait_s: float = WAIT_S) -> None:
        self.max_streams = max_streams
        self._wait_s = wait_s
        self._changed = threading.Condition()
        self._reading = 0
        self._closed = False

    def admitted(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """`batches` once a slot is free (FlightUnavailableError if none is within the wait), the slot given back
        when the stream ends, fails or is abandoned by its client (the generator is closed)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._closed or self._reading < self.max_streams, self._wait_s):
                raise flight.FlightUnavailableError(
                    f"the server streams {self.max_streams} ranges at once already, and none ended within "
                    f"{self._wait_s:g} s; try again")
            self._check_open()
            self._reading += 1
        try:
            for batch in batches:
                self._check_open()
                yield batch
        finally:
            with self._changed:
                self._reading -= 1
                self._changed.notify()

    def close(self) -> None:
        """Admit no more streams, and end those reading at their next batch."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise flight.FlightUnavailableError("the server is stopping; try again on a server that serves")
