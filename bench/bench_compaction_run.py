"""A whole compaction and the compacted view it makes (issue 29, "Speed and memory"), each against a Python
way to the same answer over the same stored messages, the two sides alternating round by round.

The partition: bench_compaction.py's, written the same way (send_batch 10,000 at a time, 100-byte values,
keys b"key-0000000" to b"key-0999999" each used 10 times in random order, 1% keyless, 1% null values):
10 M messages over 1 M keys (1.26 GB, two 1 GiB segments, in the page cache). `--seglog-scale=0.1` is the
quick run (1 M messages over 100,000 keys, about 10 s); `--benchmark-disable` runs each body once at
100,000 messages. Input is the bytes of the stored batches (and, for the second compaction, of the view).

Group "compaction: a whole compaction"
  baseline  python dict, read_batch + to_pylist  latest.update(zip(keys.to_pylist(), offsets)) a stored
                                                 batch: each key's latest offset, the cheapest Python way
                                                 measured in bench_compaction.py
  seglog    compact_partition, horizon = end     map, verdicts, the kept messages copied into the next
                                                 view's file, fsync and commit: >= 10x the baseline and
                                                 >= 0.2 GB/s of input
Group "compaction: the compacting process's RssAnon"
  seglog    compact_partition in a fresh process that only compacts (imports, the partition's view, one
            compact_partition): RssAnon sampled every millisecond from this process through
            /proc/<pid>/status (the child's GIL does not delay the samples), its peak growth over the
            process's own RssAnon before it began < 64 MiB; the absolute figures are recorded beside it
Groups "compaction: compacted read, read_batch()" and "compaction: compacted read, for m in reader"
  baseline  a fresh reader over the log, to its end          (10 M messages)
  seglog    a fresh reader(read_compacted=True) over the whole view (each key's latest with a value):
            at least as fast a message as the baseline (>= 1x)
Group "compaction: a second compaction after 10% more messages"
  baseline  the dict pass over what that compaction reads: reader(read_compacted=True) over the first view,
            then the new messages (read_batch + to_pylist of keys and offsets)
  seglog    compact_partition over 1 M more messages (random keys) with the first view probed against their
            map, the next view written whole: >= 0.2 GB/s of input (the issue's 10x is the whole compaction's;
            the ratio here is for information)

Alternation: every baseline round is paired with a seglog round on the same machine a moment apart (the seglog
round before it in even rounds, after it in odd ones); the seglog test then runs its own rounds too, for its
row. Each seglog row records, from the pairs, the median of the per-pair ratios of wall time
(`paired_ratio`, targeted as `at_least` is) and of CPU time, and the CPU seconds of both sides (user +
system, every thread of this process, from getrusage). Wall time includes the fsync of the new view's
file; CPU time does not wait for the disk. The dict baselines take 8-9 s a round at the full size, so they run 3 rounds
without a warm-up. About 1.5 minutes at the full size.
"""

from __future__ import annotations

import json
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench_compaction import MESSAGES_PER_KEY, dict_by_to_pylist, send_keyed, write_keyed_partition

import seglog
from seglog._core._messages import messages_from_batch
from seglog.lifecycle.compaction import CompactionOutcome, compact_partition
from seglog.storage.batch import to_record_batch
from seglog.storage.compacted import CompactedFile, compacted_directory
from seglog.storage.partition_view import PartitionView

RUN = "compaction: a whole compaction"
MEMORY = "compaction: the compacting process's RssAnon"
READ_BATCH = "compaction: compacted read, read_batch()"
ITERATION = "compaction: compacted read, for m in reader"
SECOND = "compaction: a second compaction after 10% more messages"
DICT_BASELINE = "python dict, read_batch + to_pylist"
SLOW_ROUNDS = 3  # rounds of the dict baselines (8-9 s each at the full size), paired and without a warm-up
READ_ROUNDS = 15
MiB = 1 << 20


# ---------------------------------------------------------------------------------------------------------
# the partition

