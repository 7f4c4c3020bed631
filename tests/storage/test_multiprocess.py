"""Many processes, one partition: readers in other processes follow the writer (across segment rolls),
a second writing process is refused at once with the lock file and the holder's pid, and batches handed
out by a reader are views of the memory map that outlive the reader, the log and the files."""

from __future__ import annotations

import faulthandler
import gc
import multiprocessing
import os
import signal
import time
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import seglog
from helpers_storage import (
    SEND_KIND,
    check_batch,
    describe_exit,
    key_for,
    partition_dir,
    read_all,
    segment_logs,
    spawn_call,
    value_for,
    values_for,
    walk_batches,
)
from seglog.errors import PartitionLockedError

TOPIC = "acme/mp/events"
SPAWN = multiprocessing.get_context("spawn")


class Child:
    """A spawned process that runs `target(data, connection)` and talks over a pipe. As a context manager
    it checks on a clean exit of the block that the child ended well (exit code 0, or SIGKILL after
    `kill()`); when the block fails it only makes sure the child is gone."""

    def __init__(self, target: Any, data: Path) -> None:
        self.connection, child_end = SPAWN.Pipe()
        self.process = SPAWN.Process(target=target, args=(str(data), child_end), daemon=True)
        self.process.start()
        child_end.close()
        self.pid = self.process.pid
        self.expected_exit = 0

    def receive(self, timeout: float = 30) -> Any:
        if not self.connection.poll(timeout):
            raise AssertionError(f"no answer from the child within {timeout} s "
                                 f"({describe_exit(self.process.exitcode)})")
        try:
            message = self.connection.recv()
        except EOFError:
            self.process.join(10)
            raise AssertionError(f"the child died: {describe_exit(self.process.exitcode)}") from None
        if message[0] == "error":
            raise AssertionError(f"the child failed:\n{message[1]}")
        return message

    def send(self, *message: Any) -> None:
        self.connection.send(message)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.process.join(10)
        self.expected_exit = -signal.SIGKILL

    def __enter__(self) -> Child:  # noqa: PYI034
        return self

    def __exit__(self, failure: type[BaseException] | None, *_: object) -> None:
        self.connection.close()
        self.process.join(30 if failure is None else 1)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
        exitcode = self.process.exitcode
        self.process.close()
        if failure is None:
            assert exitcode == self.expected_exit, f"the child ended badly: {describe_exit(exitcode)}"


def _serve(connection: Any, handle: Any) -> None:
    faulthandler.enable()  # a crash of the child prints where it happened into the test's output
    try:
        handle()
    except BaseException:  # noqa: BLE001 - reported to the test
        connection.send(("error", traceback.format_exc()))
    finally:
        connection.close()


# --- a reader process following the writer -----------------------------------------------------------------

def follower(data: str, connection: Any) -> None:
    """Reads the partition from the start. On ("read", target, timeout) it answers ("waiting", t) and reads
    with read_batch(timeout) until offset `target` or until a wait times out, then answers
    ("read", offset reached, t when done); t is time.monotonic(), which is system-wide on Linux."""
    def run() -> None:
        with seglog.open(data) as log:
            reader = log.topic(TOPIC).reader("earliest")
            offset = 0
            connection.send(("ready", reader.offset))
            while (command := connection.recv())[0] == "read":
                _, target, timeout = command
                connection.send(("waiting", time.monotonic()))
                while offset < target:
                    batch = reader.read_batch(timeout=timeout)
                    if batch is None:
                        break
                    offset += check_batch(batch, offset)
                connection.send(("read", offset, time.monotonic()))
            reader.close()
    _serve(connection, run)


