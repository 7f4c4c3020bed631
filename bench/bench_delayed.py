"""Delayed delivery at 5 million delayed messages (issue 28): the cost of passing over them into the index,
the memory the index holds, and their release once due.

A shared subscription reads past a stored batch whose `pulsar.deliver_at` is still to come and hands its
messages to the subscription's delayed index (subscriptions/delayed.py, bucketed as Pulsar's PIP-195: one
open bucket of at most 65,536 (time, offset) entries per partition in memory, full buckets sorted and
spilled to unlinked files read through memory maps). Two shapes, each written once with a ManualClock before
every delivery time:

- 1,000 messages a batch, each batch with its own random delivery time over the next hour (an in-process
  `send_batch(..., deliver_at=...)`): 5,000 batches for 5 M messages;
- one message a batch, as pulsar-client sends delayed messages (`send(v, deliver_at=...)`), each with its own
  random time: 200,000, not 5 M (written at ~45,000/s and released at ~20,000/s, 5 M would take an hour a
  round).

groups, per shape ("..., 1,000 a batch" and "..., 1 a batch"):
indexing  baseline  undelayed receive_batch   the same messages without a delivery time, read by the same
                                              kind of consumer (a shared one, receive_batch, no acks)
          seglog    receive_batch passes over until the subscription's delayed_messages() holds them all;
                                              records the RssAnon growth of the process with
                                              the index held and its peak while indexing (target: under
                                              64 MiB), the spill files' size (the unlinked files' maps in
                                              /proc/self/maps), and the same entries held as Pulsar's
                                              in-memory tracker holds them, measured in a fresh process of
                                              the same run: two numpy int64 arrays (time, offset), and a
                                              heapq of (time, offset) tuples (the one-Python-object-a-message
                                              design the issue rules out)
release   baseline  undelayed receive_batch + ack   the undelayed messages drained by a fresh subscription
          seglog    release receive_batch + ack     the clock moved past every time, the index drained;
                                              every message must come exactly once (count and the set of
                                              offsets), also in the CI run

Release rounds need a topic whose times are still to come (the clock only moves forward), so each round's
setup (untimed) writes a fresh topic and indexes it; 3 rounds, no warm-up. About 6 minutes in all.
"""

from __future__ import annotations

import ctypes
import gc
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from bench_memory import rss_anon

import seglog
from seglog import ManualClock

MiB = 1 << 20
HOUR_MS = 3_600_000
INDEX_TARGET_MIB = 64  # the open bucket is 1 MiB a partition: anything near this is per-message memory
RELEASE_ROUNDS = 3
ENTRY_BYTES = 16  # an index entry: its time and its offset, two int64s
VALUE_BYTES = 100  # as the append and read scenarios


@dataclass(frozen=True)
class Shape:
    name: str
    per_batch: int

    def group(self, what: str) -> str:
        return f"delayed delivery: {what}, {self.per_batch:,} a batch"


BATCHED = Shape("batched", 1_000)
UNBATCHED = Shape("unbatched", 1)
SHAPES = {"1k": BATCHED, "1": UNBATCHED}


@pytest.fixture(scope="module", params=list(SHAPES), ids=list(SHAPES))
def shape(request: pytest.FixtureRequest) -> Shape:
    return SHAPES[request.param]


@pytest.fixture(scope="module")
def messages(shape: Shape, scale) -> int:
    """5 M batched (CI: 70,000, enough to spill a bucket), 200,000 unbatched (CI: 2,000)."""
    if shape is BATCHED:
        return scale(5_000_000, 70_000)
    return scale(200_000, 2_000)


@dataclass
class Written:
    """A topic of the workload, and the delivery time of each of its batches (in-memory trackers' input)."""
    topic: Any
    times: np.ndarray


