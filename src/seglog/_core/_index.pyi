import numpy as np
import numpy.typing as npt

ENTRY_BYTES: int

class IndexView:
    """Offset and time lookups over the index arrays of one segment."""

    def __init__(self, offsets: npt.NDArray[np.int64], times: npt.NDArray[np.int64], base_offset: int,
                 writable: bool = False) -> None: ...
    @property
    def capacity(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def writable(self) -> bool: ...
    def refresh(self) -> int:
        """Count the published entries (they only ever grow while this view is open); returns the count."""
    @property
    def full(self) -> bool: ...
    @property
    def next_offset(self) -> int:
        """The offset after the last published batch (the segment's base offset when it is empty)."""
    @property
    def end_position(self) -> int:
        """The byte position after the last published batch: the segment's logical size."""
    @property
    def max_timestamp(self) -> int:
        """The largest timestamp in the segment (INT64_MIN when empty)."""
    def entry(self, i: int) -> tuple[int, int, int, int]:
        """Batch i as (base_offset, next_offset, start_position, end_position)."""
    def find_offset(self, offset: int) -> int:
        """The entry of the batch holding `offset`, or -1 if it is beyond the published entries."""
    def find_timestamp(self, timestamp: int) -> int:
        """The first entry whose batch may hold a timestamp >= `timestamp`, or -1 if none."""
    def append(self, next_offset: int, end_position: int, max_timestamp: int) -> int:
        """Publish one entry (writer only)."""
    def arrays(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The published entries: (next_offsets, end_positions, running_max_timestamps)."""

def sound_entries(data: object, index: IndexView, entry: int, max_messages: int, max_bytes: int,
                  verify_crc: bool, min_entries: int = 0) -> list[tuple[int, int, int, int]]:
    """The batches of index entries `entry`, `entry` + 1, ... of a segment whose log is mapped as `data`, as
    (position, base_offset, count, end_position), while each is sound as _format.check_entry checks it and
    those before it hold fewer than `max_messages` messages (or are fewer than `min_entries` batches) and
    fewer than `max_bytes` bytes. It stops before an entry
    not published yet, a batch past the map or one that fails a check (SegmentView.batch_at's to handle)."""
