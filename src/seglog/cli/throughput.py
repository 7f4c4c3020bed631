"""Throughput of seglog's write and read paths, next to plain-Python file baselines measured in the same run.

Used by `seglog demo` and `seglog bench`. The operations and baselines are bench/'s (bench_append.py,
bench_read.py), timed the same way, so the figures can be compared with bench/RESULTS.md's:

  send_batch        a producer's whole life: opened, `send_batch` of `chunk` messages at a time, closed
                    (opening maps the partition's segment, closing trims its file)
  send()            the same with `send()` per message, the producer's batch_size a chunk's bytes, flush()
  baseline: f.write `f.write(struct.pack('<I', len(v)) + v)` per message into a new file, opened and closed
  read_batch        a new reader per partition, `read_batch()` over exactly what the two writes added
  iterate Messages  a new reader per partition, `for m in reader` over the same
  baseline: f.read  `n = unpack('<I', f.read(4))[0]; f.read(n)` per message over the baseline's file

The writes run `rounds` times, each round writing new messages; then the reads run `rounds` times over what
the last round wrote (bench/ reads one stored topic again and again too). Each figure is the best round, as
in bench/: the first also pays what a process does once (imports, allocator growth, a reader's first map of
a segment's pages), which tells nothing about the path itself; its rate is reported beside. The machine is
shared and noisy, so the ratio to the baseline is the number to look at; absolute rates drift."""

from __future__ import annotations

import os
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from seglog.topic import Topic

CHUNK = 65536
ROUNDS = 3
WRITES_PER_ROUND = 2  # send_batch and send(), each writing `messages` new messages to the topic
WRITE = "write"
READ = "read"

Advance = Callable[[int], None]


class Phases(Protocol):
    """Progress reporting: `phase(description, total)` starts a phase and returns its advance(n) callback."""

    def phase(self, description: str, total: int) -> Advance: ...


class NoProgress:
    def phase(self, description: str, total: int) -> Advance:
        return lambda n: None


@dataclass(frozen=True)
class Measurement:
    operation: str
    kind: str  # WRITE or READ
    baseline: bool
    messages: int  # in each round
    payload_bytes: int
    seconds: float  # the best round
    first_round_seconds: float  # the first round, once-per-process work included

    @property
    def messages_per_second(self) -> float:
        return _rate(self.messages, self.seconds)

    @property
    def megabytes_per_second(self) -> float:
        """Payload (message values) in 10**6 bytes per second."""
        return _rate(self.payload_bytes / 1e6, self.seconds)

    @property
    def first_round_messages_per_second(self) -> float:
        return _rate(self.messages, self.first_round_seconds)


def _rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else float("inf")


def ratio(measurement: Measurement, measurements: list[Measurement]) -> float | None:
    """Messages/s of `measurement` over that of the baseline of the same kind (write or read)."""
    for baseline in measurements:
        if baseline.baseline and baseline.kind == measurement.kind:
            return measurement.messages_per_second / baseline.messages_per_second
    return None


class ReadBackError(Exception):
    """The reads returned a different number of messages than were written."""


WRITES = ("send_batch", "send()", "baseline: f.write")
READS = ("read_batch", "iterate Messages", "baseline: f.read")