def test_reader_process_sees_messages_appended_later(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, segment_size="64 KiB")
        with Child(follower, data) as child:
            assert child.receive() == ("ready", 0)  # the partition has no segment yet: no writer opened it

            # 1. The reader waits in read_batch(timeout) before the first message exists.
            child.send("read", 1000, 20.0)
            _, waiting_since = child.receive()
            time.sleep(0.2)
            producer = topic.producer()
            written_at = time.monotonic()
            assert producer.send_batch(values_for(0, 1000)) == (0, 0)
            _, reached, done_at = child.receive()
            assert reached == 1000
            assert waiting_since < written_at <= done_at
            end = 1000

            # 2. While the reader is idle, the segments it has mapped fill up, are sealed (trimmed) and new
            #    ones rolled; then it catches up across all of them.
            for _ in range(15):
                assert producer.send_batch(values_for(end, 150)) == (0, end)
                end += 150
            for offset in range(end, end + 40):
                producer.send(value_for(offset, SEND_KIND), key=key_for(offset))
            producer.flush()
            end += 40
            assert len(segment_logs(partition_dir(data, TOPIC))) >= 6
            child.send("read", end, 20.0)
            child.receive()
            assert child.receive()[1] == end

            # 3. Both at once: the reader waits with a timeout while the writer appends in small steps.
            target = end + 30 * 120 + 30 * 5
            child.send("read", target, 20.0)
            child.receive()
            for _ in range(30):
                assert producer.send_batch(values_for(end, 120)) == (0, end)
                end += 120
                for offset in range(end, end + 5):
                    producer.send(value_for(offset, SEND_KIND), key=key_for(offset))
                producer.flush()
                end += 5
                time.sleep(0.005)
            assert end == target
            assert child.receive()[1] == target

            # 4. Nothing more: the wait ends with the timeout and no message.
            child.send("read", target + 1, 0.2)
            _, waiting_since = child.receive()
            _, reached, done_at = child.receive()
            assert reached == target and done_at - waiting_since >= 0.2
            producer.close()
            child.send("stop")


def test_reader_process_that_maps_a_segment_while_its_index_is_created_still_follows_it(tmp_path: Path) -> None:
    """A new segment's files appear one after the other (log, .index, .timeindex, each created and then
    sized). A reader that maps the segment in between must not be stuck with what it saw then. The window
    is reproduced here deterministically: the active segment's .timeindex is held at length 0, as if just
    created, while the reader process maps the segment; then it gets its size back and messages arrive."""
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, segment_size="64 KiB")
        with Child(follower, data) as child:
            assert child.receive() == ("ready", 0)
            producer = topic.producer(partitions=[0])  # creates the (empty) active segment
            timeindex = segment_logs(partition_dir(data, TOPIC))[-1].with_suffix(".timeindex")
            size = timeindex.stat().st_size
            os.truncate(timeindex, 0)  # created, not sized yet (the writer has not touched it: no append yet)
            child.send("read", 300, 5.0)
            child.receive()  # waiting: it maps the segment now
            time.sleep(0.2)
            os.truncate(timeindex, size)  # sized, as the writer does a moment later
            time.sleep(0.05)
            assert producer.send_batch(values_for(0, 100)) == (0, 0)
            time.sleep(0.05)
            assert producer.send_batch(values_for(100, 200)) == (0, 100)
            _, reached, _ = child.receive()
            assert reached == 300, f"the reader saw {reached} of 300 messages in 5 s: it does not follow " \
                                   "a segment it first mapped while the segment's index files were being created"
            producer.close()
            child.send("stop")


def appender(data: str, connection: Any) -> None:
    """A writer that appends until it is killed, answering ("acked", offset after the call) after each."""
    def run() -> None:
        with seglog.open(data) as log:
            topic = log.topic(TOPIC)
            producer = topic.producer()
            offset = topic.end_offset()
            connection.send(("started", offset))
            while True:
                assert producer.send_batch(values_for(offset, 500)) == (0, offset)
                offset += 500
                connection.send(("acked", offset))
    _serve(connection, run)


