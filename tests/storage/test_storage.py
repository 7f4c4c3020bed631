"""Segments on disk: names, rolls by size, time and count, oversized batches, trimming, storage size."""

import errno
import logging
import os
import stat
import subprocess
import threading
import time

import numpy as np
import pytest

import seglog
from helpers_storage import python_command
from seglog._core._format import Prefaulter
from seglog.storage import segment
from seglog.storage.check import check_log
from seglog.storage.segment import SegmentPaths, index_slots, list_segments, map_file
from seglog.storage.writer import ActiveSegment, SpareMaker


def segment_files(topic, partition=0):
    return sorted(os.listdir(topic.partition_directory(partition)))


def segments(topic, partition=0):
    return list_segments(topic.partition_directory(partition))


def values(n, size=100, tag=b""):
    return [tag + b"%08d" % i + b"x" * (size - 8 - len(tag)) for i in range(n)]


def read_all(topic, partition=0):
    return [m.value for m in topic.reader("earliest", partition)]


def test_files_are_named_by_20_digit_base_offset(log):
    topic = log.create_topic("t", segment_size=4096)
    with topic.producer() as producer:
        for _ in range(10):
            producer.send_batch(values(10))
    names = segment_files(topic)
    assert "00000000000000000000.log" in names
    assert "00000000000000000000.index" in names and "00000000000000000000.timeindex" in names
    bases = segments(topic)
    assert len(bases) > 1 and all(f"{b:020d}.log" in names for b in bases)
    assert read_all(topic) == values(10) * 10


def test_roll_when_next_batch_would_exceed_segment_size(log):
    topic = log.create_topic("t", segment_size=4096)
    with topic.producer() as producer:
        for _ in range(6):
            producer.send_batch(values(10))  # ~1.3 KiB each: three fit in 4 KiB
    assert segments(topic) == [0, 30]
    for base in segments(topic)[:-1]:
        assert os.path.getsize(topic.partition_directory(0) / f"{base:020d}.log") <= 4096


def test_batch_larger_than_a_segment_is_split_only_where_it_must(log):
    topic = log.create_topic("t", segment_size=4096)
    with topic.producer() as producer:
        producer.send_batch(values(5))
        producer.send_batch(values(100))  # ~13 KiB: cannot fit any segment whole
    assert read_all(topic) == values(5) + values(100)
    # 112 bytes a record: 35 fill a 4 KiB segment; the big batch first fills what the small one left
    assert segments(topic) == [0, 35, 70]


def test_whole_batch_goes_to_a_new_segment_rather_than_being_split(log):
    topic = log.create_topic("t", segment_size=4096)
    with topic.producer() as producer:
        producer.send_batch(values(20))  # ~2.6 KiB
        producer.send_batch(values(20))  # fits a fresh segment, not the rest of this one
    assert segments(topic) == [0, 20]
    assert [b.num_rows for b in iter(topic.reader().read_batch, None)] == [20, 20]


def test_oversized_single_message_gets_a_segment_of_its_own(log):
    topic = log.create_topic("t", segment_size=1024)
    big = b"B" * 5000
    with topic.producer() as producer:
        producer.send_batch([b"small"])
        producer.send_batch([big])
        producer.send_batch([b"after"])
    assert segments(topic) == [0, 1, 2]
    assert read_all(topic) == [b"small", big, b"after"]


def test_roll_by_time_reads_the_injected_clock(log, clock):
    topic = log.create_topic("t", segment_roll_time="1h")
    with topic.producer() as producer:
        producer.send_batch([b"a"])
        clock.advance(minutes=59)
        producer.send_batch([b"b"])
        assert segments(topic) == [0]
        clock.advance(minutes=1)
        producer.send_batch([b"c"])
        assert segments(topic) == [0, 2]


def test_roll_by_message_count(log):
    topic = log.create_topic("t", segment_max_messages=5)
    with topic.producer() as producer:
        producer.send_batch(values(3))
        producer.send_batch(values(4))
        producer.send_batch(values(9))
    assert segments(topic) == [0, 5, 10, 15]
    assert read_all(topic) == values(3) + values(4) + values(9)