class Partition:
    """The written partition, opened for reading (no housekeeping thread), and the view a compactor uses."""

    def __init__(self, path: Path, messages: int) -> None:
        self.log = seglog.open(path, background=False)
        self.topic = self.log.topic("compacted")
        self.directory = self.topic.partition_directory(0)
        self.view = PartitionView(self.directory)
        self.messages, self.keys = messages, messages // MESSAGES_PER_KEY
        self.nbytes = sum(path.stat().st_size for path in self.directory.glob("*.log"))

    def forget_compactions(self) -> None:
        """Remove the compacted view: the next compaction starts from nothing (untimed)."""
        shutil.rmtree(compacted_directory(self.directory), ignore_errors=True)

    def compact(self) -> CompactionOutcome:
        """A whole compaction up to the end offset, Pulsar's model (tombstones go at once)."""
        return compact_partition(self.view, horizon=self.view.end_offset(), now_ms=int(time.time() * 1000),
                                 delete_retention_ms=None)


@pytest.fixture(scope="module")
def partition(scratch, scale):
    messages = scale(10_000_000, 100_000)
    write_keyed_partition(scratch / "log", messages)
    opened = Partition(scratch / "log", messages)
    yield opened
    opened.log.close()


# ---------------------------------------------------------------------------------------------------------
# two sides, round by round

def cpu_seconds() -> tuple[float, float]:
    """This process's (user, system) CPU seconds so far, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


@dataclass
class Side:
    """One side of a comparison: `work`, timed, after `prepare`, untimed; the wall and CPU seconds (user +
    system, all threads of this process) of each round it ran, and the system part alone."""
    work: Callable[[], Any]
    prepare: Callable[[], Any] = lambda: None
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    system: list[float] = field(default_factory=list)

    def __call__(self) -> Any:
        (user, system), started = cpu_seconds(), time.perf_counter()
        result = self.work()
        self.wall.append(time.perf_counter() - started)
        user_after, system_after = cpu_seconds()
        self.cpu.append(user_after - user + system_after - system)
        self.system.append(system_after - system)
        return result


@dataclass
class Pairs:
    """The rounds of a baseline and the seglog rounds run beside them, one pair a round."""
    baseline: Side
    seglog: Side

    def ratios(self, times: str) -> list[float]:
        """Baseline over seglog seconds ('wall' or 'cpu'), pair by pair: how many times faster seglog was."""
        return [b / s for b, s in zip(getattr(self.baseline, times), getattr(self.seglog, times))]


PAIRS: dict[str, Pairs] = {}  # by group: the baseline test's pairs, for the seglog test after it


def alternate(bench, group: str, baseline: Side, seglog_side: Side, *, rounds: int, warmup_rounds: int) -> Any:
    """bench.run the baseline with a seglog round beside each of its rounds: before it in even rounds, after
    it in odd ones (whatever the first leaves to the second, such as dirty pages, weighs on both alike).
    Warm-up pairs are dropped, and the seglog side runs once before them all, untimed (its first round in
    the process maps the segments' pages: 0.2-0.3 s of system time at the full size, which bench/'s warm-up
    round leaves out of its own rounds too); the pairs are kept in PAIRS[group]."""
    turns = count()
    seglog_first = {}

    def run_seglog() -> None:
        seglog_side.prepare()
        seglog_side()

    run_seglog()

    def before() -> None:
        seglog_first["now"] = next(turns) % 2 == 0
        if seglog_first["now"]:
            run_seglog()
        baseline.prepare()

    def after() -> None:
        if not seglog_first["now"]:
            run_seglog()

    result = bench.run(baseline, setup=before, teardown=after, rounds=rounds, warmup_rounds=warmup_rounds)
    for side in (baseline, seglog_side):
        for times in (side.wall, side.cpu, side.system):
            del times[:len(times) - rounds]
    PAIRS[group] = Pairs(baseline, seglog_side)
    return result


def record_pairs(bench, group: str, own: Side) -> str:
    """Record the pairs' figures on the seglog row (`paired_ratio` and its CPU twin, medians; the CPU seconds
    of both sides) and its own rounds' CPU seconds; a note saying them."""
    pairs = PAIRS.get(group)
    best_cpu, median_cpu = min(own.cpu), statistics.median(own.cpu)
    bench.record("cpu_seconds_best", round(best_cpu, 4))
    bench.record("cpu_seconds_median", round(median_cpu, 4))
    bench.record("system_seconds_median", round(statistics.median(own.system), 4))
    own_text = (f"its own rounds: CPU {best_cpu:.3f} s best, {median_cpu:.3f} s median (system "
                f"{statistics.median(own.system):.3f} s), wall {min(own.wall):.3f} s best")
    if pairs is None:  # (the baseline test did not run in this session)
        return own_text + "; no paired rounds (run the group's baseline test first)"
    wall, cpu = statistics.median(pairs.ratios("wall")), statistics.median(pairs.ratios("cpu"))
    bench.record("paired_ratio", round(wall, 3))
    bench.record("paired_ratios", [round(r, 3) for r in pairs.ratios("wall")])
    bench.record("paired_cpu_ratio", round(cpu, 3))
    for role, side in (("seglog", pairs.seglog), ("baseline", pairs.baseline)):
        bench.record(f"paired_{role}_wall_seconds", [round(s, 4) for s in side.wall])
        bench.record(f"paired_{role}_cpu_seconds", [round(s, 4) for s in side.cpu])
        bench.record(f"paired_{role}_system_seconds", [round(s, 4) for s in side.system])
    return (f"paired with the baseline round by round: {wall:.2f}x its wall time, {cpu:.2f}x its CPU time "
            f"(medians of {len(pairs.ratios('wall'))} pairs; CPU: baseline "
            f"{statistics.median(pairs.baseline.cpu):.3f} s, seglog {statistics.median(pairs.seglog.cpu):.3f} s, "
            f"of it system {statistics.median(pairs.seglog.system):.3f} s); " + own_text)


