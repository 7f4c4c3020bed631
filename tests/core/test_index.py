"""The per-batch index: Cython single lookups and Numba batch kernels against NumPy references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seglog._core._index import IndexView

from seglog._core import kernels


def build(batch_sizes, timestamps, base=100):
    slots = len(batch_sizes) + 3
    offsets = np.zeros((slots, 2), np.int64)
    times = np.zeros((slots, 2), np.int64)
    view = IndexView(offsets, times, base, writable=True)
    next_offset, position = base, 0
    for size, ts in zip(batch_sizes, timestamps):
        next_offset += size
        position += 64 + 8 * size
        view.append(next_offset, position, ts)
    return view


def reference_entry(view, offset):
    next_offsets = view.arrays()[0]
    i = int(np.searchsorted(next_offsets, offset, side="right"))
    return i if i < view.count else -1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 50), st.integers(0, 10_000)), min_size=1, max_size=60), st.data())
def test_single_lookups_match_reference(batches, data):
    view = build([b for b, _ in batches], [t for _, t in batches])
    end = view.next_offset
    for offset in data.draw(st.lists(st.integers(100, end + 5), max_size=30)):
        entry = view.find_offset(offset)
        assert entry == reference_entry(view, offset)
        if entry >= 0:
            base, next_offset, _, _ = view.entry(entry)
            assert base <= offset < next_offset
    running = np.maximum.accumulate([t for _, t in batches])
    for ts in data.draw(st.lists(st.integers(-1, 10_001), max_size=30)):
        expected = int(np.searchsorted(running, ts, side="left"))
        assert view.find_timestamp(ts) == (expected if expected < len(running) else -1)


def test_refresh_sees_entries_published_by_another_view():
    offsets, times = np.zeros((4, 2), np.int64), np.zeros((4, 2), np.int64)
    writer = IndexView(offsets, times, 100, writable=True)
    writer.append(103, 100, 1)
    reader = IndexView(offsets, times, 100)
    assert reader.count == 1
    writer.append(109, 1000, 5)
    assert reader.count == 1 and reader.refresh() == 2 and reader.next_offset == 109


def test_append_keeps_running_max_timestamp_and_refuses_when_full():
    view = build([1, 1, 1], [50, 10, 70])
    assert view.arrays()[2].tolist() == [50, 50, 70]
    view.append(104, 10_000, 1)
    view.append(105, 10_100, 1)
    view.append(106, 10_200, 1)
    assert view.full
    with pytest.raises(IndexError, match="full"):
        view.append(107, 10_300, 1)


def test_read_only_view_refuses_appends():
    view = IndexView(np.zeros((2, 2), np.int64), np.zeros((2, 2), np.int64), 0)
    with pytest.raises(PermissionError):
        view.append(1, 72, 0)


@pytest.mark.parametrize("count", [0, 1, 7, 1000])
def test_numba_kernels_match_numpy_reference(count):
    rng = np.random.default_rng(count)
    next_offsets = np.zeros(count + 5, np.int64)
    next_offsets[:count] = np.cumsum(rng.integers(1, 20, count))
    max_ts = np.zeros(count + 5, np.int64)
    max_ts[:count] = np.maximum.accumulate(rng.integers(0, 1000, count))
    targets = rng.integers(-5, (next_offsets[count - 1] if count else 0) + 5, 500)
    out = np.empty(500, np.int64)
    kernels.lookup_offsets_many(next_offsets, count, targets, out)
    assert (out == kernels.lookup_offsets_reference(next_offsets, count, targets)).all()
    kernels.lookup_timestamps_many(max_ts, count, targets, out)
    assert (out == kernels.lookup_timestamps_reference(max_ts, count, targets)).all()


@st.composite
def partitions_of_segments(draw):
    """Segment tables of several partitions, concatenated: (each segment's newest timestamp, the bounds of
    each partition's rows, one target timestamp per partition). Timestamps need not ascend across segments
    (producers may set any), and an unreadable time index reads as int64 max."""
    stamp = st.one_of(st.integers(0, 1_000), st.just(np.iinfo(np.int64).max))
    tables = draw(st.lists(st.lists(stamp, max_size=20), min_size=1, max_size=8))
    targets = draw(st.lists(st.integers(-1, 1_001), min_size=len(tables), max_size=len(tables)))
    bounds = np.concatenate(([0], np.cumsum([len(t) for t in tables]))).astype(np.int64)
    max_timestamps = np.array([s for t in tables for s in t], dtype=np.int64)
    return max_timestamps, bounds, np.array(targets, dtype=np.int64)


@settings(max_examples=200, deadline=None)
@given(partitions_of_segments())
def test_first_segments_kernel_matches_reference(case):
    max_timestamps, bounds, targets = case
    out = np.empty(len(targets), np.int64)
    kernels.first_segments_at_or_after(max_timestamps, bounds, targets, out)
    assert out.tolist() == kernels.first_segments_reference(max_timestamps, bounds, targets).tolist()


@st.composite
def partition_with_floors(draw):
    """A partition's segment table (bases, log sizes) and floors in it, each with the batch holding it:
    (first offset, next offset, bytes, bytes after it in its segment)."""
    segments = draw(st.lists(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 10_000)), min_size=1,
                                      max_size=6), min_size=1, max_size=12))
    bases, log_sizes, batches, offset = [], [], [], 0
    for batch_list in segments:
        bases.append(offset)
        log_sizes.append(sum(size for _, size in batch_list))
        after = log_sizes[-1]
        for messages, size in batch_list:
            after -= size
            batches.append((offset, offset + messages, size, after))
            offset += messages
    floors = draw(st.lists(st.integers(0, offset - 1), min_size=1, max_size=30))
    heads = [next(b for b in batches if b[0] <= f < b[1]) for f in floors]
    return (np.array(bases, np.int64), np.array(log_sizes, np.int64), np.array(floors, np.int64),
            np.array(heads, np.int64).reshape(-1, 4))


@settings(max_examples=200, deadline=None)
@given(partition_with_floors())
def test_tail_bytes_kernel_matches_reference(case):
    bases, log_sizes, floors, heads = case
    out = np.empty(len(floors), np.int64)
    kernels.tail_bytes_many(bases, log_sizes, floors, heads, out)
    expected = kernels.tail_bytes_reference(bases, log_sizes, floors, heads)
    assert out.tolist() == expected.tolist()
    # and the reference against a plain sum over the batches and segments
    for floor, (first, next_offset, size, rest), got in zip(floors, heads, expected):
        later = int(log_sizes[bases > floor].sum())
        assert got == later + int(size * (next_offset - floor) / (next_offset - first)) + rest