def test_sealed_segments_are_trimmed_and_storage_size_is_logical(log):
    topic = log.create_topic("t", segment_size="1 MiB")
    with topic.producer() as producer:
        producer.send_batch(values(100))
        directory = topic.partition_directory(0)
        assert os.path.getsize(directory / f"{0:020d}.log") == 1 << 20  # pre-sized while active
        logical = topic.storage_size()
        assert 100 * 100 < logical < 100 * 100 + 4096
    assert os.path.getsize(directory / f"{0:020d}.log") < 100 * 100 + 4096  # trimmed on close
    assert topic.storage_size() == logical


def test_offsets_are_dense_across_send_and_send_batch(log):
    topic = log.create_topic("t")
    with topic.producer() as producer:
        first = producer.send(b"one")
        batch = producer.send_batch([b"two", b"three"])
        last = producer.send(b"four")
    assert (first.offset, batch.offset, last.offset) == (0, 1, 3)
    assert [m.offset for m in topic.reader()] == [0, 1, 2, 3]
    assert topic.end_offset() == 4


def test_reopen_continues_at_end_offset(tmp_path, clock):
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.create_topic("t", segment_size=4096)
        with topic.producer() as producer:
            for _ in range(5):
                producer.send_batch(values(10))
    with seglog.open(tmp_path, clock=clock) as log:
        topic = log.topic("t")
        assert topic.config.segment_size == 4096
        with topic.producer() as producer:
            assert producer.send_batch([b"next"]).offset == 50
        assert read_all(topic) == values(10) * 5 + [b"next"]


@pytest.mark.parametrize("policy", ["never", "always", "50ms"])
def test_fsync_policies_write_and_read_back(log, policy):
    topic = log.create_topic("t", fsync=policy, segment_size=4096)
    with topic.producer() as producer:
        for _ in range(5):
            producer.send_batch(values(10))
    assert read_all(topic) == values(10) * 5
    assert topic.config.fsync == ("always" if policy == "always" else policy)


class SyncRecorder:
    """Wraps ActiveSegment.sync to record each fsync: the partition's end offset it covered and the thread
    it ran on; wait_for waits (bounded) until one has covered an offset."""

    def __init__(self, monkeypatch) -> None:
        self.synced: list[tuple[int, str]] = []
        self._changed = threading.Condition()
        sync = ActiveSegment.sync

        def recorded_sync(segment):
            sync(segment)
            with self._changed:
                self.synced.append((segment.next_offset, threading.current_thread().name))
                self._changed.notify_all()
        monkeypatch.setattr(ActiveSegment, "sync", recorded_sync)

    def wait_for(self, end_offset: int, timeout: float = 30) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: any(o >= end_offset for o, _ in self.synced), timeout)


def test_fsync_interval_syncs_an_idle_partition_without_a_further_write(log, monkeypatch):
    syncs = SyncRecorder(monkeypatch)
    topic = log.create_topic("t", fsync="200ms")
    with topic.producer() as producer:
        for end in (10, 20):  # the second write comes right after an fsync: it is not due at once
            producer.send_batch(values(10))
            assert syncs.wait_for(end), f"offsets up to {end} were not fsynced: {syncs.synced}"
    assert {thread for _, thread in syncs.synced} <= {"seglog-linger", threading.current_thread().name}


def test_fsync_always_syncs_each_batch_as_it_is_written(log, monkeypatch):
    syncs = SyncRecorder(monkeypatch)
    topic = log.create_topic("t", fsync="always")
    with topic.producer() as producer:
        for i in range(1, 6):
            producer.send_batch(values(10))
            assert syncs.synced == [(10 * j, threading.current_thread().name) for j in range(1, i + 1)]


def test_fsync_never_never_syncs(tmp_path, monkeypatch):
    syncs = SyncRecorder(monkeypatch)
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("t", fsync="never", segment_size=4096)
        with topic.producer() as producer:
            for _ in range(10):  # rolls included
                producer.send_batch(values(10))
            producer.send(b"lingered")
    assert len(segments(topic)) > 1 and syncs.synced == []  # not at rolls, nor in the background, nor at close