# ---------------------------------------------------------------------------------------------------------
# 1. a whole compaction

def checked_compaction(partition: Partition) -> CompactionOutcome:
    outcome = partition.compact()
    assert outcome.read == partition.messages and outcome.horizon == partition.messages
    assert 0.97 * partition.keys <= outcome.kept <= partition.keys  # (each key's latest, less the tombstones)
    return outcome


def compaction_side(partition: Partition) -> Side:
    return Side(lambda: checked_compaction(partition), prepare=partition.forget_compactions)


def test_whole_compaction_baseline(bench, partition):
    bench.baseline(RUN, DICT_BASELINE, messages=partition.messages, nbytes=partition.nbytes)
    keys = alternate(bench, RUN, Side(lambda: dict_by_to_pylist(partition)), compaction_side(partition),
                     rounds=SLOW_ROUNDS, warmup_rounds=0)
    assert keys == partition.keys


def test_whole_compaction(bench, partition):
    bench.seglog(RUN, "compact_partition, horizon = end offset", messages=partition.messages,
                 nbytes=partition.nbytes, at_least={DICT_BASELINE: 10}, min_gbps=0.2,
                 recorded_at_least={"paired_ratio": 10})
    side = compaction_side(partition)
    outcome = bench.run(side, setup=side.prepare)
    note = record_pairs(bench, RUN, side)
    bench.record("kept", outcome.kept)
    bench.record("view_bytes", outcome.size)
    bench.note(f"{note}; kept {outcome.kept:,} of {outcome.read:,} messages, a view of "
               f"{outcome.size / MiB:.1f} MiB written and fsynced each round")


# ---------------------------------------------------------------------------------------------------------
# 2. the compacting process's anonymous memory

COMPACTING_PROCESS = """
import ctypes, gc, json, sys, time
from pathlib import Path
from seglog.lifecycle.compaction import compact_partition
from seglog.storage.partition_view import PartitionView

def rss_anon():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))

view = PartitionView(Path(sys.argv[1]))
gc.collect()
ctypes.CDLL("libc.so.6").malloc_trim(0)
print(json.dumps({"rss_anon": rss_anon()}), flush=True)
sys.stdin.readline()
outcome = compact_partition(view, horizon=view.end_offset(), now_ms=int(time.time() * 1000),
                            delete_retention_ms=None)
print(json.dumps({"read": outcome.read, "kept": outcome.kept, "rss_anon": rss_anon()}), flush=True)
"""


def child_rss_anon(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("RssAnon:"))


