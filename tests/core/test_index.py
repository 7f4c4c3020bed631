"""The per-batch index: Cython single lookups against NumPy references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog._core._index import IndexView


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
