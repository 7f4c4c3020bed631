"""Crash safety: a writer process SIGKILLed in the middle of heavy appends loses nothing it acknowledged.

A child process appends in a tight loop (send_batch of 1000 self-describing 100-byte values, and every
fourth round 300 send() calls and a flush()) and, after each call returns, writes the number of messages
acknowledged so far to its stdout pipe. The test kills it with SIGKILL at a varied moment, reopens the log
and checks: it opens; every acknowledged message is there, dense from offset 0, in order, with its content
and key, through read_batch and through iteration; the writer's recovery reports no damage; a new producer
continues at the end; `check_log` finds every CRC sound; and a second crash of the same data directory is
recovered as well. Small segments make rolls happen under the kill."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import seglog
from helpers_storage import (
    SEND_KIND,
    describe_exit,
    iterate_check,
    key_for,
    partition_dir,
    python_command,
    read_all,
    segment_logs,
    value_for,
    values_for,
    walk_batches,
)
from seglog.storage.check import check_log, repair_log

TOPIC = "acme/ingest/crash"

# The writer process. argv: data directory, topic, segment size. Prints "start <offset>" once its producer
# is open, then after every call the offset after the last acknowledged message.
WRITER = """
import os, sys
import seglog
from seglog.errors import TopicNotFoundError
from helpers_storage import SEND_KIND, key_for, value_for, values_for

def fail(message):
    sys.stderr.write(message + "\\n")
    sys.stderr.flush()
    os._exit(3)

data, name, segment_size = sys.argv[1:4]
log = seglog.open(data)
try:
    topic = log.topic(name)
except TopicNotFoundError:
    topic = log.create_topic(name, segment_size=segment_size)
producer = topic.producer()
offset = topic.end_offset()
os.write(1, b"start %d\\n" % offset)
calls = 0
while True:
    calls += 1
    if calls % 4 == 0:
        for i in range(300):
            message_id = producer.send(value_for(offset + i, SEND_KIND), key=key_for(offset + i))
            if message_id.offset != offset + i:
                fail(f"send returned {message_id}, expected offset {offset + i}")
        producer.flush()
        offset += 300
    else:
        message_id = producer.send_batch(values_for(offset, 1000))
        if message_id.offset != offset:
            fail(f"send_batch returned {message_id}, expected offset {offset}")
        offset += 1000
    os.write(1, b"%d\\n" % offset)
"""


class WriterProcess:
    """The writer child and a thread draining its pipe (so it never blocks on a full pipe)."""

    def __init__(self, data: Path, segment_size: str) -> None:
        self.stderr_path = data.parent / f"writer-{time.monotonic_ns()}.stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - open for the child's lifetime
        self.process = subprocess.Popen(python_command(WRITER, str(data), TOPIC, segment_size),
                                        stdout=subprocess.PIPE, stderr=self._stderr)
        self.start_offset: int | None = None
        self.acknowledged: int | None = None
        self.reports = 0
        self.first_ack = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        for line in self.process.stdout:
            if line.startswith(b"start "):
                self.start_offset = int(line.split()[1])
                self.acknowledged = self.start_offset
            else:
                self.acknowledged = int(line)
                self.reports += 1
                self.first_ack.set()
        self.first_ack.set()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def kill_after(self, delay: float) -> None:
        """Wait for the first acknowledged call, let it append for `delay` s more, then SIGKILL it."""
        if not self.first_ack.wait(60):
            self.process.kill()
        time.sleep(delay)
        alive = self.process.poll() is None
        if alive:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._thread.join(30)
        self.process.stdout.close()
        self._stderr.close()
        assert alive, (f"the writer ended by itself before the kill ({describe_exit(self.process.returncode)}):\n"
                       f"{self.stderr()}")
        assert self.process.returncode == -signal.SIGKILL
        assert self.reports > 0, f"the writer acknowledged nothing before the kill:\n{self.stderr()}"


def recover_and_verify(data: Path, acknowledged: int, caplog: pytest.LogCaptureFixture) -> int:
    """Reopen a crashed data directory and check everything the crash may not have broken; returns the
    partition's end offset after a few appends of its own."""
    # A reader that changes nothing applies the commit rule in memory: what the dead writer indexed.
    with seglog.open(data, background=False) as log:
        topic = log.topic(TOPIC)
        published = read_all(topic)
        assert published >= acknowledged, (f"only {published} messages readable after the crash, "
                                           f"but {acknowledged} were acknowledged")
        assert topic.end_offset() == published
    with seglog.open(data) as log:  # recovers the partition: nobody else writes it
        topic = log.topic(TOPIC)
        assert topic.end_offset() == published
        assert read_all(topic) == published
        iterate_check(topic, max(0, published - 2500), published)

        caplog.clear()
        with caplog.at_level(logging.INFO, logger="seglog"):
            producer = topic.producer()
        complaints = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert not complaints, f"recovering a crashed writer's partition reported damage: {complaints}"

        end = topic.end_offset()
        assert end == published, f"the writer's recovery moved the end from {published} to {end}"
        assert read_all(topic) == end
        iterate_check(topic, 0, min(end, 2500), at_end=end <= 2500)

        assert producer.send_batch(values_for(end, 500)) == (0, end)
        for i in range(end + 500, end + 510):
            assert producer.send(value_for(i, SEND_KIND), key=key_for(i)) == (0, i)
        producer.close()
        end += 510
        assert topic.end_offset() == end
        assert read_all(topic) == end

    report = check_log(data)
    assert report.ok, f"check_log after recovery: {[str(p) for p in report.problems]}"
    directory = partition_dir(data, TOPIC)
    logs = segment_logs(directory)
    assert report.segments == len(logs)
    assert report.batches == sum(len(walk_batches(path)) for path in logs)
    return end