def test_fsync_always_makes_each_new_segment_name_durable(log, monkeypatch):
    """An fsync of a file makes its bytes durable, not its name: each segment whose messages were fsynced
    must also have been named in an fsync of the partition directory (fresh or a spare renamed in)."""
    named_when_synced: set[str] = set()
    fsync = os.fsync

    def recorded_fsync(fd):
        fsync(fd)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            named_when_synced.update(os.listdir(f"/proc/self/fd/{fd}"))
    monkeypatch.setattr(os, "fsync", recorded_fsync)
    topic = log.create_topic("t", fsync="always", segment_size=4096)
    with topic.producer() as producer:
        for _ in range(12):  # about two batches a segment
            producer.send_batch([bytes(150)] * 10)
    logs = {SegmentPaths.of(topic.partition_directory(0), base).log.name for base in segments(topic)}
    assert len(logs) > 3 and logs <= named_when_synced


def test_segment_listing_ignores_other_names(tmp_path):
    for name in ["00000000000000000007.log", "00000000000000000003.log", "00000000000000000003.index",
                 "0000000000000000003.log", "000000000000000000031.log", "0000000000000000000x.log",
                 "0000000000000000000\u00b2.log", "00000000000000000009.log.tmp", "notes.log"]:
        (tmp_path / name).touch()
    assert list_segments(tmp_path) == [3, 7]
    assert list_segments(tmp_path / "missing") == []


def _set_directory_mtime(directory, mtime_ns):
    os.utime(directory, ns=(mtime_ns, mtime_ns))


def test_partition_view_lists_again_after_a_change_in_the_same_clock_tick(log):
    """A listing made while the directory's mtime is recent is not trusted: a segment created in the same
    tick leaves the mtime as it was, and must still be seen."""
    topic = log.create_topic("t", segment_max_messages=1)
    with topic.producer() as producer:
        producer.send(b"a")
        producer.flush()
        view = topic.partition_view(0)
        view.rescan()
        directory = topic.partition_directory(0)
        same_tick = os.stat(directory).st_mtime_ns
        producer.send(b"b")
        producer.flush()  # rolls: segment 1 is created
        _set_directory_mtime(directory, same_tick)
        view.rescan()
        assert view.bases == [0, 1]


def test_partition_view_skips_the_listing_while_a_settled_directory_is_unchanged(log, monkeypatch):
    from seglog.storage import partition_view
    topic = log.create_topic("t", segment_max_messages=1)
    with topic.producer() as producer:
        producer.send(b"a")
        producer.flush()
        directory = topic.partition_directory(0)
        an_hour_ago = os.stat(directory).st_mtime_ns - 3600 * 10**9
        _set_directory_mtime(directory, an_hour_ago)
        view = topic.partition_view(0)
        view.rescan()
        listings = []
        monkeypatch.setattr(partition_view, "list_segments", lambda d: listings.append(d) or list_segments(d))
        view.rescan()
        assert listings == []
        producer.send(b"b")
        producer.flush()  # a roll changes the directory's mtime
        view.rescan()
        assert len(listings) == 1 and view.bases == [0, 1]


def test_reading_many_segments_keeps_a_bounded_number_mapped(log, monkeypatch):
    """A long partition read from start to end lets the least recently used segments' maps go."""
    from seglog.storage import partition_view
    monkeypatch.setattr(partition_view, "MAX_OPEN_SEGMENTS", 4)
    topic = log.create_topic("t", segment_max_messages=1)
    with topic.producer() as producer:
        producer.send_batch(values(60))
    descriptors = len(os.listdir("/proc/self/fd"))
    assert [m.value for m in topic.reader("earliest")] == values(60)
    assert len(topic.partition_view(0).views) <= 4
    assert len(os.listdir("/proc/self/fd")) <= descriptors + 4 * 3


KEEP_BATCHES = """
import os, resource, shutil, sys
import seglog
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
data, count = sys.argv[1], int(sys.argv[2])
values = [b"value %d" % i for i in range(count)]
with seglog.open(data) as log:
    topic = log.create_topic("t", segment_size=1024, segment_max_messages=1)
    with topic.producer() as producer:
        producer.send_batch(values)
    reader = topic.reader("earliest")
    batches = [reader.read_batch() for _ in range(count)]
    assert reader.read_batch() is None
    assert len(os.listdir(topic.partition_directory(0))) >= 3 * count  # a segment per message
    print(len(os.listdir("/proc/self/fd")))
shutil.rmtree(data)  # the batches hold the segments' pages, not their files
assert [v for batch in batches for v in batch.column("value").to_pylist()] == values
"""


