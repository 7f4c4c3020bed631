"""A reader in another process never gets SIGBUS from what a writer does to the files it maps (issue 26,
third defect of the core): a writer's recovery lost published batches (bit rot in the last one), and its
clean close then cut the log under the map of a reader that held those batches. The recovery now leaves
that file whole to its readers and writes the kept batches to a new one (recovery._seal_lost).

Process-crossing: looped (LOOPS) so that a flaky pass cannot hide a failure."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import seglog
from helpers_storage import flip_byte, paused_reader, resume
from seglog.storage.check import check_log
from seglog.storage.segment import CLEAN_MARKER, SegmentPaths, list_segments

LOOPS = 20
TOPIC = "t"
BIG = 50  # messages of 4 KiB in the last batch: it spans whole pages, as a cut needs to matter
ENV = {**os.environ, "PYTHONPATH": str(Path(seglog.__file__).parents[1])}

WRITER = """
import os, sys, seglog
log = seglog.open(sys.argv[1])
topic = log.create_topic("t", segment_size="1 MiB")
producer = topic.producer()
producer.send_batch([b"small-%d" % i for i in range(100)])
producer.send_batch([(b"big-%d:" % i).ljust(4096, b"b") for i in range(50)])
os._exit(0)  # no close, as a SIGKILL: the index published both batches
"""

# Reads everything and keeps the batches (their buffers point into the maps), says how many messages,
# then, when told, touches every byte of them again and reads the partition again from the start.
READER = """
import hashlib, sys, seglog

def digest(batches):
    digest = hashlib.sha256()
    for batch in batches:
        for buffer in batch.column("value").buffers():
            if buffer is not None:
                digest.update(memoryview(buffer))
    return digest.hexdigest()

log = seglog.open(sys.argv[1], background=False)
topic = log.topic("t")
reader = topic.reader("earliest", verify_crc=False)
kept = []
while (batch := reader.read_batch()) is not None:
    kept.append(batch)
print(sum(b.num_rows for b in kept), digest(kept), flush=True)
sys.stdin.readline()
print(digest(kept), flush=True)
again = topic.reader("earliest")
print(sum(1 for _ in again), flush=True)
again.close()
reader.close()
log.close()
"""


def run_once(data: Path) -> None:
    subprocess.run([sys.executable, "-c", WRITER, str(data)], check=True, env=ENV)
    directory = data / "topics" / "public" / "default" / TOPIC / "0"
    log_file = SegmentPaths.of(directory, 0).log
    assert not (directory / CLEAN_MARKER).exists()

    with paused_reader(READER, str(data)) as reader:
        count, read_digest = reader.stdout.readline().split()
        assert int(count) == 100 + BIG
        # Bit rot in the CRC of the last published batch, after the reader read it: recovery must cut the
        # batch, whose values the reader still holds.
        offsets = (directory / f"{0:020d}.index").read_bytes()
        flip_byte(log_file, int.from_bytes(offsets[8:16], "little") + 8)

        with seglog.open(data) as log:  # this process recovers, appends a little and closes cleanly
            topic = log.topic(TOPIC)
            assert topic.end_offset() == 100
            with topic.producer() as producer:
                assert producer.send_batch([b"after"]) == (0, 100)
        assert (directory / CLEAN_MARKER).exists()

        digest, count = resume(reader).split()
    assert digest == read_digest  # every byte of the batches it holds is still there, as it read them
    assert int(count) == 101  # the reader, still open, follows the recovered partition: 100 kept, 1 new
    assert check_log(data).ok
    assert list_segments(directory) == [0, 100]  # the lost batch's segment ends at the commit point


@pytest.mark.parametrize("attempt", range(LOOPS))
def test_a_reader_in_another_process_survives_a_recovery_that_lost_published_batches(tmp_path, attempt):
    run_once(tmp_path / "data")


def test_a_copy_left_by_a_crash_in_the_middle_of_recovery_is_removed(tmp_path):
    data = tmp_path / "data"
    subprocess.run([sys.executable, "-c", WRITER, str(data)], check=True, env=ENV)
    directory = data / "topics" / "public" / "default" / TOPIC / "0"
    leftover = directory / f"{0:020d}.log.recovered"
    leftover.write_bytes(b"a copy a SIGKILL interrupted")
    with seglog.open(data) as log:
        assert log.topic(TOPIC).end_offset() == 100 + BIG
    assert not leftover.exists()
    assert check_log(data).ok