class Workload:
    """One log with its own ManualClock, and the topics of one shape: an undelayed one written once, and
    delayed ones, each with its times over the hour after the clock's now when written."""

    def __init__(self, path: Path, shape: Shape, messages: int) -> None:
        self.shape, self.messages = shape, messages
        self.clock = ManualClock()
        self.log = seglog.open(path, clock=self.clock, background=False)
        raw = np.random.default_rng(0x5E6).integers(0, 256, shape.per_batch * VALUE_BYTES, dtype=np.uint8)
        offsets = np.arange(0, len(raw) + 1, VALUE_BYTES, dtype=np.int32)
        self.values = pa.Array.from_buffers(pa.binary(), shape.per_batch,
                                            [None, pa.py_buffer(offsets), pa.py_buffer(raw)])
        self._random = np.random.default_rng(28)
        self._names = count()
        self.undelayed = self.write(delayed=False).topic

    def write(self, *, delayed: bool = True) -> Written:
        """A new topic of the shape's batches; delayed, each batch at its own random time in the next hour."""
        topic = self.log.create_topic(f"{'delayed' if delayed else 'undelayed'}-{next(self._names)}")
        times = self.clock() + 1 + self._random.integers(0, HOUR_MS, self.messages // self.shape.per_batch)
        with topic.producer() as producer:
            if self.shape.per_batch == 1:  # as pulsar-client sends delayed messages: a batch each
                value = self.values[0].as_py()
                for at in times.tolist():
                    if delayed:
                        producer.send(value, deliver_at=at)  # (a delayed send() is a batch of its own)
                    else:
                        producer.send_batch([value])  # (an undelayed send() would be batched with others)
            else:
                for at in times.tolist():
                    producer.send_batch(self.values, deliver_at=at if delayed else None)
        return Written(topic, times)

    def subscribe(self, topic: Any) -> Any:
        return topic.subscribe(f"s{next(self._names)}", subscription_type="shared", initial_position="earliest")

    def close(self) -> None:
        self.log.close()


@pytest.fixture(scope="module")
def workload(scratch: Path, shape: Shape, messages: int) -> Iterator[Workload]:
    made = Workload(scratch / shape.name, shape, messages)
    yield made
    made.close()


# ---------------------------------------------------------------------------------------------------------
# Memory: RssAnon, the spill files' maps, and the in-memory trackers of the baselines.

def settled_rss_anon() -> int:
    """RssAnon once garbage is collected and the C heap's free memory is handed back to the kernel, so that
    memory an earlier test freed does not hide what the next one allocates."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_anon()


def spill_bytes(directory: Path) -> int:
    """The bytes of the unlinked spill files under `directory` mapped by this process (/proc/self/maps: they
    have no name left in the directory and no open descriptor, only their maps)."""
    total = 0
    prefix = str(directory)
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith(prefix) and fields[5].rstrip().endswith("(deleted)"):
                start, stop = (int(x, 16) for x in fields[0].split("-"))
                total += stop - start
    return total


TRACKER = """
import gc, heapq, json, sys
import numpy as np
def rss_anon():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) * 1024 for l in status if l.startswith("RssAnon:"))
times, per_batch, kind = np.load(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
messages = len(times) * per_batch
gc.collect()
before = rss_anon()
if kind == "numpy":  # Pulsar's in-memory tracker: a priority queue of longs, off-heap (TripleLongPriorityQueue)
    tracker = (np.repeat(times, per_batch), np.arange(messages, dtype=np.int64))
else:  # one Python object a message: a tuple and its two ints, in a heap
    tracker = []
    for offset, at in enumerate(np.repeat(times, per_batch).tolist()):
        heapq.heappush(tracker, (at, offset))
print(json.dumps(rss_anon() - before))
"""


def tracker_growth(times: np.ndarray, per_batch: int, kind: str, directory: Path) -> int:
    """RssAnon growth of a fresh process holding the same (time, offset) entries in an in-memory tracker:
    `kind` 'numpy' (two int64 arrays) or 'heapq' (a heap of tuples)."""
    path = directory / "times.npy"
    np.save(path, times)
    done = subprocess.run([sys.executable, "-c", TRACKER, str(path), str(per_batch), kind], capture_output=True,
                          text=True, timeout=600, check=True)
    return json.loads(done.stdout)


# ---------------------------------------------------------------------------------------------------------
# Indexing: a shared consumer's receive_batch passes over every delayed batch into the index.

def index_all(consumer: Any, messages: int) -> int:
    """receive_batch until the subscription's index holds `messages` (dispatch passes over at most 10,000
    batches a call); returns the calls made. Nothing may be delivered: every time is still to come."""
    subscription = consumer.subscription
    for calls in range(1, messages + 2):
        assert consumer.receive_batch() is None, "a delayed message was delivered before its time"
        if subscription.delayed_messages() >= messages:
            assert subscription.delayed_messages() == messages
            return calls
    raise AssertionError(f"{subscription.delayed_messages():,} of {messages:,} indexed after {messages + 1:,} calls")


class PeakSampler:
    """The most RssAnon grew above `before` while the block ran, sampled every millisecond from a thread
    (one pass of receive_batch passes over 10,000 batches: sampling between calls would miss a peak)."""

    def __init__(self, before: int) -> None:
        self.before, self.peak = before, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, rss_anon() - self.before)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_anon() - self.before)


def read_undelayed(consumer: Any, messages: int) -> None:
    """receive_batch (one stored batch a call), no acks, until `messages` were read."""
    read = 0
    for _ in range(messages + 1):
        batch = consumer.receive_batch()
        if batch is None:
            break
        read += batch.num_rows
    assert read == messages, f"read {read:,} of {messages:,}"


def test_undelayed_receive_batch(bench, workload: Workload, shape: Shape, messages: int):
    topic = workload.undelayed
    def teardown(consumer):
        # acknowledged first: a consumer leaving with many messages pending costs O(n^2) today (the report)
        consumer.ack(np.arange(messages))
        consumer.unsubscribe()

    bench.baseline(shape.group("indexing"), "undelayed receive_batch", messages=messages)
    bench.run(lambda consumer: read_undelayed(consumer, messages), setup=lambda: (workload.subscribe(topic),),
              teardown=teardown)


def test_index_delayed(bench, workload: Workload, shape: Shape, messages: int, scratch: Path):
    written = workload.write()
    topic = written.topic
    assert workload.clock() < int(written.times.min())
    spill_directory = workload.log.path
    growth: list[int] = []
    peaks: list[int] = []
    spilled: list[int] = []

    def setup():
        return workload.subscribe(topic), settled_rss_anon()

    def index(consumer, before):
        if peaks:
            index_all(consumer, messages)
        else:  # the first round (the warm-up's, or CI's only one) samples the peak from a thread
            with PeakSampler(before) as sampler:
                index_all(consumer, messages)
            peaks.append(sampler.peak)
        growth.append(rss_anon() - before)  # the index held: the consumer is unsubscribed in teardown
        spilled.append(spill_bytes(spill_directory))

    def teardown(consumer, before):
        consumer.unsubscribe()

    bench.seglog(shape.group("indexing"), "receive_batch passes over", messages=messages,
                 at_most={"RssAnon growth (MiB)": INDEX_TARGET_MIB, "RssAnon peak growth (MiB)": INDEX_TARGET_MIB})
    bench.run(index, setup=setup, teardown=teardown)

    sealed_entries = messages - messages % (1 << 16)  # one partition: the open bucket holds the rest
    assert spilled[0] == sealed_entries * ENTRY_BYTES, f"spill files of {spilled[0]:,} B for {sealed_entries:,}"
    workload.log.delete_topic(topic.name)
    numpy_growth = tracker_growth(written.times, shape.per_batch, "numpy", scratch)
    heapq_growth = tracker_growth(written.times, shape.per_batch, "heapq", scratch)
    worst, peak = max(growth), max(peaks)
    bench.record("RssAnon growth (MiB)", round(worst / MiB, 1))
    bench.record("RssAnon peak growth (MiB)", round(peak / MiB, 1))
    bench.record("spill files (MiB)", round(spilled[0] / MiB, 1))
    bench.record("numpy tracker RssAnon (MiB)", round(numpy_growth / MiB, 1))
    bench.record("heapq tracker RssAnon (MiB)", round(heapq_growth / MiB, 1))
    bench.note(f"{messages:,} delayed; RssAnon +{worst / MiB:.1f} MiB (peak +{peak / MiB:.1f}) with the index "
               f"held, {spilled[0] / MiB:.1f} MiB in spill files ({ENTRY_BYTES} B an entry); the same entries "
               f"in a fresh process: numpy arrays +{numpy_growth / MiB:.1f} MiB "
               f"({numpy_growth / max(worst, 1):.1f}x), heapq of tuples +{heapq_growth / MiB:.1f} MiB "
               f"({heapq_growth / max(worst, 1):.1f}x)")
    assert worst < INDEX_TARGET_MIB * MiB and peak < INDEX_TARGET_MIB * MiB, (
        f"RssAnon grew by {worst / MiB:.1f} MiB (peak {peak / MiB:.1f}) indexing {messages:,} delayed messages")


# ---------------------------------------------------------------------------------------------------------
# Release: the clock past every time, the index drained by a consumer acknowledging what it receives.

def drain(consumer: Any, messages: int) -> list[np.ndarray]:
    """receive_batch + ack until nothing more comes; the offsets received, call by call."""
    received = []
    for _ in range(messages + 1):
        batch = consumer.receive_batch()
        if batch is None:
            return received
        received.append(np.asarray(batch.column("offset")))
        consumer.ack(batch)
    raise AssertionError(f"more than {messages:,} calls of receive_batch")


def check_exactly_once(consumer: Any, received: list[np.ndarray], messages: int) -> None:
    offsets = np.concatenate(received) if received else np.empty(0, dtype=np.int64)
    assert len(offsets) == messages, f"{len(offsets):,} messages delivered, {messages:,} written"
    assert np.array_equal(np.sort(offsets), np.arange(messages)), "a message delivered twice, or never"
    assert consumer.subscription.delayed_messages() == 0


def test_undelayed_drain(bench, workload: Workload, shape: Shape, messages: int):
    topic = workload.undelayed
    received: list[list[np.ndarray]] = []

    def teardown(consumer):
        check_exactly_once(consumer, received[-1], messages)
        consumer.unsubscribe()

    bench.baseline(shape.group("release"), "undelayed receive_batch + ack", messages=messages)
    bench.run(lambda consumer: received.append(drain(consumer, messages)), setup=lambda: (workload.subscribe(topic),),
              teardown=teardown, rounds=RELEASE_ROUNDS, warmup_rounds=0)


def test_release_delayed(bench, workload: Workload, shape: Shape, messages: int):
    received: list[list[np.ndarray]] = []

    def setup():
        topic = workload.write().topic
        consumer = workload.subscribe(topic)
        index_all(consumer, messages)
        workload.clock.advance(HOUR_MS + 1)  # past every time
        return topic, consumer

    def teardown(topic, consumer):
        check_exactly_once(consumer, received[-1], messages)
        consumer.unsubscribe()
        workload.log.delete_topic(topic.name)  # (each round writes its own)

    bench.seglog(shape.group("release"), "release receive_batch + ack", messages=messages)
    bench.run(lambda topic, consumer: received.append(drain(consumer, messages)), setup=setup, teardown=teardown,
              rounds=RELEASE_ROUNDS, warmup_rounds=0)
