"""Appending 1M values of 100 B: seglog's producer against the plain ways to put the same bytes on disk.

Every group comes in three call sizes, each with its own baselines and the same targets: 1,000, 10,000
and 65,536 messages per send_batch call (e.g. "append: python objects, 1,000 per call"; the `calls`
fixture). The baselines take the values in the same calls.

Group "append: python objects" (the values are a list of bytes):
  baselines  python loop    `f.write(struct.pack('<I', len(v)) + v)` per value into a buffered file
             sqlite3        executemany into (offset INTEGER PRIMARY KEY, value BLOB), one transaction
                            per call; WAL, synchronous=OFF, so like seglog (fsync='never') it hands the
                            data to the page cache without waiting for the disk
  baseline   send_batch(list), 1 GiB segments allocated whole: seglog itself with every segment file
             allocated whole when mapped (posix_fallocate of 1 GiB, as before issue 26), not in steps
  seglog     send_batch(list), 1 GiB segments                    >= 4x python loop, >= 10x sqlite3,
                                                                 >= 0.95x allocated whole
             the same with 64 MiB segments (a roll every ~0.6M messages)
             send(v) per value, then flush()                     >= 2x python loop
             (send() has no call size: the producer's batch_size is the call's bytes, so it writes
             batches of as many messages as send_batch does)

Group "append: pyarrow array" (the values are one Arrow binary array, sliced into chunks):
  baselines  memcpy, fresh map     create a file, posix_fallocate 1 GiB, mmap it, copy the payload in
                                   with numpy, a call's bytes at a time: the physical limit of an append
                                   into a new segment
             memcpy, mapped pages  the copy alone into pages already faulted in (memory bandwidth)
  baseline   send_batch(arrow), 1 GiB segments allocated whole (as above)
  seglog     send_batch(arrow), 1 GiB and 64 MiB segments   >= 70% of "memcpy, fresh map",
                                                            1 GiB >= 0.95x allocated whole

A writer allocates a segment's files ahead of what it writes, in steps (storage.segment.Reserved, issue 26):
"allocated whole" sets the steps to the whole file, which is what the writer did before, so the pair
measures what the steps' extension calls cost an append.

Every round starts from a fresh data directory (or file), made outside the timing; the timing covers the
producer's whole life: opening the partition (segment allocated and mapped), the sends, and close().
Each benchmark, baselines included, also times its first round on its own (Bench.run's first_round), the
round the best-of-rounds figure drops as a warm-up, and the summary judges the targets on it too, against
the baselines' first rounds (issue 31: what a fresh producer's first segment costs a user).
"""

from __future__ import annotations

import mmap
import os
import shutil
import sqlite3
import struct
from itertools import count

import numpy as np
import pytest

import seglog
from seglog.storage import writer

OBJECTS = "append: python objects"
ARROW = "append: pyarrow array"
GiB = 1 << 30
MiB = 1 << 20


@pytest.fixture
def fresh_path(tmp_path):
    """A new path per call (per round), under the test's tmp_path."""
    numbers = count()
    return lambda suffix="": tmp_path / f"round-{next(numbers)}{suffix}"


@pytest.fixture
def fresh_topic(fresh_path):
    """setup/teardown pair for bench.run: a new log and topic per round, checked and deleted after it."""
    def make(payload, segment_size):
        def setup():
            path = fresh_path()
            log = seglog.open(path, segment_size=segment_size)
            return log, log.create_topic("bench")

        def teardown(log, topic):
            end = topic.end_offset()
            log.close()
            shutil.rmtree(log.path)
            assert end == payload.n, f"{end} messages stored, {payload.n} sent"
        return setup, teardown
    return make


# ---------------------------------------------------------------------------------------------------------
# append: python objects

def test_python_loop(bench, calls, fresh_path):
    def write(path):
        with open(path, "wb") as f:
            for chunk in calls.list_chunks:
                for v in chunk:  # noqa: FURB122 (this per-value loop is the baseline)
                    f.write(struct.pack('<I', len(v)) + v)

    bench.baseline(calls.group(OBJECTS), "python loop", messages=calls.n, nbytes=calls.nbytes)
    bench.run(write, setup=lambda: (fresh_path(".bin"),), teardown=os.unlink, first_round=True)


def test_sqlite3(bench, calls, fresh_path):
    rows = list(enumerate(calls.values))
    transactions = [rows[i:i + calls.chunk] for i in range(0, len(rows), calls.chunk)]

    def setup():
        path = fresh_path(".sqlite")
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute('CREATE TABLE log ("offset" INTEGER PRIMARY KEY, value BLOB)')
        return connection, path

    def insert(connection, path):
        for transaction in transactions:
            connection.execute("BEGIN")
            connection.executemany('INSERT INTO log ("offset", value) VALUES (?, ?)', transaction)
            connection.execute("COMMIT")

    def teardown(connection, path):
        stored = connection.execute("SELECT count(*) FROM log").fetchone()[0]
        connection.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{path}{suffix}"):
                os.unlink(f"{path}{suffix}")
        assert stored == calls.n

    bench.baseline(calls.group(OBJECTS), "sqlite3", messages=calls.n, nbytes=calls.nbytes)
    bench.run(insert, setup=setup, teardown=teardown, first_round=True)


def size_name(size):
    return f"{size // GiB} GiB" if size >= GiB else f"{size // MiB} MiB"