def measure(topic: Topic, messages: int, size: int, *, scratch_dir: Path, phases: Phases | None = None,
            chunk: int = CHUNK, rounds: int = ROUNDS) -> list[Measurement]:
    """`rounds` rounds of each write (`messages` messages of `size` random bytes to `topic` with send_batch,
    as many with send(), and the baseline's file in `scratch_dir`, deleted afterwards), then `rounds` rounds
    of each read over what the last one wrote. One Measurement per operation: its best round and its first."""
    phases = phases or NoProgress()
    values = random_values(messages, size)
    chunks = [values[i:i + chunk] for i in range(0, messages, chunk)]
    partitions = range(topic.partitions)
    writes, reads = [], []
    with _scratch_file(scratch_dir) as path:
        advance = phases.phase("write", rounds)
        for _ in range(rounds):
            starts = [topic.end_offset(p) for p in partitions]
            writes.append((_send_batch(topic, chunks), _send(topic, chunks, chunk * size),
                           _file_write(path, chunks)))
            advance(1)
        ends = [topic.end_offset(p) for p in partitions]
        advance = phases.phase("read", rounds)
        for _ in range(rounds):
            reads.append((_read_batches(topic, starts, ends), _iterate(topic, starts, ends),
                          _file_read(path, messages)))
            advance(1)
    written = sum(ends) - sum(starts)  # by the last round's two writes
    results = [_best(operation, WRITE, messages, size, rounds_of)
               for operation, rounds_of in zip(WRITES, zip(*writes))]
    return results + [_best(operation, READ, count, size, rounds_of)
                      for operation, count, rounds_of in zip(READS, (written, written, messages), zip(*reads))]


def _best(operation: str, kind: str, messages: int, size: int, seconds: tuple[float, ...]) -> Measurement:
    return Measurement(operation, kind, operation.startswith("baseline: "), messages, messages * size,
                       min(seconds), seconds[0])


def random_values(messages: int, size: int) -> list[bytes]:
    """`messages` distinct random values, as bench/'s payload: a value repeated would sit in the CPU caches."""
    raw = np.random.default_rng().integers(0, 256, messages * size, dtype=np.uint8)
    return [bytes(v) for v in raw.reshape(messages, size)]


def _timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _send_batch(topic: Topic, chunks: list[list[bytes]]) -> float:
    def write() -> None:
        with topic.producer() as producer:
            for part in chunks:
                producer.send_batch(part)
    return _timed(write)


def _send(topic: Topic, chunks: list[list[bytes]], batch_bytes: int) -> float:
    def write() -> None:
        with topic.producer(batch_size=batch_bytes) as producer:
            send = producer.send
            for part in chunks:
                for value in part:
                    send(value)
            producer.flush()
    return _timed(write)


def _read_batches(topic: Topic, starts: list[int], ends: list[int]) -> float:
    total = 0

    def read() -> None:
        nonlocal total
        for partition, (start, end) in enumerate(zip(starts, ends)):
            with topic.reader(start, partition) as reader:
                while reader.offset < end and (batch := reader.read_batch(max_messages=end - reader.offset)):
                    total += batch.num_rows
    seconds = _timed(read)
    _check_count("read_batch", total, sum(ends) - sum(starts))
    return seconds


def _iterate(topic: Topic, starts: list[int], ends: list[int]) -> float:
    total = 0

    def read() -> None:
        nonlocal total
        for partition, (start, end) in enumerate(zip(starts, ends)):
            with topic.reader(start, partition) as reader:
                for message in reader:
                    if message.offset >= end:
                        break
                    total += 1
    seconds = _timed(read)
    _check_count("iterating Messages", total, sum(ends) - sum(starts))
    return seconds


def _file_write(path: Path, chunks: list[list[bytes]]) -> float:
    def write() -> None:
        with open(path, "wb") as f:
            for part in chunks:
                for value in part:
                    f.write(struct.pack("<I", len(value)) + value)
    return _timed(write)


def _file_read(path: Path, messages: int) -> float:
    total = 0

    def read() -> None:
        nonlocal total
        with open(path, "rb") as f:
            for _ in range(messages):
                header = f.read(4)
                if len(header) < 4:
                    break
                f.read(struct.unpack("<I", header)[0])
                total += 1
    seconds = _timed(read)
    _check_count("the baseline file", total, messages)
    return seconds


@contextmanager
def _scratch_file(directory: Path) -> Iterator[Path]:
    fd, name = tempfile.mkstemp(prefix=".throughput-baseline-", suffix=".bin", dir=directory)
    os.close(fd)
    try:
        yield Path(name)
    finally:
        os.unlink(name)


def _check_count(what: str, read: int, written: int) -> None:
    if read != written:
        raise ReadBackError(f"{what} returned {read} messages, but {written} were written")
