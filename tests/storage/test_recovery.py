"""One partition for every process after an unclean stop (docs/FORMAT.md, Recovery): the index entry is
the commit point, so what the dead writer published, as far as its log holds it soundly, is what readers
of any process see, what `end_offset()` counts, what `seglog check` expects and what the next writer
keeps. `seglog.open` recovers a partition nobody writes; a process that changes nothing applies the same
rule in memory; a clean reopen reads no log."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

import seglog
from helpers_storage import (
    HEADER_BYTES,
    check_batch,
    flip_byte,
    partition_dir,
    python_command,
    read_all,
    segment_logs,
    spawn_call,
    value_for,
    values_for,
    walk_batches,
)
from seglog.errors import CorruptLogError, IndexMismatchError
from seglog.storage import segment
from seglog.storage.check import check_log, repair_log
from seglog.storage.recovery import recover_partition

TOPIC = "acme/ops/recovery"
CLEAN_MARKER = ".clean-shutdown"

# A writer that appends 150 messages in two batches and is SIGKILLed. With "unindexed" its third batch is
# copied whole into the segment and the writer dies before it publishes the batch's index entry.
CRASHING_WRITER = """
import os, signal, sys
import seglog
from seglog.storage import writer
from helpers_storage import values_for

data, name, mode = sys.argv[1:4]
log = seglog.open(data)
producer = log.create_topic(name, segment_size="1 MiB").producer()
producer.send_batch(values_for(0, 100))
producer.send_batch(values_for(100, 50))
if mode == "unindexed":
    def copy_and_die(self, source, start, stop, base_offset):
        source.write(self.data, self.end_position, base_offset, start, stop)
        os.kill(os.getpid(), signal.SIGKILL)
    writer.ActiveSegment.write = copy_and_die
    producer.send_batch(values_for(150, 30))
