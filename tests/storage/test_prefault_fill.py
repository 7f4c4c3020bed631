"""The prefault thread makes the pages ahead of a writer by writing zeros into the log's blocks past what the
writer wrote (issue 31: a fault there first had the kernel make and zero 8 MiB of page cache around it), and the
writer makes those the thread has not reached yet itself (Prefaulter.reach). Neither may ever zero a byte the
writer wrote."""

import fcntl
import os

import numpy as np

import seglog
from seglog._core._format import Prefaulter
from seglog._core._mapping import Mapping
from seglog.storage.check import check_log

MiB = 1 << 20


def mapped_file(path, size):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        return Mapping(fd, size, True)
    finally:
        os.close(fd)


def test_reach_makes_the_pages_past_the_writer_and_keeps_its_bytes(tmp_path):
    path = tmp_path / "segment.log"
    mapping = mapped_file(path, 8 * MiB)
    view = np.frombuffer(mapping, dtype=np.uint8)
    view[:5000] = 0xAB  # what the writer wrote: up to the middle of the second page
    prefaulter = Prefaulter(ahead=4 * MiB, step=MiB)
    fd = os.open(path, os.O_RDWR)
    try:
        prefaulter.target(mapping, 5000, fd)
    finally:
        os.close(fd)  # (the thread keeps a copy)
    prefaulter.reach(5000, 3 * MiB + 17)
    view[5000:3 * MiB + 17] = 0xCD  # the writer's next write, over the pages made for it
    prefaulter.reach(3 * MiB + 17, 3 * MiB + 100)
    del view
    prefaulter.unmap_later(mapping)
    prefaulter.close()  # (after the thread's steps: whatever it wrote is written)
    data = np.fromfile(path, dtype=np.uint8)
    assert (data[:5000] == 0xAB).all()
    assert (data[5000:3 * MiB + 17] == 0xCD).all()
    assert not data[3 * MiB + 17:].any()


def test_a_writer_racing_its_prefault_thread_keeps_every_byte(tmp_path):
    """Batches of every size, in small segments (rolls onto spares), each read back as written: a zero the
    thread or the writer wrote over a batch would show."""
    rng = np.random.default_rng(31)
    sent = []
    with seglog.open(tmp_path / "data", segment_size=8 * MiB) as log:
        topic = log.create_topic("fills")
        with topic.producer() as producer:
            for _ in range(400):
                count = int(rng.integers(1, 2000))
                lengths = rng.integers(0, 200, count)
                values = [rng.bytes(int(n)) for n in lengths]
                producer.send_batch(values)
                sent.extend(values)
        with topic.reader("earliest") as reader:
            read = []
            while (batch := reader.read_batch()) is not None:
                read.extend(batch.column("value").to_pylist())
    assert len(read) == len(sent)
    assert read == sent


def test_the_threads_copy_of_the_file_is_closed_on_exec(tmp_path):
    """(as Python's own descriptors are: a child process exec'd meanwhile must not keep the segment open)"""
    path = tmp_path / "segment.log"
    mapping = mapped_file(path, MiB)
    prefaulter = Prefaulter()
    fd = os.open(path, os.O_RDWR)
    try:
        prefaulter.target(mapping, 0, fd)
    finally:
        os.close(fd)
    copies = [int(name) for name in os.listdir("/proc/self/fd")
              if os.path.realpath(f"/proc/self/fd/{name}") == str(path.resolve())]
    try:
        assert len(copies) == 1
        assert fcntl.fcntl(copies[0], fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    finally:
        prefaulter.unmap_later(mapping)
        prefaulter.close()
    assert not any(os.path.realpath(f"/proc/self/fd/{name}") == str(path.resolve())
                   for name in os.listdir("/proc/self/fd"))


def test_a_closed_segments_log_holds_its_batches_and_nothing_after(tmp_path):
    """A close trims the log to its last batch while the prefault thread may be writing zeros past it: the
    thread's step into the file is waited for first, or its write grew the file again (the batches checked
    came to 20 MB of a 27.5 MB log: bench_recovery)."""
    for round_ in range(5):
        with seglog.open(tmp_path / str(round_)) as log:
            topic = log.create_topic("t", partitions=1)
            with topic.producer() as producer:
                for _ in range(10):
                    producer.send_batch([b"v" * 100] * 20_000)
        (segment,) = (tmp_path / str(round_)).rglob("*.log")
        report = check_log(tmp_path / str(round_))
        assert report.ok and segment.stat().st_size == report.bytes_checked
