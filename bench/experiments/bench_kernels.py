"""Does Numba earn its place? The batch kernels of numba_kernels.py (beside this file) against the paths
the library takes today, at the call sites where many index lookups happen in one go, each in the same run
as its NumPy reference twin and the Cython (IndexView) way, plus what a process pays before its first
kernel call. They did not earn it (bench/RESULTS.md, "Lookups, acks and the lifecycle pass"): seglog does not
depend on Numba, and these kernels stay here so that the finding can be measured again. Their parity tests come first.

Group "kernels: backlog bytes of 100 subscriptions, 10,000 segments" (maintenance's eviction check and
topic.stats() compute `partition_backlog` for every subscription; its main cost is `bytes_from`, the bytes
from the subscription's mark-delete position to the end of the partition). One partition of 10,000
one-message segments (as bench_lifecycle.py's maintenance group), 100 positions spread over it:
  baseline  bytes_from per position          today's path: NumPy over the segment table and the index
                                             arrays of the segment holding the position
            IndexView per position           the same figure by IndexView lookups (Cython) and Python
                                             arithmetic, one position at a time: the per-call way
            tail_bytes_reference, one call   the NumPy reference twin over the same IndexView lookups
                                             (the lookups: `gather_heads`)
  seglog    tail_bytes_many, one call        the Numba kernel over the same IndexView lookups (the lookups
                                             gather each position's batch: the index arrays are per-segment
                                             maps, so no kernel can take them all without that gathering)
Group "kernels: a start timestamp across 64 partitions" (the Spark source's startingTimestamp, and
maintenance's message TTL over a topic's partitions). 64 partitions of 100 segments of 10 batches, one
second apart; the timestamp halfway. Every row builds the 64 segment tables, as a planner must:
  baseline  first_offset_at_or_after per partition   the segment table's running maximum (NumPy), then
                                             the segment's index and timestamp column
            first_segments_reference          the NumPy reference twin of the segment search, then the same
                                             per-partition step
            start_offsets (the Spark source)  a reader per partition (PartitionView.offset_for_timestamp,
                                             the same segment-table search since run 0016; before, a scan
                                             of the segments from the oldest, each one mapped)
  seglog    first_segments_at_or_after, one call   the Numba kernel for the 64 segment searches, then the
                                             same per-partition step
Group "kernels: first call in a fresh process":
  baseline  python -c 'import seglog'
  seglog    + the first call of each kernel, with Numba's on-disk cache warm, and with it empty (compile):
            what a fresh process (the CLI, a Spark worker) pays before its first kernel result
The batch lookups of many targets in one segment index (`lookup_*_many`, for snapshot lookups) are in
bench_lookup.py, next to NumPy's searchsorted.

Rows without a target are for information: the ratios (in the summary and the JSON) are the finding.
With --benchmark-disable the sizes shrink to 200 segments, 10 positions, 4 partitions of 5 segments.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import seglog
from seglog._core import _format
from seglog.catalog.config import MIN_SEGMENT_SIZE
from seglog.lifecycle.backlog import bytes_from
from seglog.storage.partition_view import MTIME_SETTLED_NS
from seglog.storage.segment_table import first_offset_at_or_after

pytest.importorskip("numba")  # `pip install numba` (README.md beside this file): seglog does not depend on it
import numba_kernels as kernels  # noqa: E402 (this folder is on the path: pytest puts it there)

BACKLOG = "kernels: backlog bytes of 100 subscriptions, 10,000 segments"
START = "kernels: a start timestamp across 64 partitions"
FIRST_CALL = "kernels: first call in a fresh process"
QUIET = {"maintenance_interval": "1h", "cursor_persist_interval": "1h"}
T0 = 1_704_067_200_000
# Rounds of a few milliseconds or less: many of them, so that the best round of each row is one that
# other processes on the shared cores left alone.
ROUNDS = 50


# ---------------------------------------------------------------------------------------------------------
# 0. Each kernel against its NumPy reference twin (plain tests: they run with benchmarks disabled too)

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


# ---------------------------------------------------------------------------------------------------------
# 1. Backlog bytes of many positions in one partition of many segments

@pytest.fixture(scope="module")
def many_segments(scratch, scale):
    """(log, view, segment table, positions) of one partition of one-message segments."""
    segments, positions = scale(10_000, 200), scale(100, 10)
    with seglog.open(scratch / "segments", clock=seglog.ManualClock(T0), **QUIET) as log:
        topic = log.create_topic("segments", segment_size=MIN_SEGMENT_SIZE, segment_max_messages=1)
        record = np.zeros((1, 8), dtype=np.uint8)
        with topic.producer() as producer:
            for _ in range(segments):
                producer.send_batch(record)
        view = topic.partition_view(0)
        table = view.facts.table()
        assert len(table) >= segments
        floors = np.linspace(0, segments - 1, positions).astype(np.int64)
        yield log, view, table, floors


def gather_heads(view, table, floors: np.ndarray) -> np.ndarray:
    """(first offset, next offset, bytes, bytes after it in its segment) of the batch holding each floor,
    by IndexView lookups: what the kernel and its twin need from the per-segment index maps."""
    heads = np.empty((len(floors), 4), dtype=np.int64)
    segments = table.bases.searchsorted(floors, side="right") - 1
    for k, (floor, i) in enumerate(zip(floors.tolist(), segments.tolist())):
        segment = view.view(int(table.bases[i]))
        segment.refresh()
        index = segment.index
        first, next_offset, start, end = index.entry(index.find_offset(floor))
        last_end = index.entry(index.find_offset(int(table.next_offsets[i]) - 1))[3]
        heads[k] = first, next_offset, end - start, last_end - end
    return heads


def tail_bytes_by_index_view(view, table, floors: np.ndarray) -> list[int]:
    """The per-call way: for each floor, IndexView lookups and Python arithmetic (the bytes of the
    segments after each one summed once per call, as the kernel does)."""
    after = table.log_sizes.sum() - np.cumsum(table.log_sizes)
    out = []
    for floor in floors.tolist():
        i = int(table.bases.searchsorted(floor, side="right")) - 1
        segment = view.view(int(table.bases[i]))
        segment.refresh()
        index = segment.index
        first, next_offset, start, end = index.entry(index.find_offset(floor))
        last_end = index.entry(index.find_offset(int(table.next_offsets[i]) - 1))[3]
        out.append(int(after[i]) + int((end - start) * (next_offset - floor) / (next_offset - first)) + last_end - end)
    return out


def test_bytes_from_each(bench, many_segments):
    _, view, table, floors = many_segments
    bench.baseline(BACKLOG, "bytes_from per position (today, NumPy)", messages=len(floors), unit="position")
    today = bench.run(lambda: [bytes_from(view, table, int(f)) for f in floors], rounds=ROUNDS)
    assert today == tail_bytes_by_index_view(view, table, floors)


def test_index_view_each(bench, many_segments):
    _, view, table, floors = many_segments
    bench.baseline(BACKLOG, "IndexView per position (Cython per call)", messages=len(floors), unit="position")
    bench.run(lambda: tail_bytes_by_index_view(view, table, floors), rounds=ROUNDS)


def test_tail_bytes_reference(bench, many_segments):
    _, view, table, floors = many_segments
    bench.baseline(BACKLOG, "tail_bytes_reference, one call (NumPy twin)", messages=len(floors), unit="position")
    got = bench.run(lambda: kernels.tail_bytes_reference(table.bases, table.log_sizes, floors,
                                                         gather_heads(view, table, floors)), rounds=ROUNDS)
    assert got.tolist() == tail_bytes_by_index_view(view, table, floors)


def test_tail_bytes_numba(bench, many_segments):
    _, view, table, floors = many_segments
    out = np.empty(len(floors), dtype=np.int64)

    def numba_path():
        kernels.tail_bytes_many(table.bases, table.log_sizes, floors, gather_heads(view, table, floors), out)
        return out

    numba_path()  # compiled (or loaded from the cache) outside the timing: the next group measures that
    bench.seglog(BACKLOG, "tail_bytes_many, one call (Numba)", messages=len(floors), unit="position")
    assert bench.run(numba_path, rounds=ROUNDS).tolist() == tail_bytes_by_index_view(view, table, floors)


# ---------------------------------------------------------------------------------------------------------
# 2. One start timestamp across many partitions

@pytest.fixture(scope="module")
def wide_topic(scratch, scale):
    """(log, topic, timestamp halfway) of a topic of many partitions of many segments."""
    partitions, segments, batches = scale(64, 4), scale(100, 5), 10
    clock = seglog.ManualClock(T0)
    with seglog.open(scratch / "wide", clock=clock, **QUIET) as log:
        topic = log.create_topic("wide", partitions=partitions, segment_size=64 * 1024,
                                 segment_max_messages=10 * batches)
        record = np.zeros((10, 8), dtype=np.uint8)
        with topic.producer() as producer:
            for _ in range(segments * batches):
                for p in range(partitions):
                    producer.send_batch(record, partition=p)
                clock.advance(1000)
        assert topic.stats()["partitions"]["0"]["segments"] == segments
        # A directory changed in the last second is listed again by every table() (PartitionView.rescan):
        # wait until they are settled, as between rolls, so that every row finds the tables cached.
        directories = [topic.partition_directory(p) for p in range(partitions)] if not scale.quick else []
        while any(time.time_ns() - os.stat(d).st_mtime_ns <= MTIME_SETTLED_NS for d in directories):
            time.sleep(0.1)
        tables_of(log, topic)
        yield log, topic, T0 + segments * batches * 1000 // 2


def tables_of(log, topic):
    views = [topic.partition_view(p) for p in range(topic.partitions)]
    return [(view, view.facts.table()) for view in views]


def offset_in_segment(view, table, i: int, timestamp: int) -> int:
    """The second half of first_offset_at_or_after: the first offset at or after `timestamp` in segment i
    (found by the segment search), by its index and timestamp column."""
    if i >= len(table):
        return table.end_offset
    segment = view.view(int(table.bases[i]))
    segment.refresh()
    entry = segment.index.find_timestamp(timestamp)
    if entry < 0:
        return int(table.next_offsets[i])
    position, _, batch_base, count = segment.batch_at(entry)
    column = _format.batch_layout(segment.data, position)["timestamps"]
    stamps = np.frombuffer(segment.data, dtype=np.int64, count=count, offset=position + column)
    return batch_base + int(np.argmax(stamps >= timestamp))


def start_by_segment_search(log, topic, timestamp: int, search) -> list[int]:
    """All partitions' segment searches in one call of `search` (the kernel or its twin), then each
    partition's own step."""
    tables = tables_of(log, topic)
    bounds = np.zeros(len(tables) + 1, dtype=np.int64)
    bounds[1:] = np.cumsum([len(table) for _, table in tables])
    max_timestamps = np.concatenate([table.max_timestamps for _, table in tables])
    targets = np.full(len(tables), timestamp, dtype=np.int64)
    segments = search(max_timestamps, bounds, targets).tolist()
    return [offset_in_segment(view, table, i, timestamp) for (view, table), i in zip(tables, segments)]