def test_kept_batches_of_a_thousand_segments_need_no_file_descriptors(tmp_path):
    """Every returned RecordBatch keeps its segment's map alive; a map must not hold a descriptor, or
    about 500 kept batches from different segments end in EMFILE under the common limit of 1,024."""
    result = subprocess.run(python_command(KEEP_BATCHES, str(tmp_path / "data"), "1000"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout) < 64  # descriptors open while the 1,000 batches were alive


def test_a_map_is_unmapped_only_once_no_buffer_points_into_it(tmp_path):
    path = tmp_path / "file"
    path.write_bytes(b"abcdefgh" * 512)
    mapped = map_file(path, writable=False, random_access=True)
    array = np.frombuffer(mapped, dtype=np.uint8)
    assert not array.flags.writeable and bytes(array[:3]) == b"abc"
    with pytest.raises(BufferError):
        mapped.close()
    del array
    mapped.close()
    assert mapped.closed
    with pytest.raises(ValueError, match="closed"):
        len(mapped)
    writable = map_file(path, writable=True)
    memoryview(writable)[:3] = b"xyz"
    writable.flush()
    writable.close()
    assert path.read_bytes()[:4] == b"xyzd"


class FullDisk:
    """While `full` is set, reserving space fails as on a full disk: os.posix_fallocate (which pre-sizes
    every new segment file) or the writable map itself raises OSError(ENOSPC)."""

    def __init__(self, monkeypatch, where: str) -> None:
        self.full = False
        if where == "posix_fallocate":
            allocate = os.posix_fallocate

            def posix_fallocate(fd, offset, length):
                self._refuse()
                allocate(fd, offset, length)
            monkeypatch.setattr(os, "posix_fallocate", posix_fallocate)
        else:
            mapping = segment.Mapping

            def writable_mapping(fd, length, writable):
                if writable:
                    self._refuse()
                return mapping(fd, length, writable)
            monkeypatch.setattr(segment, "Mapping", writable_mapping)

    def _refuse(self) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def assert_reopens_with(data, written):
    """Everything written is there, dense from offset 0, after a reopen, and the directory checks clean."""
    with seglog.open(data) as log:
        topic = log.topic("t")
        assert topic.end_offset() == len(written)
        assert read_all(topic) == written
    assert check_log(data).ok


@pytest.mark.parametrize("where", ["posix_fallocate", "map"])
def test_a_full_disk_at_a_roll_fails_the_send_and_writing_resumes_when_space_returns(tmp_path, monkeypatch,
                                                                                   where):
    disk = FullDisk(monkeypatch, where)
    data = tmp_path / "data"
    written = []
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_size=4096)  # three batches of ten 100-byte values
        with topic.producer(linger_ms="1h") as producer:  # send() is written by flush(), in this thread
            disk.full = True
            with pytest.raises(OSError) as refused:
                for i in range(10):  # a roll comes within four
                    batch = values(10, tag=b"a%d" % i)
                    assert producer.send_batch(batch) == (0, len(written))
                    written += batch
            assert refused.value.errno == errno.ENOSPC
            assert refused.value.filename.startswith(str(topic.partition_directory(0)))
            files = segment_files(topic)
            for attempt in (lambda: producer.send_batch(values(10)), lambda: producer.send(b"x") and producer.flush()):
                with pytest.raises(OSError):  # refused while the disk is full, and nothing changes
                    attempt()
                assert topic.end_offset() == len(written) and segment_files(topic) == files
            disk.full = False
            for i in range(5):
                batch = values(10, tag=b"b%d" % i)
                assert producer.send_batch(batch) == (0, len(written))
                written += batch
            assert producer.send(b"sent") == (0, len(written))
            written.append(b"sent")
        assert read_all(topic) == written
    assert len(segment_files(topic)) > len(files)
    assert_reopens_with(data, written)


