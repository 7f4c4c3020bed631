"""Random single lookups by offset and by timestamp, at each API level that exists. Target: >= 1M/s.

The topic holds 100k batches of 10 messages (so its segment index has 100k entries), one ms apart; the
targets are uniform random offsets / timestamps over it, looked up one call at a time unless said.

Groups "lookup: by offset" and "lookup: by timestamp":
  baseline  bisect over a list      bisect_right / bisect_left over a Python list of the same index entries:
                                    one C call per lookup from a Python loop
  seglog    IndexView.find_offset, IndexView.find_timestamp   over the segment's mapped index
  baseline  np.searchsorted, one call   NumPy over the same index arrays, all targets in one call (the
                                    kernels' reference twin)
  seglog    kernels.lookup_offsets_many, lookup_timestamps_many   the Numba kernels of experiments/numba_kernels.py (for
                                    the benchmarks only: seglog does not use them), all targets in one call
            topic.reader(start=offset) + read_messages(1)   the public API; a reader locates its start
                                    lazily, so the lookup includes fetching the message
            topic.reader(start={'timestamp': t})   the public API; located when the reader is made
            reader.seek(offset) + read_messages(1)   one reader reused (no target: shows what construction
                                    costs in the line above)
Group "lookup: many sorted offsets, one call" (e.g. a snapshot's positions, looked up in order):
  baseline  np.searchsorted, one call   the same random offsets, sorted
  seglog    kernels.lookup_offsets_many, one call
"""

from __future__ import annotations

import bisect

import numpy as np
import pytest

import seglog
from seglog.storage.partition_view import PartitionView

BY_OFFSET = "lookup: by offset"
BY_TIME = "lookup: by timestamp"
SORTED = "lookup: many sorted offsets, one call"
MESSAGES_PER_BATCH = 10
TARGET = 1_000_000  # lookups per second


@pytest.fixture(scope="module")
def indexed(scratch, scale):
    """A topic with many index entries, its segment's IndexView, and random lookup targets."""
    batches = scale(100_000, 2_000)
    clock = seglog.ManualClock()
    first_ms = clock()
    values = [bytes(100)] * MESSAGES_PER_BATCH
    with seglog.open(scratch, clock=clock) as log:
        topic = log.create_topic("bench")
        with topic.producer() as producer:
            for _ in range(batches):
                producer.send_batch(values)
                clock.advance(1)
        view = PartitionView(topic.partition_directory(0))
        assert len(view.bases) == 1
        index = view.view(view.bases[0]).index
        assert index.count == batches
        rng = np.random.default_rng(7)
        end = batches * MESSAGES_PER_BATCH
        offsets = rng.integers(0, end, scale(200_000, 2_000)).tolist()
        timestamps = rng.integers(first_ms, first_ms + batches, scale(200_000, 2_000)).tolist()
        yield topic, index, offsets, timestamps


def test_bisect_offset(bench, indexed):
    _, index, offsets, _ = indexed
    next_offsets = index.arrays()[0].tolist()

    def lookups():
        for o in offsets:
            bisect.bisect_right(next_offsets, o)

    bench.baseline(BY_OFFSET, "bisect over a list", messages=len(offsets), unit="lookup")
    bench.run(lookups)


def test_find_offset(bench, indexed):
    _, index, offsets, _ = indexed
    find = index.find_offset

    def lookups():
        for o in offsets:
            find(o)

    bench.seglog(BY_OFFSET, "IndexView.find_offset", messages=len(offsets), unit="lookup",
                 min_rate=TARGET)
    bench.run(lookups)
    assert index.entry(find(offsets[0]))[0] <= offsets[0] < index.entry(find(offsets[0]))[1]


def test_reader_at_offset(bench, indexed, scale):
    topic, _, offsets, _ = indexed
    some = offsets[:scale(2_000, 100)]

    def lookups():
        for o in some:
            with topic.reader(o) as reader:
                message = reader.read_messages(1)[0]
        return message.offset

    bench.seglog(BY_OFFSET, "topic.reader(start=offset) + read_messages(1)", messages=len(some),
                 unit="lookup", min_rate=TARGET)
    assert bench.run(lookups) == some[-1]


def test_reader_seek(bench, indexed, scale):
    topic, _, offsets, _ = indexed
    some = offsets[:scale(20_000, 200)]

    def lookups(reader):
        for o in some:
            reader.seek(o)
            message = reader.read_messages(1)[0]
        return message.offset

    bench.seglog(BY_OFFSET, "reader.seek(offset) + read_messages(1)", messages=len(some), unit="lookup")
    assert bench.run(lookups, setup=lambda: (topic.reader(),), teardown=lambda r: r.close()) == some[-1]