os.kill(os.getpid(), signal.SIGKILL)
"""


def crash_writer(data: Path, mode: str) -> Path:
    """Run CRASHING_WRITER to its SIGKILL; returns the partition's only segment log."""
    result = subprocess.run(python_command(CRASHING_WRITER, str(data), TOPIC, mode), capture_output=True,
                            timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode(errors="replace")
    (log_file,) = segment_logs(partition_dir(data, TOPIC))
    assert not (partition_dir(data, TOPIC) / CLEAN_MARKER).exists()
    return log_file


def end_and_count(data: str, background: bool) -> tuple[int, int]:
    """In another process: the end offset and the number of messages read, every one checked."""
    with seglog.open(data, background=background) as log:
        topic = log.topic(TOPIC)
        return topic.end_offset(), read_all(topic)


def test_a_copied_but_unindexed_batch_is_no_part_of_the_partition_anywhere(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log_file = crash_writer(data, "unindexed")
    assert [b.next_offset for b in walk_batches(log_file)] == [100, 150, 180], "the third batch was not copied"

    # Readers that change nothing, in another process and in this one, and the check, before recovery.
    assert spawn_call(end_and_count, str(data), False) == (150, 150)
    with seglog.open(data, background=False) as log:
        assert log.topic(TOPIC).end_offset() == 150
    report = check_log(data)
    assert report.ok, [str(p) for p in report.problems]
    assert [(Path(n.path), n.position) for n in report.notes] == [(log_file, walk_batches(log_file)[1].end)]

    with seglog.open(data) as log:  # recovers, then the next writer continues exactly there
        topic = log.topic(TOPIC)
        assert topic.end_offset() == 150
        with topic.producer() as producer:
            assert producer.send(value_for(150)) == (0, 150)
        reader = topic.reader(150)
        batch = reader.read_batch()
        assert check_batch(batch, 150) == 1 and reader.read_batch() is None
    assert check_log(data).ok and check_log(data).notes == []


def test_open_recovers_a_damaged_last_batch_and_readers_never_see_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log_file = crash_writer(data, "complete")
    first, second = walk_batches(log_file)
    flip_byte(log_file, second.end - 5)  # bit rot in the last published batch of the dead writer

    assert spawn_call(end_and_count, str(data), False) == (100, 100)  # the rule in memory, nothing changed
    assert not (partition_dir(data, TOPIC) / CLEAN_MARKER).exists()
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        assert (topic.end_offset(), read_all(topic)) == (100, 100)  # cut, not raised as CorruptLogError
    assert (partition_dir(data, TOPIC) / CLEAN_MARKER).exists(), "the recovered partition is not marked clean"
    assert log_file.read_bytes()[first.end:] == bytes(log_file.stat().st_size - first.end)
    assert check_log(data).ok
    with seglog.open(data) as log, log.topic(TOPIC).producer() as producer:
        assert producer.send_batch(values_for(100, 10)) == (0, 100)


def test_a_clean_reopen_reads_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, partitions=3, segment_size="4 KiB")
        with topic.producer() as producer:
            for _ in range(20):
                producer.send_batch(values_for(0, 10))
    scans = []
    original = segment.scan_log
    monkeypatch.setattr(segment, "scan_log", lambda *a, **k: scans.append(a) or original(*a, **k))
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        with topic.producer() as producer:
            producer.send_batch(values_for(0, 10), partition=0)
        assert [topic.end_offset(p) for p in range(3)] == [80, 70, 60]
    assert scans == [], f"a clean reopen scanned {len(scans)} logs"


def test_an_active_segment_zeroed_after_a_crash_is_reported_and_not_appended_after(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log_file = crash_writer(data, "complete")
    log_file.write_bytes(bytes(log_file.stat().st_size))  # what a power loss can leave

    problems = check_log(data).problems
    assert [(Path(p.path), p.position) for p in problems] == [(log_file, 0)], [str(p) for p in problems]
    assert "the index names 2 batches" in problems[0].reason
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        assert topic.end_offset() == 0
        with topic.producer() as producer:
            assert producer.send_batch(values_for(0, 5)) == (0, 0)
        assert read_all(topic) == 5
    assert check_log(data).ok


def test_a_log_zeroed_after_a_clean_close_is_found_without_a_scan(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log, log.create_topic(TOPIC).producer() as producer:
        producer.send_batch(values_for(0, 100))
    (log_file,) = segment_logs(partition_dir(data, TOPIC))
    log_file.write_bytes(bytes(log_file.stat().st_size))
    assert not check_log(data).ok
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        with topic.producer() as producer:  # the writer's recovery sees the last header is gone
            assert producer.send_batch(values_for(0, 5)) == (0, 0)
        assert read_all(topic) == 5


def test_a_crash_between_the_two_index_trims_of_a_roll_is_no_damage(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log_file = crash_writer(data, "complete")
    count = len(walk_batches(log_file))
    # The log and .index trimmed, .timeindex not yet: what a SIGKILL in the middle of sealing leaves.
    log_file.write_bytes(log_file.read_bytes()[:walk_batches(log_file)[-1].end])
    index = log_file.with_suffix(".index")
    index.write_bytes(index.read_bytes()[:(count + 1) * 16])
    assert index.stat().st_size < log_file.with_suffix(".timeindex").stat().st_size

    report = check_log(data)
    assert report.ok and report.notes == [], [str(p) for p in report.problems + report.notes]
    assert spawn_call(end_and_count, str(data), False) == (150, 150)
    assert spawn_call(end_and_count, str(data), True) == (150, 150)
    with seglog.open(data) as log, log.topic(TOPIC).producer() as producer:
        assert producer.send_batch(values_for(150, 5)) == (0, 150)


# --- a damaged index ----------------------------------------------------------------------------------------

def sealed_log(tmp_path: Path) -> tuple[Path, Path]:
    """A partition of several sealed segments of several batches each; returns (data, a sealed segment)."""
    data = tmp_path / "data"
    with seglog.open(data) as log, log.create_topic(TOPIC, segment_size="16 KiB").producer() as producer:
        for i in range(20):
            producer.send_batch(values_for(40 * i, 40))
    logs = segment_logs(partition_dir(data, TOPIC))
    assert len(logs) > 4 and len(walk_batches(logs[1])) == 3
    return data, logs[1]


def flip_entry(index: Path, entry: int, column: int, mask: int) -> None:
    """Flip bits of one int64 of an index entry (column 0: next_offset, 1: end_position)."""
    flip_byte(index, entry * 16 + column * 8, mask)


@pytest.mark.parametrize(("column", "mask"), [(0, 0x01), (0, 0x40), (1, 0x08), (1, 0x80)],
                         ids=["next-offset-low", "next-offset-high", "end-low", "end-high"])
def test_a_flipped_bit_in_an_index_entry_is_found_and_rebuilt(tmp_path: Path, column: int, mask: int,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    data, sealed = sealed_log(tmp_path)
    index = sealed.with_suffix(".index")
    original = index.read_bytes()
    flip_entry(index, 0, column, mask)

    with seglog.open(data) as log:  # reads go on by the log and say why, never stop early or blame the log
        topic = log.topic(TOPIC)
        assert read_all(topic) == 800
        assert read_all(topic, start=60) == 800  # the end reached
    problems = check_log(data).problems
    assert [Path(p.path) for p in problems] == [index], [str(p) for p in problems]
    assert repair_log(data).rebuilt_indexes == 1
    assert index.read_bytes() == original
    assert check_log(data).ok


def test_a_flipped_index_entry_of_a_live_writer_is_reported_naming_the_index(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC)
        with topic.producer() as producer:
            producer.send_batch(values_for(0, 10))
            producer.send_batch(values_for(10, 10))
            (log_file,) = segment_logs(partition_dir(data, TOPIC))
            flip_entry(log_file.with_suffix(".index"), 0, 1, 0x08)
            with pytest.raises(IndexMismatchError) as raised:
                read_all(topic)
    assert str(log_file.with_suffix(".index")) in str(raised.value)
    assert isinstance(raised.value, CorruptLogError)


# --- the crash loop -----------------------------------------------------------------------------------------

def test_a_reader_process_survives_recovery_cutting_what_it_has_mapped(tmp_path: Path) -> None:
    """A reader that mapped a dead writer's segment before a recovery cut a damaged batch out of it gets an
    answer, never SIGBUS: the damaged batch is zeroed in place, the file is not cut under its map."""
    data = tmp_path / "data"
    log_file = crash_writer(data, "complete")
    first, second = walk_batches(log_file)
    flip_byte(log_file, second.position + HEADER_BYTES + 8)
    assert spawn_call(read_across_recovery, str(data)) == (100, 100, 110)


def read_across_recovery(data: str) -> tuple[int, int, int]:
    """Map the segment by reading it, let another process recover it and append, read on."""
    with seglog.open(data, background=False, verify_crc=True) as log:
        topic = log.topic(TOPIC)
        reader = topic.reader("earliest")
        first = reader.read_batch()
        end_before = topic.end_offset()
        subprocess.run(python_command(APPEND_AFTER_RECOVERY, data, TOPIC), check=True, timeout=60)
        rest = []
        while (batch := reader.read_batch()) is not None:
            rest.append(batch)
        offsets = np.concatenate([first.column("offset").to_numpy(), *[b.column("offset").to_numpy() for b in rest]])
        assert (offsets == np.arange(len(offsets))).all()
        return end_before, first.num_rows, topic.end_offset()


APPEND_AFTER_RECOVERY = """
import sys
import seglog
from helpers_storage import values_for
data, name = sys.argv[1:3]
with seglog.open(data) as log, log.topic(name).producer() as producer:
    assert producer.send_batch(values_for(100, 10)).offset == 100
"""


def test_a_clean_partition_whose_newest_segment_files_are_empty_reopens(tmp_path: Path) -> None:
    """A segment whose log and index files are all empty holds no batch: recovery of a clean partition finds
    nothing to check in it (it took the missing index rows for an index: a ValueError)."""
    paths = segment.SegmentPaths.of(tmp_path, 0)
    for path in (paths.log, paths.index, paths.timeindex):
        path.write_bytes(b"")
    (tmp_path / CLEAN_MARKER).touch()
    report = recover_partition(tmp_path)
    assert report.clean
    assert paths.log.stat().st_size == 0