@pytest.mark.parametrize("where", ["posix_fallocate", "map"])
def test_a_full_disk_at_a_partitions_first_segment_fails_the_producer_and_leaves_no_files(tmp_path, monkeypatch,
                                                                                        where):
    disk = FullDisk(monkeypatch, where)
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic("t")
        disk.full = True
        with pytest.raises(OSError) as refused:
            topic.producer(partitions=[0])
        assert refused.value.errno == errno.ENOSPC
        assert segment_files(topic) == [".lock"]
        disk.full = False
        with topic.producer() as producer:
            assert producer.send_batch(values(5)) == (0, 0)
    assert_reopens_with(data, values(5))


def test_a_full_disk_when_a_message_needs_a_segment_of_its_own(tmp_path, monkeypatch):
    """The empty active segment is resized in place for an oversized message: a failure leaves it there."""
    disk = FullDisk(monkeypatch, "posix_fallocate")
    data = tmp_path / "data"
    oversized = [b"x" * 10_000]
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_size=4096)
        with topic.producer(partitions=[0]) as producer:
            disk.full = True
            for attempt in (oversized, values(1)):
                with pytest.raises(OSError, match="No space left"):
                    producer.send_batch(attempt)
            assert topic.end_offset() == 0 and segments(topic) == [0]
            disk.full = False
            assert producer.send_batch(oversized) == (0, 0)
            assert producer.send_batch(values(1)) == (0, 1)
        assert segments(topic) == [0, 1]
    assert_reopens_with(data, oversized + values(1))


# ---------------------------------------------------------------------------------------------------------
# The spare segment: the next segment's files, made and prefaulted before the roll that takes them.

def spare_files(directory):
    spare = segment.SegmentPaths.spare(directory)
    return [path for path in (spare.log, spare.index, spare.timeindex) if path.exists()]


def wait_for(condition, timeout=10):
    """The spare is made in the background: wait until `condition()` holds (AssertionError after `timeout`)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_spare_segment_is_made_at_half_full_taken_by_the_roll_and_never_read(tmp_path):
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("t", segment_size="64 KiB")
        directory = topic.partition_directory(0)
        with topic.producer() as producer:
            producer.send_batch(values(400))  # 42 KiB: less than three quarters of the segment
            assert spare_files(directory) == []
            producer.send_batch(values(100))  # past three quarters: the spare is made, in the background
            wait_for(lambda: topic.internal_stats()["partitions"]["0"]["spareSegmentReady"])
            assert len(spare_files(directory)) == 3 and segments(topic) == [0]
            assert [f for f in segment_files(topic) if f.endswith(".log")] == ["00000000000000000000.log"]
            spare_inode = segment.SegmentPaths.spare(directory).log.stat().st_ino
            assert len(read_all(topic)) == 500 and check_log(tmp_path / "data").ok
            producer.send_batch(values(300))  # does not fit: the roll renames the spare into place
            first, second = segments(topic)
            assert segment.SegmentPaths.of(directory, second).log.stat().st_ino == spare_inode
            assert read_all(topic) == values(400) + values(100) + values(300)
        assert spare_files(directory) == []  # a clean close leaves no spare
    assert check_log(tmp_path / "data").ok


CRASH_WITH_A_SPARE = """
import os, signal, sys, time
import seglog
log = seglog.open(sys.argv[1])
topic = log.create_topic("t", segment_size="64 KiB")
producer = topic.producer()
producer.send_batch([b"%08d" % i + b"x" * 92 for i in range(500)])
deadline = time.monotonic() + 10
while not topic.internal_stats()["partitions"]["0"]["spareSegmentReady"]:  # made in the background
    assert time.monotonic() < deadline
    time.sleep(0.005)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("opener", ["writer", "seglog.open"])
def test_a_spare_a_crash_leaves_is_removed_by_the_next_recovery_and_nothing_else_changes(tmp_path, opener):
    data = tmp_path / "data"
    result = subprocess.run(python_command(CRASH_WITH_A_SPARE, str(data)), capture_output=True, timeout=60)
    assert result.returncode == -9, result.stderr.decode(errors="replace")
    with seglog.open(data) as log:  # recovers every partition nobody writes
        topic = log.topic("t")
        directory = topic.partition_directory(0)
        if opener == "writer":
            with topic.producer() as producer:
                assert spare_files(directory) == []
                producer.send_batch(values(1))
        assert spare_files(directory) == [] and segments(topic) == [0]
        assert len(read_all(topic)) == 500 + (opener == "writer")
    assert check_log(data).ok