def numba_search(max_timestamps, bounds, targets):
    out = np.empty(len(targets), dtype=np.int64)
    kernels.first_segments_at_or_after(max_timestamps, bounds, targets, out)
    return out


def test_first_offset_each(bench, wide_topic):
    log, topic, timestamp = wide_topic
    bench.baseline(START, "first_offset_at_or_after per partition (NumPy)", messages=topic.partitions,
                   unit="partition")
    bench.run(lambda: [first_offset_at_or_after(view, table, timestamp) for view, table in tables_of(log, topic)],
              rounds=ROUNDS)


def test_first_segments_reference(bench, wide_topic):
    log, topic, timestamp = wide_topic
    bench.baseline(START, "first_segments_reference, one call (NumPy twin)", messages=topic.partitions,
                   unit="partition")
    got = bench.run(lambda: start_by_segment_search(log, topic, timestamp, kernels.first_segments_reference),
                    rounds=ROUNDS)
    assert got == [first_offset_at_or_after(view, table, timestamp) for view, table in tables_of(log, topic)]


def test_spark_start_offsets(bench, wide_topic):
    offset_ranges = pytest.importorskip("pyspark_seglog.offset_ranges")
    from pyspark_seglog.options import SourceOptions
    log, topic, timestamp = wide_topic
    options = SourceOptions.parse({"path": str(log.path), "topic": "wide", "startingTimestamp": str(timestamp)},
                                  streaming=False)
    bench.baseline(START, "start_offsets, a reader per partition (Spark today)", messages=topic.partitions,
                   unit="partition")
    starts = bench.run(lambda: offset_ranges.start_offsets(topic, options), rounds=ROUNDS)
    assert list(starts.values()) == [first_offset_at_or_after(v, t, timestamp) for v, t in tables_of(log, topic)]


