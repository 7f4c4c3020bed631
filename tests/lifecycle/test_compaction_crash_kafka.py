"""Kafka's model of compaction under crashes and concurrent readers (issue 29, Safety; docs/LIFECYCLE.md,
Compaction): a topic whose cleanup_policy is 'compact' is compacted by the maintenance pass, which commits the
next generation of the view (log_compacted) and then deletes the log's segments below its horizon; every
reader reads the view where the log no longer has the messages.

The crash loop: a child produces self-describing keyed messages (helpers_compaction.message_for with
keyless=False: some tombstones, no keyless ones, which a compacting topic refuses) and runs the maintenance
pass, by a manual clock that moves a second per message written; it is SIGKILLed at a random moment (inside
a compaction, inside its commit, between the commit and the segment deletion, during the deletion, or while
producing). The test reopens the directory and asserts: `seglog check` reports no damage; a plain reader from
'earliest' sees every key's final state as the last message it sees of that key (Kafka's promise; tombstones
count while kept), every offset at most once, in order, and the whole log from its first segment; a
compacted reader gives exactly each key's latest message with a value below the horizon, then the log; a
durable subscription consumed plainly gets every key's final state too, nothing counted as evicted.

The readers: readers and a consumer in another process read while a child produces and runs the maintenance
pass, which compacts and deletes segments, in a loop: no FileNotFoundError, no SIGBUS, nothing skipped,
every key's final state seen."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers_compaction import (
    CrashingChild,
    assert_no_damage,
    clock_at,
    final_state_problems,
    latest_per_key,
    order_problems,
    read_rows,
    started,
    stop_children,
    written,
)

import seglog
from helpers_storage import describe_exit
from seglog.storage.compacted import COMPACTED_DIRECTORY, DATA_SUFFIX, STATE_STAGING, read_state

TOPIC = "t"
SUBSCRIPTION = "s"
ROUNDS = 20
# delete_retention: long enough that no tombstone goes during a run (a second of the clock per message
# written), or short enough that they go all the time
KEEP_TOMBSTONES, DROP_TOMBSTONES = "30 days", "5 min"


def compacting_topic(data: Path, delete_retention: str, segment_size: str = "4 KiB") -> None:
    """The topic the tests compact, with the subscription `s` at its earliest message."""
    with seglog.open(data, clock=seglog.ManualClock(clock_at(0)), background=False) as log:
        topic = log.create_topic(TOPIC, segment_size=segment_size, cleanup_policy="compact",
                                 min_cleanable_dirty_ratio=0.1, delete_retention=delete_retention)
        topic.subscribe(SUBSCRIPTION, initial_position="earliest").close()


# The child: argv data directory, seed. Prints "ack <end>" after every acknowledged call, and the step it
# begins: "producing", "maintaining", "compacting" (a compaction, up to its commit), "committing" (writing
# and renaming state.json), "committed" (the commit done: the segments not yet deleted), "deleting",
# "deleted", "maintained".
KAFKA_WRITER = """
import os, random, sys
import seglog
from helpers_compaction import clock_at, message_for, messages_for
from seglog.lifecycle import compaction, maintenance
from seglog.storage.store import PartitionStore

def announce(step):
    os.write(1, step.encode() + b"\\n")

def announced(before, function, after=None):
    def call(*args, **kwargs):
        announce(before)
        result = function(*args, **kwargs)
        if after is not None:
            announce(after)
        return result
    return call

maintenance.compact_partition = announced("compacting", maintenance.compact_partition)
compaction.commit_state = announced("committing", compaction.commit_state, "committed")
PartitionStore.delete_segments = announced("deleting", PartitionStore.delete_segments, "deleted")

data, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
clock = seglog.ManualClock(clock_at(0))
log = seglog.open(data, clock=clock, background=False)
topic = log.topic("t")
producer = topic.producer()
end = topic.end_offset()
os.write(1, b"ack %d\\n" % end)
while True:
    clock.set(clock_at(end))
    announce("producing")
    if rng.random() < 0.8:
        count = rng.randint(1, 300)
        keys, values = messages_for(end, count, keyless=False)
        assert producer.send_batch(values, keys=keys, partition=0).offset == end
    else:
        count = rng.randint(1, 20)
        for offset in range(end, end + count):
            key, value = message_for(offset, keyless=False)
            producer.send(value, key=key, partition=0)
        producer.flush()
    end += count
    os.write(1, b"ack %d\\n" % end)
    if rng.random() < 0.6:
        announce("maintaining")
        log.run_maintenance()
        announce("maintained")