def test_a_spare_that_cannot_be_made_leaves_no_file_and_the_roll_makes_its_segment(tmp_path, monkeypatch,
                                                                                    caplog):
    disk = FullDisk(monkeypatch, "posix_fallocate")
    caplog.set_level(logging.INFO, logger="seglog.storage.writer")
    with seglog.open(tmp_path / "data") as log:
        topic = log.create_topic("t", segment_size="64 KiB")
        directory = topic.partition_directory(0)
        with topic.producer() as producer:
            producer.send_batch(values(400))
            disk.full = True
            producer.send_batch(values(100))  # past three quarters: the spare is refused, the write is not
            wait_for(lambda: "no spare segment" in caplog.text)
            assert spare_files(directory) == []
            disk.full = False
            producer.send_batch(values(300))  # the roll makes the next segment itself
            assert len(segments(topic)) == 2
            assert read_all(topic) == values(400) + values(100) + values(300)


class DeferredTasks:
    """A stand-in for the log's background thread: keeps what SpareMaker asks it to run, for the test to run."""

    def __init__(self) -> None:
        self.tasks = []

    def run_soon(self, writer, task) -> None:
        self.tasks.append(task)


def test_a_spare_made_while_the_last_one_is_renamed_into_place_gets_files_of_its_own(tmp_path, monkeypatch):
    """The next spare, asked for while a roll renames the last one into place (a small segment fills
    before the renames end), must neither open the files being renamed away nor be left without them."""
    background = DeferredTasks()
    maker = SpareMaker(tmp_path, Prefaulter(), lambda: (64 << 10, index_slots(64 << 10, None)))
    maker.ask(None, background)
    background.tasks.pop()()  # the first spare, made
    maker.rolled()
    maker.ask(None, background)  # the next one is asked for; the background thread runs it during the roll
    make_next = background.tasks.pop()
    rename = SegmentPaths.rename_to
    making = threading.Thread(target=make_next)

    def rename_while_the_next_spare_is_made(paths, other):
        making.start()
        making.join(0.2)  # given time to run now: it must wait for the renames to end
        rename(paths, other)
    monkeypatch.setattr(SegmentPaths, "rename_to", rename_while_the_next_spare_is_made)
    first = SegmentPaths.of(tmp_path, 0)
    taken = maker.take(first)
    making.join(30)
    monkeypatch.undo()
    assert taken is not None and not making.is_alive()
    spare = SegmentPaths.spare(tmp_path)
    assert {os.stat(p).st_ino for p in (spare.log, spare.index, spare.timeindex)}.isdisjoint(
        os.stat(p).st_ino for p in (first.log, first.index, first.timeindex))
    assert maker.take(SegmentPaths.of(tmp_path, 10)) is not None  # the next roll takes it
    maker.close()


def test_a_start_by_timestamp_opens_only_the_segment_it_starts_in(tmp_path):
    """The segments' newest timestamps (read once, without mapping) pick the segment; only it is mapped.
    Timestamps may go back across segments: the first message at or after the time is still found."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic("t", segment_max_messages=10)
        stamps = [1_000 * (i // 10) + (i % 10) for i in range(400)]
        stamps[200:210] = [5 + i for i in range(10)]  # one segment of old timestamps in the middle
        with topic.producer() as producer:
            for start in range(0, 400, 10):
                producer.send_batch(values(10), timestamps=stamps[start:start + 10])
    with seglog.open(data, background=False) as log:
        topic = log.topic("t")
        for target in (0, 7, 9_000, 9_004, 25_000, 39_009, 39_010):
            expected = next((i for i, s in enumerate(stamps) if s >= target), len(stamps))
            with topic.reader({"timestamp": target}) as reader:
                assert reader.offset == expected, target
        assert len(topic.partition_view(0).views) <= len(
            {expected // 10 for expected in (0, 7, 9_000, 9_004, 25_000, 39_009, 39_010)} | {39})
