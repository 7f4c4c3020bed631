"""Shared helpers of the storage robustness tests (test_crash, test_corruption, test_multiprocess).

Messages written by these tests describe themselves: the value of the message at offset `o` is
`value_for(o)`, 100 bytes holding the offset in decimal, a kind byte (b"B" for send_batch, b"S" for send)
and a pattern that depends on the offset. Messages sent one by one carry `key_for(o)`; batch messages have
no key. So any message read back can be checked for its offset, its content and its key, and a whole
RecordBatch can be checked in a few vectorised numpy operations.

Segment files are parsed here independently of seglog (the header layout of docs/FORMAT.md), so a test
that locates a batch, tears a file or flips a byte does not trust the code it is testing."""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import signal
import struct
import subprocess
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HELPERS_DIR = str(Path(__file__).resolve().parent)

# --- self-describing messages ------------------------------------------------------------------------------

VALUE_BYTES = 100
DIGITS = 12
PATTERN_BYTES = VALUE_BYTES - DIGITS - 1
_PATTERN = bytes(range(256)) * 2
_PATTERN_ARRAY = np.frombuffer(_PATTERN, dtype=np.uint8)
_POWERS = 10 ** np.arange(DIGITS - 1, -1, -1, dtype=np.int64)
BATCH_KIND, SEND_KIND = b"B", b"S"


def value_for(offset: int, kind: bytes = BATCH_KIND) -> bytes:
    """The 100-byte value of the message at `offset`."""
    start = offset % 256
    return b"%012d" % offset + kind + _PATTERN[start:start + PATTERN_BYTES]


def values_for(first: int, count: int, kind: bytes = BATCH_KIND) -> list[bytes]:
    return [value_for(offset, kind) for offset in range(first, first + count)]


def key_for(offset: int) -> bytes:
    """The key of a message sent one by one (messages written by send_batch have none)."""
    return b"k%012d" % offset


def check_batch(batch: Any, first: int) -> int:
    """Assert that a RecordBatch read from a partition holds exactly the messages first, first + 1, ...
    with the values and keys they were written with; returns its row count."""
    n = batch.num_rows
    assert n > 0, f"empty batch returned at offset {first}"
    offsets = batch.column("offset").to_numpy()
    expected = np.arange(first, first + n, dtype=np.int64)
    if not np.array_equal(offsets, expected):
        bad = int(np.flatnonzero(offsets != expected)[0])
        raise AssertionError(f"offset {int(offsets[bad])} at row {bad}, expected {first + bad} (offsets not dense)")
    values = batch.column("value")
    value_offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset:values.offset + n + 1]
    lengths = np.diff(value_offsets)
    if not (lengths == VALUE_BYTES).all():
        bad = int(np.flatnonzero(lengths != VALUE_BYTES)[0])
        raise AssertionError(f"offset {first + bad}: value of {lengths[bad]} bytes, expected {VALUE_BYTES}")
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[value_offsets[0]:value_offsets[-1]]
    data = data.reshape(n, VALUE_BYTES)
    digits = data[:, :DIGITS].astype(np.int64) - ord("0")
    written_offsets = digits @ _POWERS
    kinds = data[:, DIGITS]
    pattern_index = (expected % 256)[:, None] + np.arange(PATTERN_BYTES)
    intact = ((digits >= 0).all(axis=1) & (digits <= 9).all(axis=1) & (written_offsets == expected)
              & ((kinds == BATCH_KIND[0]) | (kinds == SEND_KIND[0]))
              & (data[:, DIGITS + 1:] == _PATTERN_ARRAY[pattern_index]).all(axis=1))
    if not intact.all():
        bad = int(np.flatnonzero(~intact)[0])
        raise AssertionError(f"offset {first + bad}: value {bytes(data[bad])!r} is not the value written there, "
                             f"{value_for(first + bad)!r} (or its send() form)")
    keys = batch.column("key")
    has_key = keys.is_valid().to_numpy(zero_copy_only=False)
    sent = kinds == SEND_KIND[0]
    if not np.array_equal(has_key, sent):
        bad = int(np.flatnonzero(has_key != sent)[0])
        raise AssertionError(f"offset {first + bad}: key {keys[bad].as_py()!r} but the message was written by "
                             f"{'send' if sent[bad] else 'send_batch'}")
    if sent.any():
        rows = np.flatnonzero(sent)
        got = keys.take(rows).to_pylist()
        want = [key_for(first + int(row)) for row in rows]
        assert got == want, f"keys of sent messages differ from the keys written: {got[:3]} vs {want[:3]}"
    return n