"""


class Subscriber:
    """The durable subscription's side of the crash loop: what it acknowledged so far, round after round."""

    def __init__(self, rng: random.Random, tombstones_may_go: bool) -> None:
        self.rng = rng
        self.tombstones_may_go = tombstones_may_go
        self.acknowledged: dict[int, tuple] = {}  # offset -> (offset, key, value)
        self.delivered = 0

    def consume(self, topic, end: int) -> None:
        """Receive everything the subscription has now; check it; acknowledge all of it, or a random part."""
        consumer = topic.subscribe(SUBSCRIPTION)
        try:
            rows: list[tuple] = []
            while (batch := consumer.receive_batch(self.rng.randint(1, 50))) is not None:
                rows += zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                            batch.column("value").to_pylist())
            assert order_problems(rows) == []
            assert [row[0] for row in rows if row[0] in self.acknowledged] == [], "acknowledged, given again"
            assert all(row[0] < end for row in rows)
            assert final_state_problems([*self.acknowledged.values(), *rows], end,
                                        tombstones_may_go=self.tombstones_may_go, lagging=True) == []
            self.delivered += len(rows)
            acked = self._acknowledge(consumer, rows)
        finally:
            consumer.close()
        stats = topic.stats()["subscriptions"][SUBSCRIPTION]
        assert stats["msgEvicted"] == 0
        if acked == len(rows):
            assert stats["msgBacklog"] == 0

    def _acknowledge(self, consumer, rows: list[tuple]) -> int:
        """All of `rows`, or a prefix cumulatively and some of the rest one by one; how many."""
        if not rows:
            return 0
        if self.rng.random() < 0.5:
            chosen = rows
            consumer.ack_cumulative(rows[-1][0], 0)
        else:
            prefix = self.rng.randrange(len(rows))
            chosen = rows[:prefix] + [row for row in rows[prefix:] if self.rng.random() < 0.3]
            if prefix:
                consumer.ack_cumulative(rows[prefix - 1][0], 0)
            for row in chosen[prefix:]:
                consumer.ack(row[0], 0)
        self.acknowledged.update((row[0], row) for row in chosen)
        return len(chosen)


def verify_after_crash(data: Path, acknowledged: int, subscriber: Subscriber) -> dict:
    """Reopen a crashed data directory and check the crash broke nothing; what it found there."""
    assert_no_damage(data)
    tombstones_may_go = subscriber.tombstones_may_go
    with seglog.open(data, clock=seglog.ManualClock(clock_at(0)), background=False) as log:
        topic = log.topic(TOPIC)
        end = topic.end_offset()
        assert end >= acknowledged, f"{acknowledged} messages acknowledged, {end} kept"
        view = topic.partition_view(0)
        state = read_state(view.directory)
        horizon = 0 if state is None else state.horizon
        assert horizon <= end and (state is None or state.log_compacted)
        earliest = topic.earliest_offset()
        assert earliest <= horizon or earliest == 0, f"segments deleted up to {earliest}, horizon {horizon}"

        for rows_per_call in (None, 7):  # a plain reader from 'earliest': Kafka's promise
            reader = topic.reader()
            rows = read_rows(reader, rows_per_call)
            assert reader.skipped == 0
            assert order_problems(rows) == []
            assert [row[0] for row in rows if row[0] >= earliest] == list(range(earliest, end)), \
                f"the log from its first segment, {earliest}, is not read whole"
            assert final_state_problems(rows, end, tombstones_may_go=tombstones_may_go) == []

        history = written(end)
        expected = latest_per_key(history, horizon) + history[horizon:]
        assert read_rows(topic.reader(read_compacted=True)) == expected
        assert read_rows(topic.reader(read_compacted=True), 7) == expected

        subscriber.consume(topic, end)
        compacted = view.directory / COMPACTED_DIRECTORY
        names = {path.name for path in compacted.iterdir()} if compacted.is_dir() else set()
        named = None if state is None else state.file_name
        return {"end": end, "horizon": horizon,
                "segments below the horizon": sum(1 for base in view.bases[1:] if base <= horizon),
                "unfinished compaction's files": any(name == STATE_STAGING or (name.endswith(DATA_SUFFIX)
                                                                               and name != named) for name in names)}