def test_reader_process_follows_a_writer_that_crashes_and_restarts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic(TOPIC, segment_size="256 KiB")
    with Child(follower, data) as reader_process, Child(appender, data) as writer:
        assert reader_process.receive() == ("ready", 0)
        assert writer.receive() == ("started", 0)
        reader_process.send("read", 10**12, 1.0)  # follow until the partition is quiet for a second
        reader_process.receive()
        acknowledged, deadline = 0, time.monotonic() + 0.3
        while time.monotonic() < deadline or acknowledged == 0:
            if writer.connection.poll(0.005):
                acknowledged = writer.receive()[1]
        writer.kill()
        while writer.connection.poll():  # acknowledgements still in the pipe
            try:
                acknowledged = writer.connection.recv()[1]
            except EOFError:
                break
        _, followed, _ = reader_process.receive()
        assert followed >= acknowledged > 0, f"the reader saw {followed} messages, {acknowledged} were acknowledged"

        with seglog.open(data) as log:  # a new writer recovers the partition under the reader's feet
            topic = log.topic(TOPIC)
            with topic.producer() as producer:
                end = topic.end_offset()
                assert end >= followed
                assert producer.send_batch(values_for(end, 1000)) == (0, end)
                for offset in range(end + 1000, end + 1100):
                    producer.send(value_for(offset, SEND_KIND), key=key_for(offset))
            end += 1100
            reader_process.send("read", end, 20.0)
            reader_process.receive()
            assert reader_process.receive()[1] == end
            assert read_all(topic) == end
        reader_process.send("stop")


# --- one writing process per partition -----------------------------------------------------------------------

def try_to_write(data: str, count: int) -> dict:
    """Open a producer on the topic; on success write `count` messages at the end and close it."""
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        started = time.monotonic()
        try:
            producer = topic.producer(partitions=[0])
        except PartitionLockedError as error:
            return {"refused": str(error), "lock_path": error.lock_path, "holder_pid": error.holder_pid,
                    "seconds": time.monotonic() - started}
        start = topic.end_offset()
        with producer:
            assert producer.send_batch(values_for(start, count)) == (0, start)
        return {"written": start, "pid": os.getpid()}


def test_second_writer_process_is_refused_at_once_and_writes_after_the_first_closes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    lock = partition_dir(data, TOPIC) / ".lock"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC)
        producer = topic.producer(partitions=[0])
        producer.send_batch(values_for(0, 100))

        outcome = spawn_call(try_to_write, str(data), 50)
        assert "refused" in outcome, f"a second process could write to the partition: {outcome}"
        assert outcome["seconds"] < 1.0, f"refused only after {outcome['seconds']:.2f} s"
        assert Path(outcome["lock_path"]) == lock
        assert outcome["holder_pid"] == os.getpid()
        assert str(lock) in outcome["refused"] and str(os.getpid()) in outcome["refused"], outcome["refused"]

        producer.send_batch(values_for(100, 100))  # the holder was not disturbed
        producer.close()
        outcome = spawn_call(try_to_write, str(data), 50)
        assert outcome.get("written") == 200, outcome
        assert topic.end_offset() == 250
        assert read_all(topic) == 250


def holder(data: str, connection: Any) -> None:
    """Holds a producer: writes 100 messages, answers ("holding", pid), then on ("close",) closes."""
    def run() -> None:
        with seglog.open(data) as log:
            producer = log.topic(TOPIC).producer(partitions=[0])
            producer.send_batch(values_for(0, 100))
            connection.send(("holding", os.getpid()))
            assert connection.recv() == ("close",)
            producer.close()
            connection.send(("closed",))
    _serve(connection, run)


@pytest.mark.parametrize("release", ["close", "sigkill"])
def test_lock_names_the_holding_process_and_is_released_when_it_ends(tmp_path: Path, release: str) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic(TOPIC)
    with Child(holder, data) as child, seglog.open(data) as log:
        _, pid = child.receive()
        topic = log.topic(TOPIC)
        started = time.monotonic()
        with pytest.raises(PartitionLockedError) as raised:
            topic.producer(partitions=[0])
        assert time.monotonic() - started < 1.0
        lock = partition_dir(data, TOPIC) / ".lock"
        assert (Path(raised.value.lock_path), raised.value.holder_pid) == (lock, pid)
        assert str(lock) in str(raised.value) and f"process {pid}" in str(raised.value)
        assert read_all(topic) == 100  # reading is never locked

        if release == "close":
            child.send("close")
            assert child.receive() == ("closed",)
        else:
            child.kill()  # the kernel drops the lock of a dead process
        with topic.producer() as producer:
            assert producer.send_batch(values_for(100, 10)) == (0, 100)
        assert read_all(topic) == 110


