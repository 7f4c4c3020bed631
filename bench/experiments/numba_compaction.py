"""Compaction's pass 1 (each key's latest offset) as a Numba kernel, for bench/bench_compaction.py only:
issue 29 asks for Cython or Numba, whichever measures faster in the same run, a fresh process's compile
cost included. seglog uses the Cython kernel (seglog._core._compact) and does not depend on Numba.

The same algorithm as the Cython kernel: MurmurHash3 x64 128-bit of the key bytes, an open-addressing table
of (hash low, hash high, offset + 1) rows of 24 bytes with linear probing, at most 80% full, the slot chosen
by the hash's low word scaled to the capacity. What Numba cannot express here: a software prefetch of the
slots ahead (the Cython kernel hashes 32 keys ahead and prefetches their slots). The batches' column
positions are computed per batch in Python (`batch_columns`, one `_format.batch_layout` call a batch), then
one compiled call walks every record of a segment. Compiled on first use and cached on disk
(`NUMBA_CACHE_DIR`)."""

from __future__ import annotations

import numpy as np
from numba import njit, uint64

from seglog._core import _format
from seglog._core._compact import capacity_for

C1 = uint64(0x87C37B91114253D5)
C2 = uint64(0x4CF5AD432745937F)
# batch_columns' row: base offset, first and stop record, key offsets, key data, key validity (-1: none)
COLUMNS = 6


@njit(inline="always")
def _rotl(x, r):  # pragma: no cover - compiled
    return (x << uint64(r)) | (x >> uint64(64 - r))


@njit(inline="always")
def _fmix(k):  # pragma: no cover - compiled
    k ^= k >> uint64(33)
    k *= uint64(0xFF51AFD7ED558CCD)
    k ^= k >> uint64(33)
    k *= uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> uint64(33)
    return k


@njit(inline="always")
def _word(data, at, length):  # pragma: no cover - compiled
    """The little-endian word of `length` (1..8) bytes at data[at]."""
    w = uint64(0)
    for j in range(length):
        w |= uint64(data[at + j]) << uint64(8 * j)
    return w


@njit(cache=True, nogil=True)
def murmur3_128(data, at, length):  # pragma: no cover - compiled
    h1 = uint64(0)
    h2 = uint64(0)
    blocks = length // 16
    for b in range(blocks):
        k1 = _word(data, at + 16 * b, 8)
        k2 = _word(data, at + 16 * b + 8, 8)
        k1 *= C1
        k1 = _rotl(k1, 31)
        k1 *= C2
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * uint64(5) + uint64(0x52DCE729)
        k2 *= C2
        k2 = _rotl(k2, 33)
        k2 *= C1
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * uint64(5) + uint64(0x38495AB5)
    tail = at + blocks * 16
    rest = length & 15
    if rest > 8:
        k2 = _word(data, tail + 8, rest - 8)
        k2 *= C2
        k2 = _rotl(k2, 33)
        k2 *= C1
        h2 ^= k2
    if rest > 0:
        k1 = _word(data, tail, min(rest, 8))
        k1 *= C1
        k1 = _rotl(k1, 31)
        k1 *= C2
        h1 ^= k1
    h1 ^= uint64(length)
    h2 ^= uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(cache=True, nogil=True)
def add_batches(data, columns, table, max_keys, keys):  # pragma: no cover - compiled
    """Each keyed record of the batches `columns` describes into `table` (capacity x 3 uint64); returns the
    distinct keys held, or -1 when a new key found `max_keys` of them."""
    capacity = uint64(table.shape[0])
    for b in range(columns.shape[0]):
        base, first, stop = columns[b, 0], columns[b, 1], columns[b, 2]
        offsets_at, data_at, validity_at = columns[b, 3], columns[b, 4], columns[b, 5]
        for i in range(first, stop):
            if validity_at >= 0 and (data[validity_at + (i >> 3)] >> (i & 7)) & 1 == 0:
                continue
            o = offsets_at + 4 * i
            start = np.int64(_word(data, o, 4))
            length = np.int64(_word(data, o + 4, 4)) - start
            low, high = murmur3_128(data, data_at + start, length)
            slot = (low >> uint64(32)) * capacity >> uint64(32)  # the high word scaled (no 128-bit product)
            while True:
                if table[slot, 2] == 0:
                    if keys == max_keys:
                        return -1
                    table[slot, 0] = low
                    table[slot, 1] = high
                    table[slot, 2] = uint64(base + i + 1)
                    keys += 1
                    break
                if table[slot, 0] == low and table[slot, 1] == high:
                    table[slot, 2] = uint64(base + i + 1)
                    break
                slot += uint64(1)
                if slot == capacity:
                    slot = uint64(0)
    return keys


def new_table(max_keys: int) -> np.ndarray:
    return np.zeros((capacity_for(max_keys), 3), dtype=np.uint64)


def batch_columns(data, index, start: int, end: int) -> np.ndarray:
    """Per indexed batch of a segment holding offsets of [start, end): the positions add_batches reads."""
    rows = []
    for entry in range(index.count):
        base, next_offset, position, _ = index.entry(entry)
        if next_offset <= start or base >= end:
            continue
        layout = _format.batch_layout(data, position)
        keys_at = layout["key_offsets"]
        if keys_at < 0:
            continue  # no key columns: every message keyless
        validity = layout["key_validity"]
        rows.append((base, max(start, base) - base, min(end, next_offset) - base, position + keys_at,
                     position + layout["key_data"], -1 if validity < 0 else position + validity))
    return np.array(rows, dtype=np.int64).reshape(-1, COLUMNS)


def latest_offsets(table: np.ndarray) -> np.ndarray:
    stored = table[:, 2]
    return np.sort(stored[stored != 0].astype(np.int64) - 1)
