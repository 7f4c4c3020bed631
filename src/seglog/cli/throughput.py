"""Throughput of seglog's write and read paths, next to plain-Python file baselines measured in the same run.

Used by `seglog demo` and `seglog bench`. Writes: `send_batch` (lists of ~64k messages), per-message `send()`
with a final flush, and the baseline `f.write(struct.pack('<I', len(v)) + v)` loop into a file beside the
data. Reads: `read_batch()` (Arrow batches over the mapped log) and iterating Message objects, over exactly
what the two seglog writes added, and the baseline loop reading the file back. The machine is shared and
noisy, so the ratio to the baseline is the number to look at; absolute rates drift."""

from __future__ import annotations

import os
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Protocol

from seglog.topic import Topic

CHUNK = 65536
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
    messages: int
    payload_bytes: int
    seconds: float

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("inf")

    @property
    def megabytes_per_second(self) -> float:
        """Payload (message values) in 10**6 bytes per second."""
        return self.payload_bytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")


def ratio(measurement: Measurement, measurements: list[Measurement]) -> float | None:
    """Messages/s of `measurement` over that of the baseline of the same kind (write or read)."""
    for baseline in measurements:
        if baseline.baseline and baseline.kind == measurement.kind:
            return measurement.messages_per_second / baseline.messages_per_second
    return None


class ReadBackError(Exception):
    """The reads returned a different number of messages than were written."""


def measure(topic: Topic, messages: int, size: int, *, scratch_dir: Path, phases: Phases | None = None,
            chunk: int = CHUNK) -> list[Measurement]:
    """Write `messages` messages of `size` bytes to `topic` twice (send_batch, then send()), read them back
    both ways, and run the baselines with a file in `scratch_dir` (deleted afterwards)."""
    phases = phases or NoProgress()
    values = [os.urandom(size)] * messages
    payload = messages * size
    partitions = range(topic.partitions)
    starts = [topic.end_offset(p) for p in partitions]
    results = [
        Measurement("send_batch", WRITE, False, messages, payload,
                    _send_batch(topic, values, chunk, phases.phase("write: send_batch", messages))),
        Measurement("send()", WRITE, False, messages, payload,
                    _send(topic, values, chunk, phases.phase("write: send()", messages))),
    ]
    ends = [topic.end_offset(p) for p in partitions]
    written = sum(ends) - sum(starts)
    with _scratch_file(scratch_dir) as path:
        results.append(Measurement("baseline: f.write", WRITE, True, messages, payload,
                                   _file_write(path, values, chunk, phases.phase("write: file loop", messages))))
        results += [
            Measurement("read_batch", READ, False, written, 2 * payload,
                        _read_batches(topic, starts, ends, phases.phase("read: read_batch", written))),
            Measurement("iterate Messages", READ, False, written, 2 * payload,
                        _iterate(topic, starts, ends, chunk, phases.phase("read: iterate", written))),
            Measurement("baseline: f.read", READ, True, messages, payload,
                        _file_read(path, messages, chunk, phases.phase("read: file loop", messages))),
        ]
    return results


def _chunks(values: list[bytes], chunk: int) -> Iterator[list[bytes]]:
    for i in range(0, len(values), chunk):
        yield values[i:i + chunk]


def _send_batch(topic: Topic, values: list[bytes], chunk: int, advance: Advance) -> float:
    with topic.producer() as producer:
        send_batch = producer.send_batch
        start = time.perf_counter()
        for part in _chunks(values, chunk):
            send_batch(part)
            advance(len(part))
        return time.perf_counter() - start


def _send(topic: Topic, values: list[bytes], chunk: int, advance: Advance) -> float:
    with topic.producer() as producer:
        send = producer.send
        start = time.perf_counter()
        for part in _chunks(values, chunk):
            for value in part:
                send(value)
            advance(len(part))
        producer.flush()
        return time.perf_counter() - start


def _read_batches(topic: Topic, starts: list[int], ends: list[int], advance: Advance) -> float:
    readers = [topic.reader(start, partition) for partition, start in enumerate(starts)]
    total = 0
    start = time.perf_counter()
    for reader, end in zip(readers, ends):
        while reader.offset < end:
            batch = reader.read_batch(max_messages=end - reader.offset)
            if batch is None:
                break
            total += batch.num_rows
            advance(batch.num_rows)
    seconds = time.perf_counter() - start
    _close_all(readers)
    _check_count("read_batch", total, sum(ends) - sum(starts))
    return seconds


def _iterate(topic: Topic, starts: list[int], ends: list[int], chunk: int, advance: Advance) -> float:
    readers = [topic.reader(start, partition) for partition, start in enumerate(starts)]
    total = 0
    start = time.perf_counter()
    for reader, first, end in zip(readers, starts, ends):
        messages = iter(reader)
        remaining = end - first
        while remaining:
            count = 0
            for _message in islice(messages, min(chunk, remaining)):
                count += 1
            if not count:
                break
            remaining -= count
            total += count
            advance(count)
    seconds = time.perf_counter() - start
    _close_all(readers)
    _check_count("iterating Messages", total, sum(ends) - sum(starts))
    return seconds


def _file_write(path: Path, values: list[bytes], chunk: int, advance: Advance) -> float:
    with open(path, "wb") as f:
        write, pack = f.write, struct.pack
        start = time.perf_counter()
        for part in _chunks(values, chunk):
            for value in part:
                write(pack("<I", len(value)) + value)
            advance(len(part))
        f.flush()
        return time.perf_counter() - start


def _file_read(path: Path, messages: int, chunk: int, advance: Advance) -> float:
    with open(path, "rb") as f:
        read, unpack = f.read, struct.unpack
        total = 0
        start = time.perf_counter()
        for first in range(0, messages, chunk):
            count = min(chunk, messages - first)
            for _ in range(count):
                header = read(4)
                if len(header) < 4:
                    break
                read(unpack("<I", header)[0])
                total += 1
            advance(count)
        seconds = time.perf_counter() - start
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


def _close_all(readers: list) -> None:
    for reader in readers:
        reader.close()


def _check_count(what: str, read: int, written: int) -> None:
    if read != written:
        raise ReadBackError(f"{what} returned {read} messages, but {written} were written")
