"""The dense per-batch index of a segment: `.index` (offset after each batch, position after it) and
`.timeindex` (running maximum timestamp, offset after the batch), both memory-mapped and pre-sized.

An entry is published by writing its `.index` slot last, after a release fence: a reader in another
process that sees a non-zero slot also sees the batch and the time entry. Unwritten slots are zero, and
every written slot is positive (each batch holds at least one record), so the filled entries are a prefix.
Lookups are made here, one call at a time, in Cython: batch kernels over many segments' indexes gained
nothing where seglog calls them (bench/experiments/bench_kernels.py)."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, INT64_MIN
from seglog._core._format cimport C_ENTRY_SOUND, entry_status, seglog_release_fence, seglog_acquire_fence

import numpy as np

ENTRY_BYTES = 16


cdef class IndexView:
    """Offset and time lookups over the index arrays of one segment.

    The arrays are views of the mapped index files (or, for a reader that found an index damaged and
    rebuilt it in memory, plain arrays); `owners` keeps their buffers alive while the view is used. Its
    fields are declared in _index.pxd, so other kernels read entries in C."""

    def __init__(self, offsets, times, int64_t base_offset, bint writable=False):
        arrays = np.asarray(offsets).reshape(-1, 2), np.asarray(times).reshape(-1, 2)
        if arrays[0].shape[0] != arrays[1].shape[0]:
            raise ValueError(".index and .timeindex must have the same number of slots")
        self.offsets = arrays[0]
        self.times = arrays[1]
        if writable:
            self.offsets_w = arrays[0]
            self.times_w = arrays[1]
        self.writable = writable
        self.capacity = arrays[0].shape[0]
        self.base_offset = base_offset
        self.owners = (offsets, times)
        self.count = 0
        self.refresh()

    cpdef Py_ssize_t refresh(self):
        """Count the published entries (they only ever grow while this view is open); returns the count.

        Scans forward from the last count and stops at the first zero slot. It must never look further:
        a writer that closes trims the index file to one zero slot past its last entry while readers in
        other processes still map the old, larger file, and touching a page past the end would SIGBUS."""
        cdef Py_ssize_t i = self.count, capacity = self.capacity
        while i < capacity and self.offsets[i, 0] != 0:
            i += 1
        if i != self.count:
            seglog_acquire_fence()
            self.count = i
        return i

    @property
    def full(self) -> bool:
        return self.count == self.capacity

    @property
    def next_offset(self) -> int:
        """The offset after the last published batch (the segment's base offset when it is empty)."""
        return self.offsets[self.count - 1, 0] if self.count else self.base_offset

    @property
    def end_position(self) -> int:
        """The byte position after the last published batch: the segment's logical size."""
        return self.end_position_at(self.count)

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp in the segment (INT64_MIN when empty)."""
        return self.times[self.count - 1, 0] if self.count else INT64_MIN

    cpdef tuple entry(self, Py_ssize_t i):
        """Batch i as (base_offset, next_offset, start_position, end_position)."""
        if not 0 <= i < self.count:
            raise IndexError(f"index entry {i} outside 0..{self.count - 1}")
        if i == 0:
            return self.base_offset, self.offsets[0, 0], 0, self.offsets[0, 1]
        return self.offsets[i - 1, 0], self.offsets[i, 0], self.offsets[i - 1, 1], self.offsets[i, 1]

    cpdef Py_ssize_t find_offset(self, int64_t offset):
        """The entry of the batch holding `offset`, or -1 if it is beyond the published entries.

        Searches the warm tail first, as Kafka's AbstractIndex does: most lookups are near the end."""
        cdef Py_ssize_t low = 0, high = self.count, middle
        if high and offset < self.offsets[high - 1, 0] and (high == 1 or offset >= self.offsets[high - 2, 0]):
            return high - 1
        while low < high:  # first entry whose next_offset > offset
            middle = (low + high) >> 1
            if self.offsets[middle, 0] <= offset:
                low = middle + 1
            else:
                high = middle
        return low if low < self.count else -1

    cpdef Py_ssize_t find_timestamp(self, int64_t timestamp):
        """The first entry whose batch may hold a timestamp >= `timestamp` (running max), or -1 if none."""
        cdef Py_ssize_t low = 0, high = self.count, middle
        while low < high:
            middle = (low + high) >> 1
            if self.times[middle, 0] < timestamp:
                low = middle + 1
            else:
                high = middle
        return low if low < self.count else -1

    cpdef int append(self, int64_t next_offset, int64_t end_position, int64_t max_timestamp) except -1:
        """Publish one entry (writer only): time entry first, fence, then the offset slot readers poll."""
        cdef Py_ssize_t i = self.count
        cdef int64_t running = max_timestamp
        if not self.writable:
            raise PermissionError("index view is read-only")
        if i == self.capacity:
            raise IndexError("index is full; the segment must roll")
        if i and self.times_w[i - 1, 0] > running:
            running = self.times_w[i - 1, 0]
        self.times_w[i, 0] = running
        self.times_w[i, 1] = next_offset
        self.offsets_w[i, 1] = end_position
        seglog_release_fence()
        self.offsets_w[i, 0] = next_offset
        self.count = i + 1
        return 0

    def arrays(self):
        """The published entries as numpy views: (next_offsets, end_positions, running_max_timestamps)."""
        offsets = np.asarray(self.offsets)[:self.count]
        times = np.asarray(self.times)[:self.count]
        return offsets[:, 0], offsets[:, 1], times[:, 0]


def sound_entries(data, IndexView index, Py_ssize_t entry, int64_t max_messages, int64_t max_bytes,
                  bint verify_crc, Py_ssize_t min_entries=0) -> list:
    """The batches of index entries `entry`, `entry` + 1, ... of a segment whose log is mapped as `data`, as
    (position, base_offset, count, end_position), while each is sound as _format.check_entry checks it and
    those before it hold fewer than `max_messages` messages (or are fewer than `min_entries` batches) and
    fewer than `max_bytes` bytes: a reader's way on through
    a segment, batches at a time, in one call. It stops before an entry not published yet, a batch past the
    map or one that fails a check, which SegmentView.batch_at then maps again for, or reports."""
    cdef Py_buffer view
    cdef int64_t base, next_offset, start, end, messages = 0, nbytes = 0
    found = []
    if data is None or entry < 0:
        return found
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        while entry < index.count and (messages < max_messages or len(found) < min_entries) and nbytes < max_bytes:
            base, start = index.base_offset, 0
            if entry:
                base, start = index.offsets[entry - 1, 0], index.offsets[entry - 1, 1]
            next_offset, end = index.offsets[entry, 0], index.offsets[entry, 1]
            if entry_status(<const uint8_t *>view.buf, view.len, start, end, base, next_offset - base,
                            verify_crc) != C_ENTRY_SOUND:
                break
            found.append((start, base, next_offset - base, end))
            messages += next_offset - base
            nbytes += end - start
            entry += 1
        return found
    finally:
        PyBuffer_Release(&view)
