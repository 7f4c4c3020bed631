import enum

import numpy as np
import numpy.typing as npt

from seglog._core._buffer import BufferLike
from seglog._core._index import IndexView

class Verdict(enum.IntEnum):
    """A message's verdict (classify_segment): what compaction makes of it."""

    SUPERSEDED = 0
    LATEST = 1
    LATEST_TOMBSTONE = 2
    KEYLESS = 3

MAP_DONE: int
MAP_FULL: int
HASH_SEED: int
SLOT_BYTES: int
MAX_LOAD: float

def key_hash(key: BufferLike) -> int:
    """The 128-bit hash the offset map keeps of a key's bytes (low word + high word << 64), for tests."""

def capacity_for(max_keys: int) -> int:
    """The slots a map bounded to `max_keys` keys has: at most MAX_LOAD of them are ever used."""

class OffsetMap:
    """Key hash -> latest offset for at most `max_keys` keys, in anonymous memory."""

    def __init__(self, max_keys: int) -> None: ...
    @property
    def max_keys(self) -> int: ...
    @property
    def keys(self) -> int: ...
    @property
    def messages(self) -> int: ...
    @property
    def keyless(self) -> int: ...
    @property
    def tombstones(self) -> int: ...
    @property
    def full_at(self) -> int: ...
    @property
    def nbytes(self) -> int:
        """The bytes of the map's slots (0 once released)."""
    def release(self) -> None:
        """Give the slots' memory back now; the map is empty and unusable after."""
    def add_segment(self, data: BufferLike, index: IndexView, first_entry: int, stop_entry: int, start: int,
                    end: int, verify_crc: bool) -> int:
        """Pass 1 over one segment; MAP_DONE, MAP_FULL, or the entry of the first damaged batch."""
    def probe_stored(self, data: BufferLike, positions: npt.NDArray[np.int64], verdicts: npt.NDArray[np.uint8]) -> int:
        """Each record's Verdict against the map (SUPERSEDED when it holds the key); -1, or the index of a
        damaged batch."""
    def latest_offsets(self) -> npt.NDArray[np.int64]:
        """The offset of each key's latest message, ascending; the map is released by it (its memory
        gives way to the listing, so the two are never held at once)."""

def classify_segment(data: BufferLike, index: IndexView, first_entry: int, stop_entry: int, start: int, end: int,
                     latest: npt.NDArray[np.int64], latest_from: int, verdicts: npt.NDArray[np.uint8]) -> int:
    """Pass 2 over one segment: each message's Verdict into `verdicts`; the position in `latest` after the
    segment, or -1 - entry for the first damaged batch."""

def copy_kept(data: BufferLike, positions: npt.NDArray[np.int64], keep: npt.NDArray[np.uint8],
              out: BufferLike) -> tuple[int, int, int]:
    """The kept records of the batches at `positions` as compacted batches into `out`: (batches done,
    records done, bytes written)."""