@pytest.mark.slow
@pytest.mark.parametrize("delete_retention", [KEEP_TOMBSTONES, DROP_TOMBSTONES])
def test_sigkill_during_produce_and_maintenance_loops_breaks_nothing_kafka(tmp_path: Path,
                                                                          delete_retention: str) -> None:
    data = tmp_path / "data"
    compacting_topic(data, delete_retention)
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    print(f"seed {seed}")
    rng.seed(seed)
    subscriber = Subscriber(random.Random(seed), tombstones_may_go=delete_retention == DROP_TOMBSTONES)
    steps: Counter[str] = Counter()
    left = Counter()
    ends, horizons = [], []
    started = time.monotonic()
    for crash in range(ROUNDS):
        child = CrashingChild(KAFKA_WRITER, data, rng.randrange(1 << 30))
        steps[child.kill_after(rng.uniform(0.0, 0.3))] += 1
        found = verify_after_crash(data, child.acknowledged, subscriber)
        assert found["end"] >= max(ends, default=0), f"round {crash}: the end went back"
        assert found["horizon"] >= max(horizons, default=0), f"round {crash}: the horizon went back"
        ends.append(found["end"])
        horizons.append(found["horizon"])
        left["segments below the horizon"] += found["segments below the horizon"] > 0
        left["unfinished compaction's files"] += found["unfinished compaction's files"]
    print(f"{ROUNDS} kills at {dict(steps)}; found after them: {dict(left)}; end {ends[-1]}, horizon "
          f"{horizons[-1]}, {subscriber.delivered} messages delivered, {time.monotonic() - started:.1f} s")


# The compacting process: argv data directory. Appends a few messages and runs the maintenance pass, which
# compacts and deletes the compacted segments (small ones: one is sealed every few rounds), the clock a
# second further per message, again and again until a line comes on stdin (at most 20000 times); then
# prints how many compactions and segment deletions it made, and the end offset.
KAFKA_COMPACTOR = """
import random, select, sys
import seglog
from helpers_compaction import clock_at, messages_for

rng = random.Random(7)
clock = seglog.ManualClock(clock_at(0))
with seglog.open(sys.argv[1], clock=clock, background=False) as log:
    topic = log.topic("t")
    producer = topic.producer()
    print("ready", flush=True)
    rounds = compactions = deletions = 0
    while rounds < 20000 and not select.select([sys.stdin], [], [], 0)[0]:
        end = topic.end_offset()
        clock.set(clock_at(end))
        keys, values = messages_for(end, rng.randint(1, 8), keyless=False)
        producer.send_batch(values, keys=keys, partition=0)
        report = log.run_maintenance()
        compactions += len(report.compactions)
        deletions += len(report.deleted_segments)
        rounds += 1
    end = topic.end_offset()
    producer.close()
print(compactions, deletions, end, flush=True)
"""

# The other process: argv data directory, reads. Plain readers from 'earliest' read the topic to its end, a
# few rows a call, `reads` times; after each, a reader and a consumer of the subscription `s` in a thread
# (which acknowledges what it gets) that lag behind take a few messages each, so that compactions delete the
# segments under them. It prints "read <reads>" (or the problems and exits 3), then waits for a line on stdin
# (the compactor stopped), lets the lagging reader and consumer read to the end, and prints "consumed <n>" or
# the problems.
READERS_AND_CONSUMER = """
import sys, threading
import seglog
from helpers_compaction import final_state_problems, order_problems, read_rows

data, reads = sys.argv[1], int(sys.argv[2])
turns, stop = threading.Semaphore(0), threading.Event()
consumed, failures = [], []

def rows_of(batch):
    return list(zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                    batch.column("value").to_pylist()))

def problems_of(rows, end, skipped):
    problems = order_problems(rows) + final_state_problems(rows, end, tombstones_may_go=False)
    return problems + ([f"{skipped} messages skipped"] if skipped else [])

def consume(topic):
    try:
        with topic.subscribe("s") as consumer:
            call = 0
            while turns.acquire() and not stop.is_set():
                call += 1
                batch = consumer.receive_batch(1 + call % 5)
                if batch is not None:
                    consumed.extend(rows_of(batch))
                    consumer.ack(batch)
            while (batch := consumer.receive_batch(1 + call % 5)) is not None:
                consumed.extend(rows_of(batch))
                consumer.ack(batch)
        failures.extend(problems_of(consumed, topic.end_offset(), 0))
        subscription = topic.stats()["subscriptions"]["s"]
        if (subscription["msgEvicted"], subscription["msgBacklog"]) != (0, 0):
            failures.append(f"evicted {subscription['msgEvicted']}, backlog {subscription['msgBacklog']}")
    except BaseException as error:
        failures.append(f"the consumer: {type(error).__name__}: {error}")

with seglog.open(data, background=False) as log:
    topic = log.topic("t")
    consumer = threading.Thread(target=consume, args=(topic,))
    consumer.start()
    lagging, lagging_rows = topic.reader(), []
    print("ready", flush=True)
    for read in range(reads):
        reader = topic.reader()
        problems = problems_of(read_rows(reader, 1 + read % 5), reader.offset, reader.skipped)
        if problems:
            print(*problems, sep="\\n", flush=True)
            stop.set()
            turns.release()
            consumer.join(60)
            sys.exit(3)
        if (batch := lagging.read_batch(1 + read % 7)) is not None:
            lagging_rows += rows_of(batch)
        turns.release()
    print("read", reads, flush=True)
    sys.stdin.readline()
    stop.set()
    turns.release()
    lagging_rows += read_rows(lagging, 3)
    failures.extend(f"the lagging reader: {problem}"
                    for problem in problems_of(lagging_rows, topic.end_offset(), lagging.skipped))
    consumer.join(120)
if failures:
    print(*failures, sep="\\n", flush=True)
    sys.exit(3)
print("consumed", len(consumed), "lagging reader", len(lagging_rows), flush=True)
"""