def test_first_segments_numba(bench, wide_topic):
    log, topic, timestamp = wide_topic
    start_by_segment_search(log, topic, timestamp, numba_search)  # compiled outside the timing
    bench.seglog(START, "first_segments_at_or_after, one call (Numba)", messages=topic.partitions,
                 unit="partition")
    got = bench.run(lambda: start_by_segment_search(log, topic, timestamp, numba_search), rounds=ROUNDS)
    assert got == [first_offset_at_or_after(view, table, timestamp) for view, table in tables_of(log, topic)]


# ---------------------------------------------------------------------------------------------------------
# 3. What a fresh process pays before its first kernel result

FIRST_CALLS = f"""
import sys
import numpy as np
import seglog
sys.path.insert(0, {str(Path(__file__).parent)!r})
import numba_kernels as kernels
a = np.arange(10, dtype=np.int64)
out = np.empty(3, dtype=np.int64)
targets = np.array([1, 5, 20], dtype=np.int64)
kernels.lookup_offsets_many(a, 10, targets, out)
kernels.lookup_timestamps_many(a, 10, targets, out)
kernels.first_segments_at_or_after(a, np.array([0, 5, 10, 10], dtype=np.int64), targets, out)
kernels.tail_bytes_many(a, a, targets[:2], np.array([[0, 2, 10, 0], [4, 6, 10, 0]], dtype=np.int64), out[:2])
"""


