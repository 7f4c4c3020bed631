from typing import Literal

import pyarrow as pa

from seglog._core._buffer import BufferLike
from seglog._core._index import IndexView

PROPERTIES_TYPE: pa.MapType[pa.lib.StringType, pa.lib.StringType]
TIMESTAMP_TYPE: pa.TimestampType[Literal["ms"], str]
SCHEMA: pa.Schema

def record_batch(buffer: BufferLike, position: int) -> pa.RecordBatch:
    """The batch at `position` of `buffer` as a RecordBatch of SCHEMA over the buffer's memory (zero copy)."""

def indexed_batch(data: BufferLike | None, index: IndexView, entry: int,
                  verify_crc: bool) -> pa.RecordBatch | None:
    """record_batch of index entry `entry`, checked as _format.check_entry checks it; None if it is not sound,
    not published or not inside the map."""