READS = 300


@pytest.mark.slow
def test_readers_and_a_consumer_in_another_process_read_on_while_maintenance_compacts_and_deletes(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    compacting_topic(data, KEEP_TOMBSTONES, segment_size="1 KiB")
    compactor = started(KAFKA_COMPACTOR, str(data))
    other = None
    started_at = time.monotonic()
    try:
        other = started(READERS_AND_CONSUMER, str(data), str(READS))
        assert other.stdout is not None
        read = other.stdout.readline()
        counts, compactor_err = compactor.communicate("stop\n", timeout=60)
        out, err = other.communicate("stop\n", timeout=180)
    finally:
        stop_children(compactor, other)
    assert read == f"read {READS}\n" and other.returncode == 0, \
        f"the other process: {describe_exit(other.returncode)}\n{read}{out}{err}"
    assert compactor.returncode == 0, f"the compactor: {describe_exit(compactor.returncode)}\n{compactor_err}"
    compactions, deletions, end = map(int, counts.split())
    assert compactions > 20 and deletions > 20, (compactions, deletions)  # (they happened during the reads)
    print(f"{compactions} compactions and {deletions} segment deletions of {end} messages during {READS} reads, a "
          f"lagging reader's {out.split()[-1]} messages and a consumer's {out.split()[1]} in another process, "
          f"{time.monotonic() - started_at:.1f} s")


ASKED = {"end_offset": lambda topic: topic.end_offset(), "stats": lambda topic: topic.stats(),
         "internal_stats": lambda topic: topic.internal_stats(),
         "explain_retention": lambda topic: topic.explain_retention(),
         "reader('latest')": lambda topic: topic.reader("latest").close()}


@pytest.mark.slow
def test_asking_another_process_for_offsets_and_stats_while_compaction_deletes_segments_finds_every_file(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    compacting_topic(data, KEEP_TOMBSTONES, segment_size="1 KiB")
    busy = threading.Event()

    def spin() -> None:  # another thread of this process, so that the asking one is switched out at any point
        while not busy.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin)
    spinner.start()
    compactor = started(KAFKA_COMPACTOR, str(data))
    failures: Counter[str] = Counter()
    asked = 0
    try:
        with seglog.open(data, background=False) as log:
            topic = log.topic(TOPIC)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not failures:
                for name, ask in ASKED.items():
                    try:
                        ask(topic)
                    except FileNotFoundError:
                        failures[name] += 1
                    asked += 1
        counts, compactor_err = compactor.communicate("stop\n", timeout=60)
    finally:
        busy.set()
        spinner.join(30)
        stop_children(compactor)
    assert compactor.returncode == 0, f"the compactor: {describe_exit(compactor.returncode)}\n{compactor_err}"
    compactions, deletions, end = map(int, counts.split())
    assert dict(failures) == {}, f"FileNotFoundError in {asked} calls, {deletions} segment deletions"
    print(f"{asked} calls during {compactions} compactions and {deletions} segment deletions of {end} messages")