def send_chunks(chunks):
    def send(log, topic):
        with topic.producer() as producer:
            for chunk in chunks:
                producer.send_batch(chunk)
    return send


WHOLE = "1 GiB segments allocated whole"


def allocate_whole(monkeypatch):
    """The writer's reserves set to whole files: each segment allocated at once when mapped (a benchmark
    baseline: the allocation before issue 26)."""
    monkeypatch.setattr(writer, "LOG_RESERVE", (GiB, GiB))
    monkeypatch.setattr(writer, "SPARE_LOG_RESERVE", (GiB, GiB))
    monkeypatch.setattr(writer, "INDEX_RESERVE", (GiB, GiB))


def test_send_batch_list_allocated_whole(bench, calls, fresh_topic, monkeypatch):
    allocate_whole(monkeypatch)
    bench.baseline(calls.group(OBJECTS), f"send_batch(list), {WHOLE}", messages=calls.n, nbytes=calls.nbytes)
    setup, teardown = fresh_topic(calls, GiB)
    bench.run(send_chunks(calls.list_chunks), setup=setup, teardown=teardown, first_round=True)


@pytest.mark.parametrize("segment_size", [GiB, 64 * MiB], ids=["1GiB", "64MiB"])
def test_send_batch_list(bench, calls, fresh_topic, segment_size):
    label = f"send_batch(list), {size_name(segment_size)} segments"
    whole = {f"send_batch(list), {WHOLE}": 0.95} if segment_size == GiB else {}
    bench.seglog(calls.group(OBJECTS), label, messages=calls.n, nbytes=calls.nbytes,
                 at_least={"python loop": 4, "sqlite3": 10, **whole})
    setup, teardown = fresh_topic(calls, segment_size)
    bench.run(send_chunks(calls.list_chunks), setup=setup, teardown=teardown, first_round=True)


def test_send_loop(bench, calls, fresh_topic):
    values = calls.values

    def send_each(log, topic):
        with topic.producer(batch_size=calls.chunk * calls.value_bytes) as producer:
            send = producer.send
            for v in values:
                send(v)
            producer.flush()

    bench.seglog(calls.group(OBJECTS), "send(v) loop + flush()", messages=calls.n, nbytes=calls.nbytes,
                 at_least={"python loop": 2})
    setup, teardown = fresh_topic(calls, GiB)
    bench.run(send_each, setup=setup, teardown=teardown, first_round=True)


# ---------------------------------------------------------------------------------------------------------
# append: pyarrow array

def copy_in_chunks(view, payload):
    """The payload copied into a mapped view with numpy, one slice assignment per producer chunk."""
    step = payload.chunk * payload.value_bytes
    for start in range(0, payload.nbytes, step):
        stop = min(start + step, payload.nbytes)
        view[start:stop] = payload.raw[start:stop]


def map_new_file(path, size):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def test_memcpy_fresh_map(bench, calls, fresh_path):
    def append(path):
        mapped = map_new_file(path, GiB)
        copy_in_chunks(np.frombuffer(mapped, dtype=np.uint8), calls)
        mapped.close()

    bench.baseline(calls.group(ARROW), "memcpy, fresh map", messages=calls.n, nbytes=calls.nbytes)
    bench.run(append, setup=lambda: (fresh_path(".seg"),), teardown=os.unlink, first_round=True)


def test_memcpy_mapped_pages(bench, calls, fresh_path):
    def setup():
        path = fresh_path(".seg")
        mapped = map_new_file(path, calls.nbytes)
        view = np.frombuffer(mapped, dtype=np.uint8)
        view[:] = 0xA5  # every page allocated, dirty and mapped writable
        return view, mapped, path

    def teardown(view, mapped, path):
        assert np.array_equal(view, calls.raw)
        os.unlink(path)  # unmapped when the round's arguments are dropped (the view pins the map till then)

    bench.baseline(calls.group(ARROW), "memcpy, mapped pages", messages=calls.n, nbytes=calls.nbytes)
    bench.run(lambda view, mapped, path: copy_in_chunks(view, calls), setup=setup, teardown=teardown,
              first_round=True)


def test_send_batch_arrow_allocated_whole(bench, calls, fresh_topic, monkeypatch):
    allocate_whole(monkeypatch)
    bench.baseline(calls.group(ARROW), f"send_batch(arrow), {WHOLE}", messages=calls.n, nbytes=calls.nbytes)
    setup, teardown = fresh_topic(calls, GiB)
    bench.run(send_chunks(calls.arrow_chunks), setup=setup, teardown=teardown, first_round=True)


@pytest.mark.parametrize("segment_size", [GiB, 64 * MiB], ids=["1GiB", "64MiB"])
def test_send_batch_arrow(bench, calls, fresh_topic, segment_size):
    label = f"send_batch(arrow), {size_name(segment_size)} segments"
    whole = {f"send_batch(arrow), {WHOLE}": 0.95} if segment_size == GiB else {}
    bench.seglog(calls.group(ARROW), label, messages=calls.n, nbytes=calls.nbytes,
                 at_least={"memcpy, fresh map": 0.7, **whole})
    setup, teardown = fresh_topic(calls, segment_size)
    bench.run(send_chunks(calls.arrow_chunks), setup=setup, teardown=teardown, first_round=True)
