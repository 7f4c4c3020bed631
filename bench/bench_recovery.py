"""Validating a 1 GiB log (`seglog check`): every batch's header, offsets and CRC32C, every index.

baseline  f.readinto        read the same segment files into a reused 1 MiB buffer: the cost of getting
                            the bytes from the page cache at all
          crc32c package    the same reads plus a CRC32C pass with the `crc32c` PyPI package (skipped
                            if it is not installed): the least any validation must do
seglog    check_log         seglog.storage.check.check_log over the data directory   >= 1 GB/s

The topic is written once per module with send_batch of 100 B values (two segments at the default
1 GiB segment size); its files are in the page cache, so this measures the CPU side of recovery.
"""

from __future__ import annotations

import pytest

import seglog
from seglog.storage.check import check_log, partition_directories

GROUP = "recovery: validate 1 GiB"
GiB = 1 << 30
READ_CHUNK = 1 << 20


@pytest.fixture(scope="module")
def stored_log(scratch, fill_topic, scale):
    """(data directory, segment files, their total size) of a topic holding about 1 GiB."""
    target = scale(GiB, 16 << 20)
    with seglog.open(scratch) as log:
        fill_topic(log, target)
    files = sorted(p for d in partition_directories(scratch) for p in d.glob("*.log"))
    return scratch, files, sum(p.stat().st_size for p in files)


def read_files(files, consume=None):
    buffer = bytearray(READ_CHUNK)
    view = memoryview(buffer)
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buffer):
                if consume:
                    consume(view[:n])


def test_readinto(bench, stored_log):
    _, files, size = stored_log
    bench.baseline(GROUP, "f.readinto", nbytes=size)
    bench.run(lambda: read_files(files))


def test_crc32c_package(bench, stored_log):
    crc32c = pytest.importorskip("crc32c")
    _, files, size = stored_log

    def read_and_checksum():
        crc = 0

        def consume(chunk):
            nonlocal crc
            crc = crc32c.crc32c(chunk, crc)
        read_files(files, consume)
        return crc

    bench.baseline(GROUP, "f.readinto + crc32c package", nbytes=size)
    bench.run(read_and_checksum)


def test_check_log(bench, stored_log):
    directory, _, size = stored_log
    bench.seglog(GROUP, "check_log", nbytes=size, min_gbps=1.0)
    report = bench.run(lambda: check_log(directory))
    assert report.ok, report.problems
    assert report.bytes_checked == size
