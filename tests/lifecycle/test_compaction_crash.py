"""Compaction under crashes and concurrent readers (issue 29, Safety; docs/LIFECYCLE.md, Compaction).

The crash loop: a child process produces self-describing keyed messages (helpers_compaction.message_for:
some tombstones, some keyless) and compacts in a loop, by the storage-level compact_partition (at the end
offset or a segment's base, with or without Kafka's tombstone retention, now and then with an offset map
too small for the range) and by `log.admin.topics.compact`; it is SIGKILLed at a random moment. The test
reopens the directory and asserts: `seglog check` reports no damage (notes at most: an unfinished append, an
unfinished compaction's files); a compacted read gives each key's latest message below the horizon
state.json names, exactly once, in offset order, then the log from the horizon; a plain read has every
acknowledged message, as written.

The readers: readers in threads of this process and in another process read with read_compacted while
compactions replace the view in a loop: none gets FileNotFoundError or dies of SIGBUS, and none skips a
key's latest message."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest
from helpers_compaction import (
    CrashingChild,
    assert_no_damage,
    compacted_read_problems,
    latest_per_key,
    messages_for,
    read_rows,
    started,
    stop_children,
    wrong_messages,
)

import seglog
from helpers_storage import describe_exit
from seglog.storage.check import check_log
from seglog.storage.compacted import read_state

TOPIC = "t"
ROUNDS = 20

# The child: argv data directory, seed. Prints "ack <end>" after every acknowledged call, "compacting" and
# "compacted" around each compaction.
COMPACTING_WRITER = """
import os, random, sys
import seglog
from helpers_compaction import MAP_KEYS_SMALL, message_for, messages_for
from seglog.lifecycle.compaction import MAP_KEYS, compact_partition
from seglog.storage.segment import list_segments

data, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
log = seglog.open(data)
topic = log.topic("t")
producer = topic.producer()
view = topic.partition_view(0)
os.write(1, b"ack %d\\n" % topic.end_offset())
while True:
    end = topic.end_offset()
    if rng.random() < 0.8:
        count = rng.randint(1, 300)
        keys, values = messages_for(end, count)
        assert producer.send_batch(values, keys=keys, partition=0).offset == end
    else:
        count = rng.randint(1, 20)
        for offset in range(end, end + count):
            key, value = message_for(offset)
            producer.send(value, key=key, partition=0)
        producer.flush()
    end += count
    os.write(1, b"ack %d\\n" % end)
    if rng.random() < 0.6:
        os.write(1, b"compacting\\n")
        if rng.random() < 0.3:
            log.admin.topics.compact("t")
        else:
            horizon = rng.choice([*list_segments(view.directory), end, end])
            compact_partition(view, horizon=horizon, now_ms=end, delete_retention_ms=rng.choice([None, 0, 300]),
                              max_keys=rng.choice([MAP_KEYS, MAP_KEYS, MAP_KEYS_SMALL]))
        os.write(1, b"compacted\\n")
"""


def verify_after_crash(data: Path, acknowledged: int) -> tuple[int, int]:
    """Reopen a crashed data directory and check the crash broke nothing; (end offset, horizon)."""
    assert_no_damage(data)
    with seglog.open(data) as log:
        topic = log.topic(TOPIC)
        log_rows = read_rows(topic.reader())
        end = topic.end_offset()
        assert [row[0] for row in log_rows] == list(range(end)), "a plain read is not dense from 0"
        assert end >= acknowledged, f"{acknowledged} messages acknowledged, {end} kept"
        assert wrong_messages(log_rows) == []
        state = read_state(topic.partition_view(0).directory)
        horizon = 0 if state is None else state.horizon
        assert horizon <= end
        expected = latest_per_key(log_rows, horizon) + [row for row in log_rows if row[0] >= horizon]
        assert read_rows(topic.reader(read_compacted=True)) == expected
        assert read_rows(topic.reader(read_compacted=True), 7) == expected
    return end, horizon


@pytest.mark.slow
def test_sigkill_during_produce_and_compaction_loops_breaks_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        log.create_topic(TOPIC, segment_size="16 KiB")
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    print(f"seed {seed}")
    rng.seed(seed)
    mid_compaction, ends, horizons = 0, [], []
    started = time.monotonic()
    for crash in range(ROUNDS):
        child = CrashingChild(COMPACTING_WRITER, data, rng.randrange(1 << 30))
        mid_compaction += child.kill_after(rng.uniform(0.0, 0.3)) == "compacting"
        end, horizon = verify_after_crash(data, child.acknowledged)
        assert end >= max(ends, default=0), f"round {crash}: the end went back"
        assert horizon >= max(horizons, default=0), f"round {crash}: the horizon went back"
        ends.append(end)
        horizons.append(horizon)
    with seglog.open(data) as log:  # the next compaction removes what unfinished ones left
        log.admin.topics.compact(TOPIC)
    report = check_log(data)
    assert report.ok and not [note for note in report.notes if "compact" in note.reason]
    print(f"{ROUNDS} kills, {mid_compaction} during a compaction, end {ends[-1]}, horizon {horizons[-1]}, "
          f"{time.monotonic() - started:.1f} s")


# The reader in another process: argv data directory, reads. Prints "ready", then "ok <reads>" or the problems.
OTHER_PROCESS_READER = """
import sys
import seglog
from helpers_compaction import compacted_read_problems