def compact_in_fresh_process(directory: Path) -> dict[str, int]:
    """The compacting process's RssAnon before it began and at its peak (sampled every millisecond from this
    process while it compacts), and what it read and kept."""
    with subprocess.Popen([sys.executable, "-c", COMPACTING_PROCESS, str(directory)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdin is not None and process.stdout is not None
            before = json.loads(process.stdout.readline())["rss_anon"]
            peak, done = before, threading.Event()

            def sample() -> None:
                nonlocal peak
                while not done.wait(0.001):
                    try:
                        peak = max(peak, child_rss_anon(process.pid))
                    except (FileNotFoundError, StopIteration):
                        return  # (it exited)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            process.stdin.write("go\n")
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
            done.set()
            sampler.join()
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
    return {"before": before, "peak": max(peak, answer["rss_anon"]), "read": answer["read"], "kept": answer["kept"]}


def test_compacting_process_memory(bench, partition):
    limit = 64 * MiB
    bench.seglog(MEMORY, "compact_partition in a fresh process", at_most={"RssAnon peak growth (MiB)": 64})
    figures: list[dict[str, int]] = []
    bench.run(lambda: figures.append(compact_in_fresh_process(partition.directory)),
              setup=partition.forget_compactions, rounds=3, warmup_rounds=0)
    assert all(f["read"] == partition.messages for f in figures)
    growth = max(f["peak"] - f["before"] for f in figures)
    before, peak = max(f["before"] for f in figures), max(f["peak"] for f in figures)
    bench.record("RssAnon peak growth (MiB)", round(growth / MiB, 1))
    bench.record("RssAnon before (MiB)", round(before / MiB, 1))
    bench.record("RssAnon peak (MiB)", round(peak / MiB, 1))
    bench.note(f"{partition.keys:,} keys: RssAnon {before / MiB:.1f} MiB before compacting (python, numpy, "
               f"pyarrow, seglog imported; the view opened), {peak / MiB:.1f} MiB at the peak (sampled every ms, "
               f"worst of {len(figures)} fresh processes)")
    assert growth < limit, f"RssAnon grew by {growth / MiB:.1f} MiB compacting {partition.keys:,} keys"


# ---------------------------------------------------------------------------------------------------------
# 3. compacted reads

@pytest.fixture(scope="module")
def compacted(partition) -> CompactionOutcome:
    """The partition's compacted view up to its end offset, made afresh."""
    partition.forget_compactions()
    return checked_compaction(partition)


def batches_read(reader) -> int:
    with reader:
        messages = 0
        while (batch := reader.read_batch()) is not None:
            messages += batch.num_rows
        return messages


def messages_iterated(reader) -> int:
    with reader:
        return sum(1 for _ in reader)


READS = {READ_BATCH: batches_read, ITERATION: messages_iterated}
FLOOR = "the view's batches decoded in a loop, no reader"


def view_file(partition: Partition) -> CompactedFile:
    """The compacted view's file as the partition's readers share it (opened and checked once)."""
    current = partition.view.compacted.current()
    assert current is not None and current[1] is not None
    return current[1]


def floor_batches(file: CompactedFile) -> int:
    return sum(to_record_batch(file.data, position).num_rows for position in file.positions.tolist())


def floor_messages(file: CompactedFile) -> int:
    positions = file.positions.tolist()
    return sum(1 for position in positions for _ in messages_from_batch(file.data, position, 0, 0, 1 << 62))


FLOORS = {READ_BATCH: floor_batches, ITERATION: floor_messages}


@pytest.mark.parametrize("group", [READ_BATCH, ITERATION], ids=["read_batch", "iteration"])
def test_read_log(bench, partition, compacted, group):
    read = READS[group]
    bench.baseline(group, "a fresh reader over the log", messages=partition.messages, nbytes=partition.nbytes)
    got = alternate(bench, group, Side(lambda: read(partition.topic.reader("earliest"))),
                    Side(lambda: read(partition.topic.reader("earliest", read_compacted=True))),
                    rounds=READ_ROUNDS, warmup_rounds=1)
    assert got == partition.messages


@pytest.mark.parametrize("group", [READ_BATCH, ITERATION], ids=["read_batch", "iteration"])
def test_read_compacted(bench, partition, compacted, group):
    read = READS[group]
    bench.seglog(group, "a fresh reader(read_compacted=True) over the view", messages=compacted.kept,
                 nbytes=compacted.size, at_least={"a fresh reader over the log": 1},
                 recorded_at_least={"paired_message_ratio": 1})
    side = Side(lambda: read(partition.topic.reader("earliest", read_compacted=True)))
    assert bench.run(side, rounds=READ_ROUNDS) == compacted.kept
    note = record_pairs(bench, group, side)
    pairs = PAIRS.get(group)
    if pairs is not None:  # (the pairs compare rounds; the target compares messages a second)
        ratio = statistics.median(pairs.ratios("wall")) * compacted.kept / partition.messages
        bench.record("paired_message_ratio", round(ratio, 3))
        note = f"{ratio:.2f}x the log's messages a second, paired; " + note
    file = view_file(partition)
    started = time.perf_counter()
    CompactedFile(file.path, partition.view.compacted.current()[0])
    opening = time.perf_counter() - started
    bench.record("view_open_seconds", round(opening, 4))
    bench.note(f"{note}; the view: {compacted.kept:,} messages in {file.batches:,} batches, "
               f"{compacted.size / MiB:.1f} MiB, checked once a process when first read ({opening * 1e3:.1f} ms here)")


@pytest.mark.parametrize("group", [READ_BATCH, ITERATION], ids=["read_batch", "iteration"])
def test_read_floor(bench, partition, compacted, group):
    """What a compacted read costs without the reader's work a batch (the view's state asked, the batch
    looked up): to_record_batch (or messages_from_batch) of each of the view's batches in a loop. For
    information: the floor a reader of the view could reach."""
    read, file = FLOORS[group], view_file(partition)
    bench.seglog(group, FLOOR, messages=compacted.kept, nbytes=compacted.size)
    assert bench.run(lambda: read(file), rounds=READ_ROUNDS) == compacted.kept


# ---------------------------------------------------------------------------------------------------------
# 4. a second compaction after 10% more messages

class Grown:
    """The partition after its first compaction and 10% more messages (random keys), the first view kept
    aside so that every round compacts from it again."""

    def __init__(self, partition: Partition, first: CompactionOutcome, saved: Path) -> None:
        self.partition, self.first, self.saved = partition, first, saved
        self.added = partition.view.end_offset() - first.horizon
        self.messages = first.kept + self.added  # what the second compaction reads
        log_bytes = sum(path.stat().st_size for path in partition.directory.glob("*.log"))
        self.nbytes = first.size + log_bytes - partition.nbytes

    def restore_first_view(self) -> None:
        target = compacted_directory(self.partition.directory)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.saved, target)


@pytest.fixture(scope="module")
def grown(partition, scratch) -> Grown:
    """(After the tests over the first 10 M messages: this fixture appends to the partition.)"""
    partition.forget_compactions()
    first = checked_compaction(partition)
    saved = scratch / "first-view"
    shutil.copytree(compacted_directory(partition.directory), saved)
    added = partition.messages // 10
    rng = np.random.default_rng(30)
    with partition.topic.producer() as producer:
        send_keyed(producer, rng.integers(0, partition.keys, added), rng)
    return Grown(partition, first, saved)


def dict_over_view_and_new(grown: Grown) -> int:
    """Each key's latest offset over what the second compaction reads: the first view, then the new messages."""
    latest: dict = {}
    with grown.partition.topic.reader("earliest", read_compacted=True) as reader:
        while (batch := reader.read_batch()) is not None:
            latest.update(zip(batch.column("key").to_pylist(), batch.column("offset").to_pylist()))
    latest.pop(None, None)
    return len(latest)


def second_compaction(grown: Grown) -> CompactionOutcome:
    outcome = grown.partition.compact()
    assert outcome.previous_horizon == grown.first.horizon and outcome.read == grown.messages
    return outcome


def second_side(grown: Grown) -> Side:
    return Side(lambda: second_compaction(grown), prepare=grown.restore_first_view)


def test_second_compaction_baseline(bench, grown):
    bench.baseline(SECOND, DICT_BASELINE + ", the view then the new messages", messages=grown.messages,
                   nbytes=grown.nbytes)
    keys = alternate(bench, SECOND, Side(lambda: dict_over_view_and_new(grown), prepare=grown.restore_first_view),
                     second_side(grown), rounds=SLOW_ROUNDS, warmup_rounds=0)
    assert grown.first.kept <= keys <= grown.partition.keys


def test_second_compaction(bench, grown):
    # (the 10x is for the whole compaction; here the ratio is for information, the input rate targeted)
    bench.seglog(SECOND, "compact_partition, the first view probed", messages=grown.messages, nbytes=grown.nbytes,
                 min_gbps=0.2)
    side = second_side(grown)
    outcome = bench.run(side, setup=side.prepare)
    note = record_pairs(bench, SECOND, side)
    bench.note(f"{note}; read the first view's {grown.first.kept:,} messages and {grown.added:,} new ones, kept "
               f"{outcome.kept:,} ({outcome.size / MiB:.1f} MiB)")
