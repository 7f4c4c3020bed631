import enum

import numpy as np
import numpy.typing as npt
from typing_extensions import Self

from seglog._core._buffer import BufferLike
from seglog._core._mapping import Mapping

HEADER_BYTES: int
VERSION: int
MAGIC_BYTES: bytes
HAS_KEYS: int
KEY_NULLS: int
HAS_PROPERTIES: int
EVENT_TIME_COLUMN: int
EVENT_TIME_IS_TIMESTAMP: int
VALUE_NULLS: int
ORDERING_KEYS: int
ORDERING_KEY_NULLS: int
LOG_APPEND_TIME: int
BATCH_ATTRIBUTES: int
VERSION_2_FLAGS: int
VERSION_3_FLAGS: int
OFFSETS: int
NO_EVENT_TIME: int

class ScanStatus(enum.IntEnum):
    """Why a scan stopped where it did (scan_batches, verify_batch)."""

    SCAN_END = 0
    SCAN_TORN = 1
    SCAN_BAD_MAGIC = 2
    SCAN_BAD_VERSION = 3
    SCAN_BAD_LENGTH = 4
    SCAN_BAD_CRC = 5
    SCAN_BAD_OFFSET = 6
    SCAN_INDEX_FULL = 7
    SCAN_BAD_FLAGS = 8
    SCAN_BAD_LAYOUT = 9

# Keyed by ScanStatus, an IntEnum, so the int codes the scans return index it too.
SCAN_REASONS: dict[int, str]

ENTRY_SOUND: int
ENTRY_PAST_DATA: int
ENTRY_DIFFERS: int

def crc32c(data: BufferLike, crc: int = 0) -> int:
    """CRC32C of a bytes-like object, continuing from `crc`."""

def crc32c_software(data: BufferLike, crc: int = 0) -> int: ...
def crc32c_tiers() -> list[str]:
    """The CRC32C implementations this CPU can run, slowest first; `crc32c` uses the last."""

def crc32c_selected_tier() -> str: ...
def crc32c_tier(name: str, data: BufferLike, crc: int = 0) -> int:
    """`crc32c` computed by the named implementation; ValueError if this CPU cannot run it."""

def murmur2(data: BufferLike) -> int:
    """Kafka's murmur2 hash of a key (a signed 32-bit int, as Kafka's Utils.murmur2 returns)."""

def partition_for_key(key: BufferLike | str, partitions: int) -> int:
    """Kafka's default partitioner: toPositive(murmur2(key)) % partitions."""

class Prefaulter:
    """Keeps the pages ahead of a writer faulted in, from a C thread."""

    def __new__(cls, ahead: int = ..., step: int = ...) -> Self: ...
    def target(self, mapping: BufferLike, start: int = 0, fd: int = -1) -> None:
        """Follow `mapping` from `start`; `fd` its file, whose pages past `start` are then made by writing
        zeros (-1: none, or the same mapping's file kept)."""
    def reach(self, position: int, end: int) -> None:
        """Before every write into the target: the pages of [position, end) the thread has not made, made now."""
    def prepare(self, mapping: BufferLike) -> None: ...
    def unmap_later(self, mapping: Mapping) -> None: ...
    def close(self) -> None:
        """Stop the thread once it has unmapped every map handed to it; nothing may be handed to it after."""

def read_header(buffer: BufferLike, position: int) -> tuple[int, int, int, int, int, int, int, int, int, int, int, int]:
    """The header fields of the batch at `position`, in file order (magic .. origin_base_offset)."""

def verify_batch(buffer: BufferLike, position: int, end: int) -> int:
    """Check the header, CRC32C and column layout of the batch at `position`; a ScanStatus value, SCAN_END
    when sound."""

def header_agrees(buffer: BufferLike, start: int, end: int, base_offset: int, count: int) -> bool: ...
def check_entry(buffer: BufferLike | None, start: int, end: int, base_offset: int, count: int, verify_crc: bool) -> int:
    """ENTRY_SOUND, ENTRY_PAST_DATA, ENTRY_DIFFERS, or the ScanStatus value of the damage the entry points at."""

def scan_batches(buffer: BufferLike, start: int, end: int, expected_offset: int, verify_crc: bool,
                 next_offsets: npt.NDArray[np.int64], end_positions: npt.NDArray[np.int64],
                 max_timestamps: npt.NDArray[np.int64], running_max_timestamp: int = ..., gaps: bool = ...,
                 base_offsets: npt.NDArray[np.int64] | None = ...) -> tuple[int, int, int, int]:
    """Fill one index entry per sound batch from `start`; (entries, stop_position, status, running_max_timestamp).
    With `gaps` (a compacted file) a batch may start past the previous one's next offset."""

def selected_records(buffer: BufferLike, position: int, rows: npt.NDArray[np.int64]) -> bytes:
    """Records `rows` of the batch at `position` as one compacted batch (format version 3)."""

def value_span_size(buffer: BufferLike, position: int, first: int, stop: int) -> int:
    """The bytes of the values of records [first, stop) of the batch at `position` (a null value has none)."""

def values_size(buffer: BufferLike, position: int, rows: npt.NDArray[np.int64]) -> int:
    """The bytes of the values of records `rows` (ascending indexes) of the batch at `position`."""

def batch_layout(buffer: BufferLike, position: int) -> dict[str, int]:
    """The column positions of the batch at `position`, relative to it (-1: section absent)."""