def check_message(message: Any, offset: int) -> None:
    """Assert that a Message read by iteration is the one written at `offset`."""
    assert message.offset == offset, f"message at offset {message.offset}, expected {offset}"
    value = message.value
    kind = value[DIGITS:DIGITS + 1]
    assert value == value_for(offset, kind), f"offset {offset}: value {value!r} is not the value written"
    assert message.key == (key_for(offset) if kind == SEND_KIND else None), f"offset {offset}: key {message.key!r}"


def read_all(topic: Any, *, start: Any = "earliest", verify_crc: bool | None = None) -> int:
    """Read a partition with read_batch from `start` to its end, checking every message; returns the
    offset after the last message read."""
    reader = topic.reader(start, verify_crc=verify_crc)
    try:
        offset = reader.offset
        if start == "earliest":
            assert offset == 0, f"the partition starts at offset {offset}, not 0 (nothing was deleted)"
        while (batch := reader.read_batch()) is not None:
            offset += check_batch(batch, offset)
            assert reader.offset == offset, f"reader.offset {reader.offset} after reading up to {offset}"
        return offset
    finally:
        reader.close()


def iterate_check(topic: Any, start: int, stop: int, *, at_end: bool = True) -> None:
    """Iterate Message objects from `start` to `stop`, checking each. With `at_end` the partition must end
    exactly at `stop`; without, the iteration stops there."""
    reader = topic.reader(start)
    try:
        offset = start
        for message in reader:
            if offset == stop and not at_end:
                break
            check_message(message, offset)
            offset += 1
        assert offset == stop, f"iteration from {start} ended at {offset}, expected {stop}"
    finally:
        reader.close()


# --- segment files, parsed independently of seglog -----------------------------------------------------------

HEADER = struct.Struct("<4sHHIIqqqiIQq")
HEADER_BYTES = HEADER.size
assert HEADER_BYTES == 64
MAGIC = b"SGLB"


@dataclass(frozen=True)
class StoredBatch:
    """One record batch as it lies in a .log file."""
    position: int
    base_offset: int
    count: int
    length: int

    @property
    def end(self) -> int:
        return self.position + self.length

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def walk_batches(path: Path) -> list[StoredBatch]:
    """The batches of a .log file, from its start to the first zeroed or unparseable header."""
    data = Path(path).read_bytes()
    batches, position = [], 0
    while position + HEADER_BYTES <= len(data):
        magic, _, header_size, _, _, base, _, _, count, body, _, _ = HEADER.unpack_from(data, position)
        if magic != MAGIC or header_size != HEADER_BYTES or position + HEADER_BYTES + body > len(data):
            break
        batches.append(StoredBatch(position, base, count, HEADER_BYTES + body))
        position += HEADER_BYTES + body
    return batches


def partition_dir(data: Path, topic: str, partition: int = 0) -> Path:
    """<data>/topics/<tenant>/<namespace>/<topic>/<partition> for 'tenant/namespace/topic' or a bare name."""
    parts = topic.split("/") if "/" in topic else ["public", "default", topic]
    return Path(data).joinpath("topics", *parts, str(partition))


