"""Compaction's kernel (issue 29): each key's latest offset over 10 M stored messages of 100-byte values over
1 M keys, then every message's verdict, against a Python dict pass over the same stored messages.

The topic: one partition, 10 M messages written with send_batch in batches of 10,000, keys b"key-0000000"
to b"key-0999999" (11 bytes) each used 10 times in random order, 1% of the messages without a key and 1%
with a null value (tombstones); default 1 GiB segments (two). Input: the bytes of the stored batches.

baseline  python dict, `for m in reader`   latest[m.key] = m.offset for each keyed message (Message objects)
          python dict, read_batch + to_pylist   latest.update(zip(keys.to_pylist(), offsets)) per stored batch
                                           (the cheapest Python way measured: about as fast as iteration)
seglog    build_compaction_map + segments(): pass 1 (the offset map, CRC32C checked as readers do by default)
          and pass 2 (a Verdict per message)   >= 10x each baseline, >= 0.2 GB/s of input
          the same, RssAnon while it runs       peak growth < 64 MiB (1 M keys: the map is 28.6 MiB)
          pass 1 alone, Cython, and pass 1 as a Numba kernel (experiments/numba_compaction.py, when numba is
          installed) on the same segments, with a fresh process's first Numba call timed apart (compiling,
          then from the cache): which kernel is faster (issue 29: Cython or Numba, by measurement)

The baselines take 8-9 s a round here, so they run 3 rounds without a warm-up. Files are in the page cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from bench_delayed import PeakSampler, settled_rss_anon

import seglog
from seglog._core._compact import OffsetMap, Verdict
from seglog.lifecycle.compaction_map import build_compaction_map, map_bytes
from seglog.storage.partition_view import PartitionView

GROUP = "compaction: latest offset per key"
PASS_1 = "compaction: pass 1 (the offset map), Cython vs Numba"
MESSAGES_PER_KEY = 10
CALL = 10_000
MiB = 1 << 20
EXPERIMENTS = Path(__file__).parent / "experiments"


def key_column(ids: np.ndarray, keyed: np.ndarray) -> pa.Array:
    """b"key-%07d" % id for each id, null where `keyed` is False, as one Arrow array over one buffer."""
    digits = (ids[:, None] // 10 ** np.arange(6, -1, -1)) % 10 + ord("0")
    data = np.concatenate([np.broadcast_to(np.frombuffer(b"key-", np.uint8), (len(ids), 4)),
                           digits.astype(np.uint8)], axis=1)
    offsets = np.arange(0, 11 * len(ids) + 1, 11, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), len(ids), [pa.py_buffer(np.packbits(keyed, bitorder="little")),
                                                          pa.py_buffer(offsets), pa.py_buffer(data.tobytes())])


def send_keyed(producer, ids: np.ndarray, rng: np.random.Generator) -> None:
    """A message for each key id to partition 0, send_batch CALL at a time (len(ids) a multiple of CALL):
    100-byte values (the same 1 MB a call), 1% of the messages without a key and 1% with a null value."""
    raw = pa.py_buffer(rng.integers(0, 256, CALL * 100, dtype=np.uint8))
    value_offsets = pa.py_buffer(np.arange(0, CALL * 100 + 1, 100, dtype=np.int32))
    for first in range(0, len(ids), CALL):
        valued = np.packbits(rng.random(CALL) >= 0.01, bitorder="little")
        values = pa.Array.from_buffers(pa.binary(), CALL, [pa.py_buffer(valued), value_offsets, raw])
        producer.send_batch(values, keys=key_column(ids[first:first + CALL], rng.random(CALL) >= 0.01),
                            partition=0)


class Stored:
    def __init__(self, log, messages: int) -> None:
        self.log, self.messages, self.keys = log, messages, messages // MESSAGES_PER_KEY
        self.topic = log.topic("compacted")
        self.directory = self.topic.partition_directory(0)
        self.view = PartitionView(self.directory)
        self.nbytes = sum(path.stat().st_size for path in self.directory.glob("*.log"))


def write_keyed_partition(path: Path, messages: int) -> None:
    """Topic "compacted" of the data directory `path`: `messages` messages over messages / MESSAGES_PER_KEY
    keys, each key used MESSAGES_PER_KEY times in random order (send_keyed; the same seed every run)."""
    rng = np.random.default_rng(29)
    ids = np.tile(np.arange(messages // MESSAGES_PER_KEY), MESSAGES_PER_KEY)
    rng.shuffle(ids)
    with seglog.open(path) as log:
        with log.create_topic("compacted").producer() as producer:
            send_keyed(producer, ids, rng)


@pytest.fixture(scope="module")
def stored(scratch, scale):
    messages = scale(10_000_000, 100_000)
    write_keyed_partition(scratch / "log", messages)
    with seglog.open(scratch / "log") as log:
        yield Stored(log, messages)


def dict_by_iteration(stored: Stored) -> int:
    latest = {}
    for message in stored.topic.reader("earliest"):
        if message.key is not None:
            latest[message.key] = message.offset
    return len(latest)


def dict_by_to_pylist(stored: Stored) -> int:
    latest: dict = {}
    reader = stored.topic.reader("earliest")
    offset = 0
    while (batch := reader.read_batch()) is not None:
        latest.update(zip(batch.column("key").to_pylist(), range(offset, offset + batch.num_rows)))
        offset += batch.num_rows
    latest.pop(None, None)
    return len(latest)


@pytest.mark.parametrize("way", [dict_by_iteration, dict_by_to_pylist], ids=["iteration", "to_pylist"])
def test_python_dict(bench, stored, way):
    label = {"dict_by_iteration": "python dict, for m in reader",
             "dict_by_to_pylist": "python dict, read_batch + to_pylist"}[way.__name__]
    bench.baseline(GROUP, label, messages=stored.messages, nbytes=stored.nbytes)
    assert bench.run(lambda: way(stored), rounds=3, warmup_rounds=0) == stored.keys


def compact(stored: Stored, verify_crc: bool = True) -> np.ndarray:
    """Both passes over the whole partition; the count of each Verdict."""
    result = build_compaction_map(stored.view, 0, stored.messages, max_keys=stored.keys, verify_crc=verify_crc)
    counts = np.zeros(len(Verdict), dtype=np.int64)
    for segment in result.segments():  # (np.bincount would make an int64 copy of a segment's verdicts)
        counts += [segment.count(verdict) for verdict in Verdict]
    return counts


def check_counts(stored: Stored, counts: np.ndarray) -> None:
    assert counts.sum() == stored.messages
    assert counts[Verdict.LATEST] + counts[Verdict.LATEST_TOMBSTONE] == stored.keys


def test_compaction_kernel(bench, stored):
    bench.seglog(GROUP, "build_compaction_map + segments()", messages=stored.messages, nbytes=stored.nbytes,
                 at_least={"python dict, for m in reader": 10, "python dict, read_batch + to_pylist": 10},
                 min_gbps=0.2)
    counts = bench.run(lambda: compact(stored))
    check_counts(stored, counts)
    bench.note(f"{stored.nbytes / stored.messages:.0f} B a stored message; verdicts "
               f"{dict(zip((v.name for v in Verdict), counts.tolist()))}")


def test_compaction_kernel_anonymous_memory(bench, stored):
    """RssAnon's peak growth while both passes run (a thread samples it every millisecond; the kernel
    releases the GIL)."""
    limit = 64 * MiB
    bench.seglog(GROUP, "build_compaction_map + segments(), RssAnon", messages=stored.messages,
                 nbytes=stored.nbytes, at_most={"RssAnon peak growth (MiB)": 64})
    peaks = []

    def sampled():
        with PeakSampler(settled_rss_anon()) as sampler:
            counts = compact(stored)
        peaks.append(sampler.peak)
        return counts

    check_counts(stored, bench.run(sampled, rounds=3, warmup_rounds=0))
    peak = max(peaks)
    bench.record("RssAnon peak growth (MiB)", round(peak / MiB, 1))
    bench.note(f"the offset map: {map_bytes(stored.keys) / MiB:.1f} MiB for {stored.keys:,} keys")
    assert peak < limit, f"RssAnon grew by {peak / MiB:.1f} MiB compacting {stored.keys:,} keys"


def segment_ranges(stored: Stored):
    segments = []
    for base in stored.view.bases:
        segment = stored.view.view(base)
        segment.refresh()
        segment.batch_at(segment.index.count - 1)
        segments.append(segment)
    return segments


def test_pass_1_cython(bench, stored):
    segments = segment_ranges(stored)

    def pass_1():
        offset_map = OffsetMap(stored.keys)
        for segment in segments:
            offset_map.add_segment(segment.data, segment.index, 0, segment.index.count, 0, stored.messages, False)
        keys = offset_map.keys
        offset_map.release()
        return keys

    bench.baseline(PASS_1, "Cython (seglog._core._compact)", messages=stored.messages, nbytes=stored.nbytes)
    assert bench.run(pass_1) == stored.keys


def test_pass_1_numba(bench, stored):
    pytest.importorskip("numba")  # `pip install numba` (bench/experiments/README.md)
    import numba_compaction as kernel
    segments = segment_ranges(stored)
    first = kernel.new_table(16)  # compile outside the timing (test_numba_first_call times it)
    kernel.add_batches(np.frombuffer(segments[0].data, np.uint8),
                       kernel.batch_columns(segments[0].data, segments[0].index, 0, 1), first, 16, 0)

    def pass_1():
        table, keys = kernel.new_table(stored.keys), 0
        for segment in segments:
            columns = kernel.batch_columns(segment.data, segment.index, 0, stored.messages)
            keys = kernel.add_batches(np.frombuffer(segment.data, np.uint8), columns, table, stored.keys, keys)
        return keys

    bench.seglog(PASS_1, "Numba (experiments/numba_compaction.py)", messages=stored.messages,
                 nbytes=stored.nbytes)
    assert bench.run(pass_1) == stored.keys


FIRST_CALL = "compaction: a fresh process's first pass-1 call"
NUMBA_FIRST_CALL = """
import numpy as np, numba_compaction as kernel
table = kernel.new_table(4)
data = np.frombuffer(b"key-1", np.uint8)
kernel.add_batches(data, np.zeros((0, kernel.COLUMNS), np.int64), table, 4, 0)
"""
CYTHON_FIRST_CALL = """
import seglog.lifecycle.compaction_map
from seglog._core._compact import OffsetMap
OffsetMap(4).latest_offsets()
"""


def fresh_process(code: str, cache: Path) -> None:
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
                   "PYTHONPATH": os.pathsep.join([str(EXPERIMENTS), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, timeout=300)


def test_cython_first_call(bench, tmp_path):
    """A fresh process's first Cython kernel call: importing seglog's lifecycle module is all it takes."""
    bench.baseline(FIRST_CALL, "Cython: python -c, import + first call")
    bench.run(lambda: fresh_process(CYTHON_FIRST_CALL, tmp_path / "unused"), rounds=3, warmup_rounds=0)


def test_numba_first_call(bench, tmp_path):
    """The same for the Numba kernel, compiling (a new empty NUMBA_CACHE_DIR each round); the time from
    the cache it filled is recorded beside it."""
    pytest.importorskip("numba")
    caches = iter(range(1_000))
    bench.seglog(FIRST_CALL, "Numba: python -c, import + compile + first call")
    bench.run(lambda: fresh_process(NUMBA_FIRST_CALL, tmp_path / f"cache-{next(caches)}"), rounds=3,
              warmup_rounds=0)
    started = time.perf_counter()
    fresh_process(NUMBA_FIRST_CALL, tmp_path / "cache-0")
    cached = time.perf_counter() - started
    bench.record("from the cache (s)", round(cached, 2))
    bench.note(f"from the cache: {cached:.2f} s")