# --- zero copy: batches are views of the map and keep it alive ----------------------------------------------

def value_data_position(position: int, count: int) -> int:
    """File position of the value bytes of a batch written by send_batch without keys or timestamps."""
    return position + 64 + 8 * count + ((4 * (count + 1) + 7) & ~7)


def test_batches_are_views_of_the_map_and_outlive_reader_log_and_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = seglog.open(data)
    topic = log.create_topic(TOPIC, segment_size="64 KiB")
    with topic.producer() as producer:
        for i in range(6):  # 3 batches of 100 messages (11.7 KiB each) per segment... and more segments
            producer.send_batch(values_for(100 * i, 100))
    first_log = segment_logs(partition_dir(data, TOPIC))[0]
    stored = walk_batches(first_log)
    assert len(stored) >= 3

    reader = topic.reader("earliest")
    batches = [reader.read_batch() for _ in range(3)]
    whole = pa.py_buffer(reader._view.views[0].data)  # the first segment's memory map as one Arrow buffer
    low, high = whole.address, whole.address + whole.size
    for batch, batch_stored in zip(batches, stored):
        check_batch(batch, batch_stored.base_offset)
        values = batch.column("value").buffers()[2]
        for buffer in (values, batch.column("value").buffers()[1], batch.column("timestamp").buffers()[1]):
            assert low <= buffer.address and buffer.address + buffer.size <= high, "a column was copied"
        assert values.address - low == value_data_position(batch_stored.position, batch_stored.count)
    value_addresses = [b.column("value").buffers()[2].address for b in batches]
    file_positions = [value_data_position(s.position, s.count) for s in stored[:3]]
    assert [a - value_addresses[0] for a in value_addresses] == [p - file_positions[0] for p in file_positions]
    del whole

    reader.close()
    log.close()
    gc.collect()
    for batch, batch_stored in zip(batches, stored):
        check_batch(batch, batch_stored.base_offset)

    with seglog.open(data) as log:
        log.delete_topic(TOPIC)
    assert not partition_dir(data, TOPIC).exists() and not first_log.exists()
    gc.collect()
    for batch, batch_stored, address in zip(batches, stored, value_addresses):
        batch.validate(full=True)
        check_batch(batch, batch_stored.base_offset)
        assert batch.column("value").buffers()[2].address == address


def test_a_producer_locks_only_the_partitions_it_writes(tmp_path: Path) -> None:
    """One writer per partition, not per topic: a producer takes a partition's writer lock with its first
    message for it, so another process (here a second open of the directory, refused like one) writes the
    others. What both wrote is read back from each partition."""
    with seglog.open(tmp_path) as first, seglog.open(tmp_path, background=False) as second:
        first.create_topic("split", partitions=3)
        mine, theirs = first.topic("split").producer(), second.topic("split").producer()
        assert mine.send(b"one", partition=1) == (1, 0)
        mine.flush()
        assert theirs.send_batch([b"zero"], partition=0) == (0, 0)
        assert theirs.send(b"two", partition=2) == (2, 0)
        theirs.flush()
        with pytest.raises(seglog.errors.PartitionLockedError, match=f"process {os.getpid()}"):
            theirs.send(b"not mine", partition=1)
        with pytest.raises(seglog.errors.PartitionLockedError):
            mine.send_batch([b"not mine"], partition=0)
        with pytest.raises(seglog.errors.PartitionLockedError):  # partitions=: taken at once, or refused
            second.topic("split").producer(partitions=[1])
        for bad in ([3], [-1], ["0"], 0):
            with pytest.raises(seglog.errors.InvalidArgumentError, match="partitions"):
                second.topic("split").producer(partitions=bad)
        mine.close()
        theirs.close()
        topic = first.topic("split")
        assert [[m.value for m in topic.reader("earliest", partition=p)] for p in range(3)] == \
            [[b"zero"], [b"one"], [b"two"]]
