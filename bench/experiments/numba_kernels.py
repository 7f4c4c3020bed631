"""Numba batch kernels over the index arrays, each with its NumPy reference twin (`*_reference`), kept
for the benchmarks only: seglog does not use them and does not depend on Numba (bench/RESULTS.md).

They were the candidates for the call sites where many index lookups happen in one go (issue 11, item
6); bench_kernels.py and bench_lookup.py measure them against the library's own paths in the same run,
and bench_kernels.py holds their parity tests. None wins clearly where users would call it. The index
arrays are one memory map per segment, so a kernel over many segments first needs an IndexView lookup
(Cython) per position to gather them, and that gathering is most of the time: the whole Numba path came
to 0.8x-1.2x the same batch done in NumPy (tens of microseconds a call), and the lookups of many targets
in one index to 0.8x-1.3x np.searchsorted with random targets, 0.3x-0.45x with sorted ones. Meanwhile a
fresh process pays 0.6-1.4 s (cache warm) to 1.3-2.5 s (compiling) before its first kernel result. Numba
is in no extra: `pip install numba` to run these files (README.md beside them). Compiled on first use and
cached on disk (`NUMBA_CACHE_DIR`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def lookup_offsets_many(next_offsets, count, targets, out):  # pragma: no cover - compiled
    """out[i] = the index entry whose batch holds targets[i]: the first entry with next_offset > target,
    or -1 when the target is at or past the end. `count` entries of `next_offsets` are used."""
    for i in range(targets.shape[0]):
        target = targets[i]
        low, high = 0, count
        while low < high:
            middle = (low + high) >> 1
            if next_offsets[middle] <= target:
                low = middle + 1
            else:
                high = middle
        out[i] = low if low < count else -1


@njit(cache=True, nogil=True)
def lookup_timestamps_many(max_timestamps, count, targets, out):  # pragma: no cover - compiled
    """out[i] = the first entry whose running maximum timestamp is >= targets[i], or -1 if none."""
    for i in range(targets.shape[0]):
        target = targets[i]
        low, high = 0, count
        while low < high:
            middle = (low + high) >> 1
            if max_timestamps[middle] < target:
                low = middle + 1
            else:
                high = middle
        out[i] = low if low < count else -1


def lookup_offsets_reference(next_offsets: np.ndarray, count: int, targets: np.ndarray) -> np.ndarray:
    found = np.searchsorted(next_offsets[:count], targets, side="right")
    return np.where(found < count, found, -1)


def lookup_timestamps_reference(max_timestamps: np.ndarray, count: int, targets: np.ndarray) -> np.ndarray:
    found = np.searchsorted(max_timestamps[:count], targets, side="left")
    return np.where(found < count, found, -1)


@njit(cache=True, nogil=True)
def first_segments_at_or_after(max_timestamps, bounds, targets, out):  # pragma: no cover - compiled
    """Many partitions' segment tables at once: partition p's segments are
    max_timestamps[bounds[p]:bounds[p + 1]] (each segment's newest timestamp, oldest segment first), and
    out[p] = the first of them (counted from the partition's own first) whose running maximum is
    >= targets[p], or the partition's segment count if none. The first segment whose own newest timestamp
    reaches the target is the first whose running maximum does, so a scan that stops there needs no
    running maximum."""
    for p in range(targets.shape[0]):
        low, high, target = bounds[p], bounds[p + 1], targets[p]
        i = low
        while i < high and max_timestamps[i] < target:
            i += 1
        out[p] = i - low


def first_segments_reference(max_timestamps: np.ndarray, bounds: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """What `segment_table.first_offset_at_or_after` does per partition: a running maximum and a binary search."""
    return np.array([np.searchsorted(np.maximum.accumulate(max_timestamps[bounds[p]:bounds[p + 1]]), targets[p],
                                     side="left") for p in range(len(targets))], dtype=np.int64)


@njit(cache=True, nogil=True)
def tail_bytes_many(bases, log_sizes, floors, heads, out):  # pragma: no cover - compiled
    """Bytes from each of many offsets to the end of one partition (`backlog.bytes_from` for many
    subscriptions' mark-delete positions at once). `bases` and `log_sizes` are the segment table's columns;
    heads[k] = (first offset, next offset, byte size, bytes after it in its segment) of the stored batch
    holding floors[k], which counts in proportion to its messages from floors[k] on. Every floor must be
    stored (at or after the earliest offset, before the end)."""
    n = bases.shape[0]
    after = np.empty(n + 1, np.int64)  # after[i]: bytes of the segments after segment i - 1
    after[n] = 0
    for i in range(n - 1, -1, -1):
        after[i] = after[i + 1] + log_sizes[i]
    for k in range(floors.shape[0]):
        floor = floors[k]
        low, high = 0, n
        while low < high:  # the segment holding floor: the last base <= floor
            middle = (low + high) >> 1
            if bases[middle] <= floor:
                low = middle + 1
            else:
                high = middle
        first, next_offset, size, rest = heads[k, 0], heads[k, 1], heads[k, 2], heads[k, 3]
        head = np.int64(size * (next_offset - floor) / (next_offset - first))
        out[k] = after[low] + head + rest


def tail_bytes_reference(bases: np.ndarray, log_sizes: np.ndarray, floors: np.ndarray,
                         heads: np.ndarray) -> np.ndarray:
    segment = np.searchsorted(bases, floors, side="right") - 1
    after = log_sizes.sum() - np.cumsum(log_sizes)  # bytes of the segments after each one
    first, next_offset, size, rest = heads.T
    head = (size * (next_offset - floors) / (next_offset - first)).astype(np.int64)
    return after[segment] + head + rest