data, reads = sys.argv[1], int(sys.argv[2])
with seglog.open(data, background=False) as log:
    topic = log.topic("t")
    print("ready", flush=True)
    for read in range(reads):
        problems = compacted_read_problems(topic, rows_per_call=1 + read % 5)
        if problems:
            print(*problems, sep="\\n", flush=True)
            sys.exit(3)
print("ok", reads, flush=True)
"""

# The compacting process: argv data directory. Appends a few messages and compacts the partition, again and
# again, until a line comes on stdin (at most 20000 times); then prints how many compactions it made.
COMPACTING_PRODUCER = """
import random, select, sys
import seglog
from helpers_compaction import messages_for
from seglog.lifecycle.compaction import compact_partition

rng = random.Random(7)
with seglog.open(sys.argv[1], background=False) as log:
    topic = log.topic("t")
    producer = topic.producer()
    view = topic.partition_view(0)
    print("ready", flush=True)
    compactions = 0
    while compactions < 20000 and not select.select([sys.stdin], [], [], 0)[0]:
        end = topic.end_offset()
        keys, values = messages_for(end, rng.randint(1, 8))
        producer.send_batch(values, keys=keys, partition=0)
        compact_partition(view, horizon=view.end_offset(), now_ms=0, delete_retention_ms=None)
        compactions += 1
    producer.close()
print(compactions, flush=True)
"""

READS = 150


@pytest.mark.slow
def test_readers_in_threads_and_another_process_keep_reading_while_compactions_replace_the_view(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    with seglog.open(data) as log:
        topic = log.create_topic(TOPIC, segment_size="16 KiB")
        with topic.producer() as producer:
            keys, values = messages_for(0, 2000)
            producer.send_batch(values, keys=keys, partition=0)
        log.admin.topics.compact(TOPIC)
    compacting = started(COMPACTING_PRODUCER, str(data))
    other = None
    try:
        other = started(OTHER_PROCESS_READER, str(data), str(READS))
        with seglog.open(data, background=False) as log:
            topic = log.topic(TOPIC)
            failures: list[str] = []
            reads = [0, 0]

            def read_in_a_thread(number: int) -> None:
                try:
                    for read in range(READS):
                        problems = compacted_read_problems(topic, rows_per_call=1 + (read + number) % 5)
                        failures.extend(problems)
                        reads[number] += 1
                        if problems:
                            return
                except BaseException as error:  # noqa: BLE001 - any error fails the test: FileNotFoundError first
                    failures.append(f"{type(error).__name__}: {error}")

            threads = [threading.Thread(target=read_in_a_thread, args=(n,)) for n in (0, 1)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
        out, err = other.communicate(timeout=120)
        compactions_out, compactions_err = compacting.communicate("stop\n", timeout=60)
    finally:
        stop_children(compacting, other)
    assert failures == []
    assert other.returncode == 0, f"the other process's reader: {describe_exit(other.returncode)}\n{out}{err}"
    assert compacting.returncode == 0, f"the compacting process: {describe_exit(compacting.returncode)}\n" \
                                       f"{compactions_err}"
    assert reads == [READS, READS] and out.strip() == f"ok {READS}"
    compactions = int(compactions_out)
    assert compactions > 20, compactions  # (swaps happened during the reads)
    print(f"{compactions} compactions during 2 x {READS} reads in threads and {READS} in another process")
