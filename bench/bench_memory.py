"""Anonymous memory stays flat while reading a log far larger than the batches read.

read_batch hands out RecordBatches over the mapped segment files: their pages are file-backed (RssFile),
which the kernel can drop at any time, not anonymous memory the process owns. So reading a 2 GiB topic
batch by batch, dropping each batch, must not grow RssAnon (/proc/self/status) by more than a few MiB;
a copy into Python objects or Arrow-allocated buffers on the read path would grow it by the log's size.

baseline  f.readinto           the segment files read into a reused 1 MiB buffer
seglog    read_batch() loop    RssAnon growth over all rounds, and the largest growth seen while reading
                               (sampled after every batch), must stay under 64 MiB (16 MiB in CI sizes)

This is an assertion as well as a benchmark, so it also fails the CI run (benchmarks disabled), where it
reads a 64 MiB topic once.
"""

from __future__ import annotations

import pytest

import seglog
from seglog.storage.check import partition_directories

GROUP = "read: 2 GiB, anonymous memory"
MiB = 1 << 20
GiB = 1 << 30
READ_CHUNK = 1 << 20


def rss_anon() -> int:
    """This process's resident anonymous memory, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssAnon in /proc/self/status (Linux only)")


@pytest.fixture(scope="module")
def big_topic(scratch, fill_topic, scale):
    """(log, topic, segment files, total size) of a topic of about 2 GiB, written with send_batch."""
    target = scale(2 * GiB, 64 * MiB)
    with seglog.open(scratch) as log:
        topic = fill_topic(log, target)
        files = sorted(p for d in partition_directories(log.path) for p in d.glob("*.log"))
        yield topic, files, sum(p.stat().st_size for p in files), topic.end_offset()


def test_readinto(bench, big_topic):
    _, files, size, messages = big_topic
    buffer = bytearray(READ_CHUNK)

    def read():
        for path in files:
            with open(path, "rb", buffering=0) as f:
                while f.readinto(buffer):
                    pass

    bench.baseline(GROUP, "f.readinto", messages=messages, nbytes=size)
    bench.run(read)


def test_read_batch_anonymous_memory(bench, big_topic):
    topic, _, size, messages = big_topic
    limit = min(64 * MiB, size // 4)
    peak_growth = 0

    def read():
        nonlocal peak_growth
        start = rss_anon()
        rows = 0
        with topic.reader("earliest") as reader:
            while (batch := reader.read_batch()) is not None:
                rows += batch.num_rows
                del batch
                peak_growth = max(peak_growth, rss_anon() - start)
        return rows

    before = rss_anon()
    bench.seglog(GROUP, "read_batch() loop", messages=messages, nbytes=size,
                 at_most={"RssAnon growth (MiB)": round(limit / MiB, 1),
                          "RssAnon peak growth (MiB)": round(limit / MiB, 1)})
    assert bench.run(read) == messages
    growth = rss_anon() - before
    bench.record("RssAnon growth (MiB)", round(growth / MiB, 1))
    bench.record("RssAnon peak growth (MiB)", round(peak_growth / MiB, 1))
    assert growth < limit, f"RssAnon grew by {growth / MiB:.1f} MiB reading {size / MiB:.0f} MiB"
    assert peak_growth < limit, f"RssAnon grew by up to {peak_growth / MiB:.1f} MiB while reading"
