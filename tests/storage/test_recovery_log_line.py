"""What recovery says it cut after an unclean stop: the space allocated ahead of the writer (zeros, never
written), the bytes of an append that was never acknowledged, or acknowledged batches lost to damage, and
how many messages were lost ("none" unless acknowledged batches were)."""

from __future__ import annotations

import logging
import signal
import subprocess
from pathlib import Path

import seglog
from helpers_storage import partition_dir, python_command, segment_logs, walk_batches
from seglog.storage.check import repair_log
from seglog.units import readable_size

TOPIC = "t"
RECOVERY_LOGGER = "seglog.storage.recovery"

# Appends 100 and 50 messages in two batches, then is SIGKILLed; with "unindexed" its third batch (30
# messages) is copied into the segment and the writer dies before it publishes the batch's index entry.
CRASHING_WRITER = """
import os, signal, sys
import seglog
from seglog.storage import writer

data, mode = sys.argv[1:3]
producer = seglog.open(data).create_topic("t", segment_size="1 MiB").producer()
producer.send_batch([b"m%d" % i for i in range(100)])
producer.send_batch([b"m%d" % i for i in range(100, 150)])
if mode == "unindexed":
    def copy_and_die(self, source, start, stop, base_offset):
        source.write(self.data, self.end_position, base_offset, start, stop)
        os.kill(os.getpid(), signal.SIGKILL)
    writer.ActiveSegment.write = copy_and_die
    producer.send_batch([b"m%d" % i for i in range(150, 180)])
os.kill(os.getpid(), signal.SIGKILL)
"""


def crash_writer(data: Path, mode: str) -> Path:
    result = subprocess.run(python_command(CRASHING_WRITER, str(data), mode), capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr.decode(errors="replace")
    (log_file,) = segment_logs(partition_dir(data, TOPIC))
    return log_file


def recovery_lines(caplog, data: Path) -> list[logging.LogRecord]:
    with caplog.at_level(logging.INFO, logger=RECOVERY_LOGGER):
        with seglog.open(data):
            pass
    return [r for r in caplog.records if r.name == RECOVERY_LOGGER and " cut " in r.getMessage()]


def test_unused_preallocated_space_is_said_to_be_never_written_and_nothing_lost(tmp_path, caplog):
    log_file = crash_writer(tmp_path, "flushed")
    size, end = log_file.stat().st_size, walk_batches(log_file)[-1].end
    (line,) = recovery_lines(caplog, tmp_path)
    assert line.levelno == logging.INFO  # nothing that was written is gone
    assert line.getMessage() == (
        f"{log_file}: cut {size - end} bytes ({readable_size(size - end)}) after the last committed batch at byte "
        f"{end}: {size - end} bytes of space allocated ahead of the writer and never written (zeros); "
        "messages lost: none")


def test_an_unfinished_append_is_told_apart_from_unused_space(tmp_path, caplog):
    log_file = crash_writer(tmp_path, "unindexed")
    batches = walk_batches(log_file)
    size, committed, unfinished = log_file.stat().st_size, batches[1].end, batches[2].end - batches[1].end
    (line,) = recovery_lines(caplog, tmp_path)
    assert line.levelno == logging.WARNING
    message = line.getMessage()
    assert f"after the last committed batch at byte {committed}: {unfinished} bytes of an unfinished append " \
           f"(never acknowledged) and {size - committed - unfinished} bytes of space allocated ahead of the " \
           "writer and never written (zeros); messages lost: none" in message


def test_acknowledged_batches_lost_to_damage_are_counted(tmp_path, caplog):
    log_file = crash_writer(tmp_path, "flushed")
    second = walk_batches(log_file)[1]
    with open(log_file, "r+b") as file:  # a byte of the second batch's payload changes: its CRC fails
        file.seek(second.end - 1)
        byte = file.read(1)[0]
        file.seek(second.end - 1)
        file.write(bytes([byte ^ 0xFF]))
    (line,) = recovery_lines(caplog, tmp_path)
    assert line.levelno == logging.WARNING
    message = line.getMessage()
    assert "bytes of batches lost to damage (CRC32C mismatch (corrupt batch))" in message
    assert message.endswith("; messages lost: 50 (offsets 100 to 149)")


def test_repair_reports_the_unused_space_it_cut(tmp_path):
    log_file = crash_writer(tmp_path, "unindexed")
    batches = walk_batches(log_file)
    size, committed, unfinished = log_file.stat().st_size, batches[1].end, batches[2].end - batches[1].end
    repaired = repair_log(tmp_path)
    assert (repaired.cut_bytes, repaired.unused_bytes) == (size - committed, size - committed - unfinished)