@contextlib.contextmanager
def partition_writer(log: Any, topic: Any, partition: int = 0) -> Iterator[Any]:
    """The partition's writer, as the server takes it (PartitionStore.acquire_writer): appends with batch
    attributes, which producers do not write."""
    store = log._broker.store
    writer = store.acquire_writer(topic.topic_name, partition, topic.config)
    try:
        yield writer
    finally:
        store.release_writer(topic.topic_name, partition, topic.fence)


def segment_logs(directory: Path) -> list[Path]:
    """The .log files of a partition directory, in offset order."""
    return sorted(p for p in Path(directory).glob("*.log") if len(p.stem) == 20 and p.stem.isdigit())


def flip_byte(path: Path, position: int, mask: int = 0xFF) -> int:
    """XOR the byte at `position` of `path` with `mask`; returns the new byte."""
    assert 1 <= mask <= 255
    with open(path, "r+b") as f:
        f.seek(position)
        old = f.read(1)[0]
        f.seek(position)
        f.write(bytes([old ^ mask]))
    return old ^ mask


# --- running code in another process ---------------------------------------------------------------------

def _call_and_send(connection: Any, function: Callable[..., Any], args: tuple) -> None:
    faulthandler.enable()  # a crash of the child prints where it happened into the test's output
    try:
        result = ("ok", function(*args))
    except BaseException as error:  # noqa: BLE001 - everything goes back to the test
        result = ("error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
    connection.send(result)
    connection.close()


def spawn_call(function: Callable[..., Any], *args: Any, timeout: float = 60) -> Any:
    """Run `function(*args)` in a fresh interpreter (multiprocessing 'spawn') and return its result.

    A crash of the child (segfault, bus error) becomes an AssertionError naming the signal, so that damage
    the code under test fails to handle cannot take the test session down with it."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_call_and_send, args=(sender, function, args), daemon=True)
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            process.join(1)
            if process.exitcode is None:
                process.kill()
                process.join()
                raise AssertionError(f"{function.__name__} did not finish within {timeout} s")
            raise AssertionError(f"{function.__name__} died: {describe_exit(process.exitcode)}")
        try:
            status, value = receiver.recv()
        except EOFError:
            process.join(10)
            raise AssertionError(f"{function.__name__} died: {describe_exit(process.exitcode)}") from None
    finally:
        receiver.close()
        process.join(10)
        if process.exitcode is None:
            process.kill()
            process.join()
        process.close()
    if status == "error":
        raise AssertionError(f"{function.__name__} raised in the child process: {value}")
    return value


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def python_command(code: str, *args: str) -> list[str]:
    """A `python -c` command line whose code can import this module."""
    prefix = f"import sys; sys.path.insert(0, {HELPERS_DIR!r})\n"
    return [sys.executable, "-c", prefix + code, *args]


@contextlib.contextmanager
def paused_reader(code: str, *args: str) -> Iterator[subprocess.Popen]:
    """A child running `code` (a reader that maps the log, then waits for a line on stdin before it reads
    on), with text pipes; killed by its pid if still running after the block. `resume` it."""
    reader = subprocess.Popen(python_command(code, *args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        yield reader
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()


def resume(reader: subprocess.Popen) -> str:
    """Let a paused_reader read on; what it printed from then on, once it exited. AssertionError naming the
    signal if it died (SIGBUS: a touch of a page its map has past the end of the file)."""
    reader.stdin.write("go\n")
    reader.stdin.flush()
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, f"the reader died: {describe_exit(reader.returncode)}: {err[-2000:]}"
    return out


@contextlib.contextmanager
def consumed_in_another_process(path, topic="t", subscription="s"):
    """A child process consuming `subscription` while the block runs; gives its pid."""
    script = textwrap.dedent(f"""
        import seglog, time
        log = seglog.open({str(path)!r})
        consumer = log.topic({topic!r}).subscribe({subscription!r})
        print("ready", flush=True)
        time.sleep(60)
    """)
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout.readline().strip() == "ready"
            yield child.pid
        finally:
            child.kill()
