"""A reader that mapped the newest segment before another open recovered it reads the partition as recovered
(issue 26, follow-up of the recovery that never cuts a published batch under a map):

- a recovery that lost published batches renames a copy of the kept ones over the log: a view that mapped
  the old file maps the log again when its inode changed, as it does for the index files;
- a recovery that cut the reserve after the published batches, then died before marking the partition
  clean, leaves a view's map longer than the file: the commit rule's scan of it, in memory, must stop at the
  file's end, past which a touch is a SIGBUS.

Process-crossing: looped (LOOPS) so that a flaky pass cannot hide a failure."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import seglog
from helpers_storage import flip_byte, paused_reader, resume
from seglog.storage.segment import CLEAN_MARKER, SegmentPaths, list_segments

LOOPS = 20
ENV = {**os.environ, "PYTHONPATH": str(Path(seglog.__file__).parents[1])}

# Writes one batch of the values given and dies without closing: the index published it.
WRITER = """
import os, sys, seglog
log = seglog.open(sys.argv[1])
producer = log.create_topic("t", segment_size="1 MiB").producer()
producer.send_batch([value.encode() for value in sys.argv[2:]])
os._exit(0)
"""

# Opens the log, which recovers the partition, and is killed as it marks it cleanly closed.
RECOVERER = """
import os, signal, sys, seglog
import seglog.storage.check
seglog.storage.check.mark_recovered = lambda directory: os.kill(os.getpid(), signal.SIGKILL)
seglog.open(sys.argv[1])
"""

# Maps the partition (end_offset) and says its end; when told, reads it again from the start.
READER = """
import sys, seglog
log = seglog.open(sys.argv[1], background=False)
topic = log.topic("t")
print(topic.end_offset(), flush=True)
sys.stdin.readline()
print(topic.end_offset(), sum(len(message.value) for message in topic.reader("earliest")), flush=True)
log.close()
"""


def write_and_die(data: Path, values: list[str]) -> SegmentPaths:
    subprocess.run([sys.executable, "-c", WRITER, str(data), *values], check=True, env=ENV)
    directory = data / "topics" / "public" / "default" / "t" / "0"
    assert not (directory / CLEAN_MARKER).exists()
    return SegmentPaths.of(directory, 0)


def test_a_view_maps_again_a_log_that_recovery_replaced(tmp_path):
    data = tmp_path / "data"
    paths = write_and_die(data, [f"lost-{i}" for i in range(10)])
    with seglog.open(data, background=False) as reading:  # changes nothing: follows the commit rule in memory
        topic = reading.topic("t")
        assert topic.end_offset() == 10  # the view maps the segment
        flip_byte(paths.log, 8)  # bit rot in the CRC of the only batch: recovery keeps nothing of the segment
        inode = paths.log.stat().st_ino
        with seglog.open(data) as writing:  # recovers: an empty copy renamed over the log, which takes the writes
            assert writing.topic("t").end_offset() == 0
            with writing.topic("t").producer() as producer:
                assert producer.send_batch([b"new-0", b"new-1"]) == (0, 0)
        assert list_segments(paths.log.parent) == [0] and paths.log.stat().st_ino != inode

        # The view maps the new file: the old one's bytes are not the batch the new index names.
        assert topic.end_offset() == 2
        assert [message.value for message in topic.reader("earliest")] == [b"new-0", b"new-1"]


def run_cut_under_the_map(data: Path) -> None:
    # One batch of exactly one page: the file cut after it ends on a page boundary, so a scan of the map
    # that reads the next header there touches a page past the end of the file.
    paths = write_and_die(data, ["v" * 4016])
    assert paths.log.stat().st_size == 1 << 20  # sized whole while active
    flip_byte(paths.timeindex, 0)  # a damaged index entry: the recovery rewrites the index files
    with paused_reader(READER, str(data)) as reader:
        assert reader.stdout.readline().split() == ["1"]
        recovery = subprocess.run([sys.executable, "-c", RECOVERER, str(data)], env=ENV, capture_output=True)
        assert recovery.returncode == -9, recovery.stderr.decode()[-2000:]
        assert paths.log.stat().st_size == 4096  # cut to its published batch
        assert not (paths.log.parent / CLEAN_MARKER).exists()  # killed before marking it clean
        assert resume(reader).split() == ["1", "4016"]


@pytest.mark.parametrize("attempt", range(LOOPS))
def test_the_commit_rule_in_memory_scans_no_further_than_the_file(tmp_path, attempt):
    run_cut_under_the_map(tmp_path / "data")