# segment size, seed of the kill delays. Small segments roll two or three times per send_batch call.
CASES = [("64 KiB", 1), ("64 KiB", 2), ("256 KiB", 3), ("4 MiB", 4), ("64 KiB", 5)]


@pytest.mark.slow
@pytest.mark.parametrize(("segment_size", "seed"), CASES, ids=[f"{s.replace(' ', '')}-seed{n}" for s, n in CASES])
def test_sigkill_during_appends_loses_nothing_acknowledged(tmp_path: Path, segment_size: str, seed: int,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data"
    end = 0
    for crash in range(2):
        delay = rng.uniform(0.0, 0.25)
        writer = WriterProcess(data, segment_size)
        writer.kill_after(delay)
        assert writer.start_offset == end, f"the writer started at offset {writer.start_offset}, not at {end}"
        acknowledged = writer.acknowledged
        if crash == 1:
            # `seglog repair` on the crashed directory: a torn tail may be cut, but a crash is no damage.
            damaged = repair_log(data).damaged
            assert damaged == [], f"repair after a crash (kill after {delay:.3f} s) reported damage: {damaged}"
        end = recover_and_verify(data, acknowledged, caplog)
        assert end >= acknowledged + 510


def end_offset_seen_by_opening(data: Path, background: bool) -> int:
    """The parent's own look at the crashed directory: a reader that changes nothing (background=False)
    applies the commit rule in memory, a default open recovers the partition first."""
    with seglog.open(data, background=background) as log:
        topic = log.topic(TOPIC)
        end = topic.end_offset()
        assert read_all(topic) == end, "readers and end_offset() disagree"
    return end


@pytest.mark.slow
def test_crash_loop_every_process_sees_the_partition_the_next_writer_continues(tmp_path: Path) -> None:
    """20 SIGKILLs at random moments (rolls included): each time the parent opens the directory itself and
    learns the end offset, and the next writer must start exactly there, with every acknowledged message
    kept and nothing else."""
    rng = random.Random(20)
    data = tmp_path / "data"
    learned = 0
    for crash in range(20):
        writer = WriterProcess(data, rng.choice(["64 KiB", "256 KiB"]))
        writer.kill_after(rng.uniform(0.0, 0.15))
        assert writer.start_offset == learned, \
            f"round {crash}: the writer started at {writer.start_offset}, the parent had seen {learned}"
        learned = end_offset_seen_by_opening(data, background=crash % 2 == 0)
        assert learned >= writer.acknowledged, f"round {crash}: {writer.acknowledged} acknowledged, {learned} kept"
        if crash % 2 == 0:  # the recovering open must agree with the reader that changed nothing
            assert end_offset_seen_by_opening(data, background=True) == learned
    report = check_log(data)
    assert report.ok, [str(p) for p in report.problems]
