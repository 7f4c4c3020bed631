from typing import TypeVar

import numpy as np
import numpy.typing as npt

from seglog._core._buffer import BufferLike
from seglog._core._format import Prefaulter
from seglog._core._index import IndexView

# A TypeVar rather than a union, so that a list[bytes] is accepted (lists are invariant).
_Item = TypeVar("_Item", bound=bytes | bytearray | memoryview | str | None)

class Column:
    """One binary column: the raw description the encoder reads plus the objects that own its memory."""

    @property
    def count(self) -> int: ...
    @staticmethod
    def from_list(items: list[_Item], argument: str, allow_null: bool = False) -> Column:
        """A column over a list of bytes (str is encoded as UTF-8; None allowed only if `allow_null`)."""
    @staticmethod
    def from_offsets(offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64], data: BufferLike, argument: str,
                     validity: npt.NDArray[np.uint8] | None = None) -> Column:
        """A column over Arrow-style offsets (count + 1 entries) and a data buffer."""
    @staticmethod
    def from_fixed(data: BufferLike, width: int, count: int, argument: str) -> Column:
        """A column of `count` records of `width` bytes each, stored back to back in `data`."""
    def set_validity(self, bitmap: npt.NDArray[np.uint8]) -> None:
        """Attach an Arrow-order validity bitmap (bit i set = record i present)."""

class BatchSource:
    """The columns of one send_batch call, encoded by `write` or `append_to`."""

    def __init__(self, values: Column, keys: Column | None, timestamps: npt.NDArray[np.int64] | None,
                 event_times: npt.NDArray[np.int64] | None, flags: int, now: int = 0,
                 property_entries: npt.NDArray[np.int64] | None = None, property_keys: Column | None = None,
                 property_values: Column | None = None, ordering_keys: Column | None = None,
                 attribute_keys: Column | None = None, attribute_values: Column | None = None) -> None:
        """timestamps: one int64 per value, or None for `now` on every one. Attributes: one item per attribute
        in each of attribute_keys and attribute_values, written whole into every batch of the source."""
    @property
    def values(self) -> Column: ...
    @property
    def keys(self) -> Column | None: ...
    @property
    def property_keys(self) -> Column | None: ...
    @property
    def property_values(self) -> Column | None: ...
    @property
    def ordering_keys(self) -> Column | None: ...
    @property
    def attribute_keys(self) -> Column | None: ...
    @property
    def attribute_values(self) -> Column | None: ...
    @property
    def count(self) -> int: ...
    @property
    def version(self) -> int:
        """The format version its batches are written in: 2 if they have a section of version 2, else 1."""
    def size(self, start: int, stop: int) -> int:
        """Encoded bytes of records [start, stop) as one batch, header included."""
    def fit(self, start: int, space: int) -> int:
        """The largest stop such that records [start, stop) fit in `space` bytes (start if none does)."""
    def write(self, buffer: BufferLike, position: int, base_offset: int, start: int, stop: int) -> int:
        """Encode records [start, stop) at `position` of `buffer`; returns the batch length."""
    def append_to(self, data: BufferLike, index: IndexView, prefaulter: Prefaulter, base_offset: int, start: int,
                  stop: int) -> None:
        """Write records [start, stop) as the next batch of a segment and publish its index entry."""

def measure(sources: list[BatchSource]) -> tuple[int, int]:
    """(messages, bytes) of `sources` each encoded whole as one batch, as append_all writes them."""

def append_all(sources: list[BatchSource], data: BufferLike, index: IndexView, prefaulter: Prefaulter,
               base_offset: int) -> int:
    """Write each source whole as the next batch of a segment, its index entry published after it; returns
    the bytes of their values. ValueError, before anything is written, if they do not all fit."""

def key_partitions(keys: Column, partitions: int) -> npt.NDArray[np.int32]:
    """The partition of each key by Kafka's rule (murmur2); a null key goes to partition i % partitions."""

def message_size(value: bytes | None, key: bytes | None, event_time_column: bool,
                 properties: dict[str, str] | None) -> int:
    """The bytes one message takes stored alone in a batch, header included (a None value is a null one)."""
