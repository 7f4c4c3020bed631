"""Vectorised kernels over the memory-mapped index arrays, in Numba.

Batch signatures on purpose: a Numba call costs ~0.5 µs, a lookup inside one ~70 ns, so callers hand in
many targets at once (per-call lookups are IndexView's, in Cython). Compiled on first use and cached on
disk (`NUMBA_CACHE_DIR` moves the cache), so `import seglog` never pays for Numba. Each kernel has a NumPy
reference beside it (`*_reference`) that the tests hold it to."""

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