@pytest.mark.parametrize("kind", ["offsets", "timestamps"])
def test_lookup_many_kernel(bench, indexed, kind):
    pytest.importorskip("numba")  # `pip install numba` (bench/experiments/README.md)
    import numba_kernels as kernels
    _, index, offsets, timestamps = indexed
    next_offsets, _, max_timestamps = index.arrays()
    kernel, entries, targets = {
        "offsets": (kernels.lookup_offsets_many, next_offsets, np.array(offsets, dtype=np.int64)),
        "timestamps": (kernels.lookup_timestamps_many, max_timestamps, np.array(timestamps, dtype=np.int64)),
    }[kind]
    out = np.empty(len(targets), dtype=np.int64)
    kernel(entries, index.count, targets[:1], out[:1])  # compile (or load from the cache) outside the timing

    bench.seglog(BY_OFFSET if kind == "offsets" else BY_TIME, f"kernels.lookup_{kind}_many, one call",
                 messages=len(targets), unit="lookup", min_rate=TARGET)
    bench.run(lambda: kernel(entries, index.count, targets, out))
    reference = getattr(kernels, f"lookup_{kind}_reference")(np.ascontiguousarray(entries), index.count, targets)
    assert np.array_equal(out, reference)


@pytest.mark.parametrize("kind", ["offsets", "timestamps"])
def test_searchsorted_many(bench, indexed, kind):
    _, index, offsets, timestamps = indexed
    next_offsets, _, max_timestamps = index.arrays()
    entries, targets, side = {
        "offsets": (next_offsets, np.array(offsets, dtype=np.int64), "right"),
        "timestamps": (max_timestamps, np.array(timestamps, dtype=np.int64), "left"),
    }[kind]

    bench.baseline(BY_OFFSET if kind == "offsets" else BY_TIME, "np.searchsorted, one call",
                   messages=len(targets), unit="lookup")
    found = bench.run(lambda: np.searchsorted(entries, targets, side=side))
    assert found.max() < index.count


@pytest.mark.parametrize("how", ["np.searchsorted", "kernels.lookup_offsets_many"])
def test_sorted_targets(bench, indexed, how):
    _, index, offsets, _ = indexed
    next_offsets = index.arrays()[0]
    targets = np.sort(np.array(offsets, dtype=np.int64))
    out = np.empty(len(targets), dtype=np.int64)
    if how == "np.searchsorted":
        bench.baseline(SORTED, "np.searchsorted, one call", messages=len(targets), unit="lookup")
        found = bench.run(lambda: np.searchsorted(next_offsets, targets, side="right"))
    else:
        pytest.importorskip("numba")  # `pip install numba` (bench/experiments/README.md)
        import numba_kernels as kernels
        kernels.lookup_offsets_many(next_offsets, index.count, targets[:1], out[:1])  # compiled outside the timing
        bench.seglog(SORTED, "kernels.lookup_offsets_many, one call", messages=len(targets), unit="lookup")
        bench.run(lambda: kernels.lookup_offsets_many(next_offsets, index.count, targets, out))
        found = out
    assert np.array_equal(found, np.searchsorted(next_offsets, targets, side="right"))


def test_bisect_timestamp(bench, indexed):
    _, index, _, timestamps = indexed
    max_timestamps = index.arrays()[2].tolist()

    def lookups():
        for t in timestamps:
            bisect.bisect_left(max_timestamps, t)

    bench.baseline(BY_TIME, "bisect over a list", messages=len(timestamps), unit="lookup")
    bench.run(lookups)


def test_find_timestamp(bench, indexed):
    _, index, _, timestamps = indexed
    find = index.find_timestamp

    def lookups():
        for t in timestamps:
            find(t)

    bench.seglog(BY_TIME, "IndexView.find_timestamp", messages=len(timestamps), unit="lookup",
                 min_rate=TARGET)
    bench.run(lookups)


def test_reader_at_timestamp(bench, indexed, scale):
    topic, _, _, timestamps = indexed
    some = timestamps[:scale(2_000, 100)]

    def lookups():
        for t in some:
            topic.reader({"timestamp": t}).close()

    bench.seglog(BY_TIME, "topic.reader(start={'timestamp': t})", messages=len(some), unit="lookup",
                 min_rate=TARGET)
    bench.run(lookups)