def run_python(code: str, cache: str | None = None) -> None:
    environment = dict(os.environ)
    if cache is not None:
        environment["NUMBA_CACHE_DIR"] = cache
    subprocess.run([sys.executable, "-c", code], check=True, env=environment)


def test_import_seglog(bench):
    bench.baseline(FIRST_CALL, "python -c 'import seglog'")
    bench.run(lambda: run_python("import seglog"), rounds=5)


@pytest.fixture(scope="module")
def compiled_cache(tmp_path_factory):
    """The cache directory the last cold round compiled into, for the warm rounds (one compile fewer)."""
    holder = {"path": None}
    yield holder
    if holder["path"] is not None:
        shutil.rmtree(holder["path"], ignore_errors=True)


def test_first_calls_cold_cache(bench, scale, compiled_cache):
    def fresh_cache():
        return (tempfile.mkdtemp(prefix="numba-cache-"),)

    def keep_last(cache):
        if compiled_cache["path"] is not None:
            shutil.rmtree(compiled_cache["path"], ignore_errors=True)
        compiled_cache["path"] = cache

    bench.seglog(FIRST_CALL, "+ import numba, first call of the 4 kernels, compiled")
    bench.run(lambda cache: run_python(FIRST_CALLS, cache), setup=fresh_cache, teardown=keep_last,
              rounds=scale(3, 1), warmup_rounds=0)


def test_first_calls_warm_cache(bench, compiled_cache):
    if compiled_cache["path"] is None:  # run on its own
        compiled_cache["path"] = tempfile.mkdtemp(prefix="numba-cache-")
        run_python(FIRST_CALLS, compiled_cache["path"])
    bench.seglog(FIRST_CALL, "+ import numba, first call of the 4 kernels, cache warm")
    bench.run(lambda: run_python(FIRST_CALLS, compiled_cache["path"]), rounds=5)
