"""Disk held is what is written plus a bounded reserve (issue 26, item 6): a writer allocates its segment's
files ahead of what it writes, in steps that grow with the file (segment.Reserved), instead of a whole
segment at open; and a full disk still fails an append cleanly, before anything of it is written."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import seglog
from seglog.storage import segment
from seglog.storage.check import check_log
from seglog.storage.segment import INDEX_RESERVE, LOG_RESERVE, SegmentPaths, list_segments

MiB = 1 << 20
KiB = 1 << 10


def blocks_held(directory: Path) -> int:
    """Bytes of disk the files under `directory` hold (allocated blocks, not their sizes)."""
    return sum(os.stat(Path(root) / name).st_blocks * 512 for root, _, names in os.walk(directory) for name in names)


def values(count: int, size: int = 100, tag: bytes = b"") -> list[bytes]:
    return [(tag + b"%d:" % i).ljust(size, b"v") for i in range(count)]


def read_all(topic) -> list[bytes]:
    reader = topic.reader("earliest")
    try:
        return [message.value for message in reader]
    finally:
        reader.close()


def test_a_thousand_topics_with_a_message_each_hold_under_100_mib_while_their_producers_are_open(tmp_path):
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topics = [log.create_topic(f"t{i}") for i in range(1000)]  # 1 GiB segments, the default
        producers = [topic.producer() for topic in topics]
        try:
            for producer in producers:
                producer.send_batch([b"x" * 100])
            held = blocks_held(data)
            assert held < 100 * MiB, f"{held / MiB:.1f} MiB held by 1,000 open writers of 100 bytes each"
            # Each writer holds its first steps and no more: the log's, and the two index files'.
            log_file = SegmentPaths.of(topics[0].partition_directory(0), 0).log
            assert os.stat(log_file).st_blocks * 512 <= LOG_RESERVE[0] + 4 * KiB
        finally:
            for producer in producers:
                producer.close()
    assert blocks_held(data) < held  # the close returns the reserves


def test_two_idle_producers_hold_kilobytes_not_segments(tmp_path):
    """The issue's measure: two producers holding 200 bytes held 2.1 GiB."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        before = blocks_held(data)
        with log.create_topic("a").producer() as a, log.create_topic("b").producer() as b:
            a.send_batch([b"x" * 100])
            b.send_batch([b"y" * 100])
            assert blocks_held(data) - before < 2 * (LOG_RESERVE[0] + 2 * INDEX_RESERVE[0]) + 64 * KiB


def test_a_segment_grows_its_allocation_in_steps_and_reads_back_across_them(tmp_path):
    data = tmp_path / "data"
    written: list[bytes] = []
    allocations: list[int] = []
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_size="64 MiB")
        log_file = SegmentPaths.of(topic.partition_directory(0), 0).log
        with topic.producer() as producer:
            for i in range(200):  # ~2 MiB in 10 KiB batches: steps of 32, 64, .. KiB crossed mid-batch
                batch = values(97, 103, tag=b"%d/" % i)
                producer.send_batch(batch)
                written += batch
                held = os.stat(log_file).st_blocks * 512
                view = topic.partition_view(0).view(0)
                view.refresh()
                assert view.index.end_position <= held < 64 * MiB
                assert os.path.getsize(log_file) == 64 * MiB  # sized whole, as readers map it
                if not allocations or allocations[-1] != held:
                    allocations.append(held)
            assert len(allocations) >= 5, allocations  # several steps, each larger than the one before
            steps = [b - a for a, b in zip(allocations, allocations[1:])]
            assert steps == sorted(steps) and allocations[-1] < 2 * 2.1 * MiB
            assert read_all(topic) == written
        assert os.stat(log_file).st_blocks * 512 < allocations[-1]  # the reserve is returned at close
        assert os.path.getsize(log_file) == view.index.end_position
    with seglog.open(data) as log:
        topic = log.topic("t")
        assert read_all(topic) == written
        with topic.producer() as producer:  # a reopened segment grows again from its size
            more = values(3000, 100, tag=b"more")
            for start in range(0, len(more), 100):
                producer.send_batch(more[start:start + 100])
        assert read_all(topic) == written + more
    assert check_log(data).ok


def test_data_across_step_boundaries_survives_a_crash_and_recovery(tmp_path):
    """A writer killed mid-stream (its files still allocated ahead): the next open recovers every
    acknowledged batch, returns the reserve and reads back exactly."""
    data = tmp_path / "data"
    script = f"""
import os, seglog
log = seglog.open({str(data)!r})
topic = log.create_topic("t", segment_size="2 MiB")
producer = topic.producer()
for i in range(300):
    producer.send_batch([(b"%d/%d:" % (i, j)).ljust(211, b"v") for j in range(50)])
os._exit(0)  # no close: as a SIGKILL leaves the files
"""
    subprocess.run([sys.executable, "-c", script], check=True,
                   env={**os.environ, "PYTHONPATH": str(Path(seglog.__file__).parents[1])})
    written = [(b"%d/%d:" % (i, j)).ljust(211, b"v") for i in range(300) for j in range(50)]
    directory = data / "topics" / "public" / "default" / "t" / "0"
    bases = list_segments(directory)
    assert len(bases) >= 2 and not (directory / ".clean-shutdown").exists()
    newest = SegmentPaths.of(directory, bases[-1]).log
    with seglog.open(data) as log:  # recovers
        topic = log.topic("t")
        assert read_all(topic) == written
        end = topic.partition_view(0).view(bases[-1]).index.end_position
        assert os.path.getsize(newest) == end  # the reserve after the last batch is cut
    assert check_log(data).ok


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs: a disk that really fills up."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True,
                       capture_output=True)
    except (subprocess.CalledProcessError, FileNotFoundError) as error:
        pytest.skip(f"cannot mount a tmpfs here: {error}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_fails_an_append_cleanly_and_the_log_reopens_with_everything_acknowledged(small_disk):
    data = small_disk / "data"
    acknowledged: list[bytes] = []
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_size="64 MiB")
        with topic.producer() as producer:
            with pytest.raises(OSError) as refused:
                for i in range(10_000):
                    batch = values(100, 100, tag=b"%d/" % i)
                    producer.send_batch(batch)
                    acknowledged += batch
            assert refused.value.errno == errno.ENOSPC
            assert refused.value.filename.startswith(str(topic.partition_directory(0))), refused.value
            assert 1 * MiB < len(acknowledged) * 100 < 4 * MiB
            assert topic.end_offset() == len(acknowledged)  # nothing of the refused append is there
            with pytest.raises(OSError):
                producer.send_batch(values(100, 100, tag=b"again"))
            assert topic.end_offset() == len(acknowledged)
            assert read_all(topic) == acknowledged
        # The close trimmed the reserve: space for a little more.
    with seglog.open(data) as log:
        topic = log.topic("t")
        assert read_all(topic) == acknowledged
        with topic.producer() as producer:
            assert producer.send_batch([b"after"]) == (0, len(acknowledged))
        assert read_all(topic) == acknowledged + [b"after"]
    assert check_log(data).ok


def test_a_full_disk_while_extending_the_index_fails_before_the_batch_is_written(tmp_path, monkeypatch):
    """The index files are extended in steps too; a refusal there leaves the log as it was."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic("t")
        with topic.producer() as producer:
            for i in range(INDEX_RESERVE[0] // 32 - 1):  # one batch short of the index's first extension
                producer.send_batch([b"m%d" % i])
            count = topic.end_offset()
            allocate = os.posix_fallocate

            def refuse_index(fd, offset, length):
                if os.readlink(f"/proc/self/fd/{fd}").endswith(".index"):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                allocate(fd, offset, length)
            monkeypatch.setattr(os, "posix_fallocate", refuse_index)
            with pytest.raises(OSError, match="No space left") as refused:
                for i in range(INDEX_RESERVE[0] // 16):
                    producer.send_batch([b"n%d" % i])
                    count += 1
            assert refused.value.filename.endswith(".index")
            assert topic.end_offset() == count
            monkeypatch.setattr(os, "posix_fallocate", allocate)
            assert producer.send_batch([b"last"]) == (0, count)
        assert topic.end_offset() == count + 1
    assert check_log(data).ok


def test_the_reserve_never_passes_the_mapped_capacity(tmp_path):
    """A 40 KiB segment: its allocation stops at its capacity, however the steps would grow (a block past
    it would be held for nothing)."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_size="40 KiB")
        with topic.producer() as producer:
            for i in range(30):
                producer.send_batch(values(100, 100, tag=b"%d/" % i))
                for base in list_segments(topic.partition_directory(0)):
                    log_file = SegmentPaths.of(topic.partition_directory(0), base).log
                    assert os.stat(log_file).st_blocks * 512 <= 40 * KiB
        assert len(list_segments(topic.partition_directory(0))) > 3
        assert len(read_all(topic)) == 3000


def test_reserved_names_the_file_when_posix_fallocate_fails(tmp_path, monkeypatch):
    def refuse(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "posix_fallocate", refuse)
    with pytest.raises(OSError) as refused:
        segment.Reserved(tmp_path / "x.log", MiB, LOG_RESERVE)
    assert refused.value.errno == errno.ENOSPC and refused.value.filename == str(tmp_path / "x.log")
